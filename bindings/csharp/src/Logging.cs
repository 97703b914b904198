using System;
using System.Runtime.InteropServices;

namespace SpecLA {

/// <summary>Severity of a library log message (specla_log_level); the values are the C enum's.</summary>
public enum LogLevel {
  Debug = 0,
  Info = 1,
  Warn = 2,
  Error = 3,
}

/// <summary>
/// The library's log messages (specla_set_log_callback), process-wide. Without a handler, warnings
/// and errors go to stderr. The handler is called from whatever thread logs, also threads the
/// library started, so it must be thread-safe; an exception it throws is dropped.
/// </summary>
public static class Logging {
  // Matches specla_csharp_log_handler in bindings/csharp/specla_csharp.swg.
  [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
  delegate void NativeHandler(int level, IntPtr utf8Message);

  [DllImport("specla_csharp", EntryPoint = "SpeclaInstallLogHandler")]
  static extern int Install(NativeHandler handler, int minLevel);

  [DllImport("specla_csharp", EntryPoint = "SpeclaInLogCall")]
  static extern int InLogCall();

  static readonly object gate = new object();
  // The delegate the library holds: reachable until a later installation has returned.
#pragma warning disable 414 // written only, to hold a reference
  static NativeHandler installed;
#pragma warning restore 414

  /// <summary>
  /// Sends every message at minLevel or above to handler (null: back to stderr). When it returns,
  /// the replaced handler is not running on any thread and will not be called again. Not allowed
  /// from inside a handler (InvalidOperationException), where that guarantee cannot be given.
  /// </summary>
  public static void SetHandler(Action<LogLevel, string> handler, LogLevel minLevel = LogLevel.Info) {
    if (InLogCall() != 0)
      throw new InvalidOperationException("the log handler cannot be replaced from inside a log handler");
    lock (gate) {
      NativeHandler native = null;
      if (handler != null) {
        native = (level, message) => {
          try {
            handler((LogLevel)level, NativeBuffer.Utf8ToString(message));
          } catch (Exception) {
            // Nothing may unwind into the library's logging; a failing handler loses its message.
          }
        };
      }
      if (Install(native, (int)minLevel) == 0) throw new OutOfMemoryException("installing the log handler");
      installed = native;
    }
  }

  /// <summary>Restores the default (warnings and errors to stderr); the removed handler is not called again.</summary>
  public static void RemoveHandler() {
    SetHandler(null, LogLevel.Warn);
  }
}

}
