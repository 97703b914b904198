using System;
using System.Runtime.InteropServices;
using System.Text;

namespace SpecLA {

/// <summary>
/// A buffer the C wrapper allocated for one result (generated ids, logits, UTF-8 text); matches
/// specla_binding_tokens / _floats / _text in bindings/specla.i. Each Take* copies it into managed
/// memory and frees the native copy, so it may be taken once.
/// </summary>
[StructLayout(LayoutKind.Sequential)]
internal struct NativeBuffer {
  public IntPtr Data;
  public UIntPtr Size;

  // The wrapper library SWIG generates (-dllimport specla_csharp) exports the matching free.
  [DllImport("specla_csharp", EntryPoint = "specla_binding_free")]
  private static extern void Free(IntPtr buffer);

  private int Count {
    get { return checked((int)Size.ToUInt64()); }
  }

  public int[] TakeInt32s() {
    var values = new int[Count];
    if (values.Length > 0) Marshal.Copy(Data, values, 0, values.Length);
    Free(Data);
    return values;
  }

  public float[] TakeSingles() {
    var values = new float[Count];
    if (values.Length > 0) Marshal.Copy(Data, values, 0, values.Length);
    Free(Data);
    return values;
  }

  public byte[] TakeBytes() {
    var bytes = new byte[Count];
    if (bytes.Length > 0) Marshal.Copy(Data, bytes, 0, bytes.Length);
    Free(Data);
    return bytes;
  }

  public string TakeUtf8() {
    var bytes = new byte[Count];
    if (bytes.Length > 0) Marshal.Copy(Data, bytes, 0, bytes.Length);
    Free(Data);
    return Encoding.UTF8.GetString(bytes);
  }

  /// <summary>A NUL-terminated UTF-8 string the library owns (not freed here).</summary>
  public static string Utf8ToString(IntPtr text) {
    if (text == IntPtr.Zero) return "";
    int length = 0;
    while (Marshal.ReadByte(text, length) != 0) ++length;
    var bytes = new byte[length];
    Marshal.Copy(text, bytes, 0, length);
    return Encoding.UTF8.GetString(bytes);
  }
}

}
