package org.specla;

import java.nio.charset.StandardCharsets;

/**
 * A SpecLA call failed. Carries the library's status code and the message the library (or the
 * binding, for a closed handle) gave for it, e.g. status {@link Status#IO} with
 * "model folder '/x' does not exist or is not a folder".
 *
 * <p>Unchecked: every call of the binding can throw it, as every C call can return a status.
 */
public class SpeclaException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int code;

  /** Raised from the JNI wrapper; the message arrives as the library's UTF-8 bytes. */
  SpeclaException(int code, byte[] utf8Message) {
    super(new String(utf8Message, StandardCharsets.UTF_8));
    this.code = code;
  }

  /** The status, or null for a code this version of the binding does not know. */
  public Status getStatus() {
    for (Status status : Status.values()) {
      if (status.swigValue() == code) return status;
    }
    return null;
  }

  /** The numeric status code, as specla_status in C. */
  public int getCode() {
    return code;
  }

  @Override
  public String toString() {
    Status status = getStatus();
    return getClass().getName() + " [" + (status != null ? status.name() : "status " + code) + "]: " + getMessage();
  }
}
