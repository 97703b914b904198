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

  // One pair for every element type: the SWIG typemaps (specla_csharp.swg) pass int[], float[] and
  // byte[], all blittable, which GCHandle pins alike; Length counts elements whatever their size.
  public static GCHandle Pin(Array values) {
    return values == null ? default(GCHandle) : GCHandle.Alloc(values, GCHandleType.Pinned);
  }

  public static NativeSpan Of(GCHandle pin, Array values) {
    var span = new NativeSpan();
    if (values != null && pin.IsAllocated) {
      span.Data = pin.AddrOfPinnedObject();
      span.Size = new UIntPtr((uint)values.Length);
    }
    return span;
  }

  public static void Unpin(GCHandle pin) {
    if (pin.IsAllocated) pin.Free();
  }
}

}
