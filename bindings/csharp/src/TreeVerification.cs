namespace SpecLA {

/// <summary>What Session.VerifyTree gave: a plain value, copied out of the library.</summary>
public sealed class TreeVerification {
  readonly int[] acceptedNodes;
  readonly float[] nodeLogits;

  internal TreeVerification(int[] acceptedNodes, int bonusToken, float[] nodeLogits) {
    this.acceptedNodes = acceptedNodes;
    BonusToken = bonusToken;
    this.nodeLogits = nodeLogits;
  }

  /// <summary>The accepted node indices, root to leaf (a copy).</summary>
  public int[] AcceptedNodes {
    get { return (int[])acceptedNodes.Clone(); }
  }

  /// <summary>The target's own next token after the accepted path; the session feeds it at its next call.</summary>
  public int BonusToken { get; private set; }

  /// <summary>The target's logits after every node (nodes x VocabSize, row-major), or null when not asked for.</summary>
  public float[] NodeLogits {
    get { return nodeLogits == null ? null : (float[])nodeLogits.Clone(); }
  }
}

}
