using System;
using System.Runtime.InteropServices;

namespace SpecLA {

/// <summary>
/// A managed int[], float[] or byte[] handed to C as (pointer, count) for the duration of one call; matches
/// specla_binding_span in bindings/csharp/specla_csharp.swg. The array is pinned so the garbage
/// collector cannot move it while C reads it.
/// </summary>
[StructLayout(LayoutKind.Sequential)]
internal struct NativeSpan {
  public IntPtr Data;
  public UIntPtr Size;

  public static GCHandle Pin(int[] values) {
    return values == null ? default(GCHandle) : GCHandle.Alloc(values, GCHandleType.Pinned);
  }

  public static GCHandle Pin(byte[] bytes) {
    return bytes == null ? default(GCHandle) : GCHandle.Alloc(bytes, GCHandleType.Pinned);
  }

  public static NativeSpan Of(GCHandle pin, byte[] bytes) {
    var span = new NativeSpan();
    if (bytes != null && pin.IsAllocated) {
      span.Data = pin.AddrOfPinnedObject();
      span.Size = new UIntPtr((uint)bytes.Length);
    }
    return span;
  }

  public static void Unpin(GCHandle pin) {
    if (pin.IsAllocated) pin.Free();
  }

  public static GCHandle Pin(float[] values) {
    return values == null ? default(GCHandle) : GCHandle.Alloc(values, GCHandleType.Pinned);
  }

  public static NativeSpan Of(GCHandle pin, float[] values) {
    var span = new NativeSpan();
    if (values != null && pin.IsAllocated) {
      span.Data = pin.AddrOfPinnedObject();
      span.Size = new UIntPtr((uint)values.Length);
    }
    return span;
  }

  public static NativeSpan Of(GCHandle pin, int[] values) {
    var span = new NativeSpan();
    if (values != null && pin.IsAllocated) {
      span.Data = pin.AddrOfPinnedObject();
      span.Size = new UIntPtr((uint)values.Length);
    }
    return span;
  }
}

}
