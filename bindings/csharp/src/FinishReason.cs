namespace SpecLA {

/// <summary>Why a generation finished (specla_finish_reason); the values are the C enum's.</summary>
public enum FinishReason {
  /// <summary>Not finished: more steps follow.</summary>
  None = 0,
  /// <summary>The model's EOS token.</summary>
  Eos = 1,
  /// <summary>A stop string completed; Generation.StopIndex() says which.</summary>
  StopString = 2,
  /// <summary>The token budget was used up.</summary>
  MaxTokens = 3,
  /// <summary>Generation.Abort() or a cancelled token.</summary>
  Aborted = 4,
  /// <summary>A step failed (it threw the SpeclaException).</summary>
  Error = 5,
}

}
