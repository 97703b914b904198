package org.specla;

/** Severity of a library log message (specla_log_level); the values are the C enum's. */
public enum LogLevel {
  DEBUG,
  INFO,
  WARN,
  ERROR;

  static LogLevel of(int value) {
    LogLevel[] all = values();
    return value >= 0 && value < all.length ? all[value] : ERROR;
  }
}
