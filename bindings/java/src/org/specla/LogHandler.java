package org.specla;

/**
 * Receives the library's log messages (see Logging). Called from whatever thread logs, also
 * threads the library started, so it must be thread-safe. An exception it throws is dropped.
 */
@FunctionalInterface
public interface LogHandler {
  void log(LogLevel level, String message);
}
