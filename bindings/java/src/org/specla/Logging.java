package org.specla;

import java.nio.charset.StandardCharsets;

/**
 * The library's log messages (specla_set_log_callback), process-wide. Without a handler, warnings
 * and errors go to stderr.
 *
 * <pre>
 * Logging.setHandler((level, message) -&gt; logger.info(level + ": " + message), LogLevel.INFO);
 * ...
 * Logging.removeHandler();
 * </pre>
 */
public final class Logging {
  static {
    Specla.version(); // loads the JNI library, which holds install()
  }

  private static final Object lock = new Object();

  private Logging() {}

  /**
   * Sends every message at minLevel or above to handler (null: back to stderr). When it returns,
   * the replaced handler is not running on any thread and will not be called again. Not allowed
   * from inside a handler (IllegalStateException), where that guarantee cannot be given.
   */
  public static void setHandler(LogHandler handler, LogLevel minLevel) {
    if (inLogCall()) throw new IllegalStateException("the log handler cannot be replaced from inside a log handler");
    synchronized (lock) {
      install(handler, minLevel.ordinal());
    }
  }

  /** Restores the default (warnings and errors to stderr); the removed handler is not called again. */
  public static void removeHandler() {
    setHandler(null, LogLevel.WARN);
  }

  private static native void install(LogHandler handler, int minLevel);

  private static native boolean inLogCall();

  /** Called by the library's log sink (the JNI trampoline). */
  private static void dispatch(LogHandler handler, int level, byte[] utf8Message) {
    try {
      handler.log(LogLevel.of(level), new String(utf8Message, StandardCharsets.UTF_8));
    } catch (Throwable dropped) {
      // Nothing may unwind into the library's logging; a failing handler loses its message.
    }
  }
}
