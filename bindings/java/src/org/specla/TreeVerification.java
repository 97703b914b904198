package org.specla;

/** What Session.verifyTree gave: a plain value, copied out of the library. */
public final class TreeVerification {
  private final int[] acceptedNodes;
  private final int bonusToken;
  private final float[] nodeLogits;

  TreeVerification(int[] acceptedNodes, int bonusToken, float[] nodeLogits) {
    this.acceptedNodes = acceptedNodes;
    this.bonusToken = bonusToken;
    this.nodeLogits = nodeLogits;
  }

  /** The accepted node indices, root to leaf (a copy). */
  public int[] acceptedNodes() {
    return acceptedNodes.clone();
  }

  /** The target's own next token after the accepted path; the session feeds it at its next call. */
  public int bonusToken() {
    return bonusToken;
  }

  /** The target's logits after every node (nodes x vocabSize, row-major), or null when not asked for. */
  public float[] nodeLogits() {
    return nodeLogits == null ? null : nodeLogits.clone();
  }
}
