package org.specla;

/** Why a generation finished (specla_finish_reason); the values are the C enum's. */
public enum FinishReason {
  /** Not finished: more steps follow. */
  NONE(0),
  /** The model's EOS token. */
  EOS(1),
  /** A stop string completed; Generation.stopIndex() says which. */
  STOP_STRING(2),
  /** The token budget was used up. */
  MAX_TOKENS(3),
  /** Generation.abort(), a closed generation or an interrupted thread. */
  ABORTED(4),
  /** A step failed (it threw the SpeclaException). */
  ERROR(5);

  private final int value;

  FinishReason(int value) {
    this.value = value;
  }

  /** The C value. */
  public int value() {
    return value;
  }

  static FinishReason of(int value) {
    for (FinishReason r : values())
      if (r.value == value) return r;
    throw new IllegalArgumentException("unknown finish reason " + value);
  }
}
