namespace SpecLA {

/// <summary>
/// A SpecLA call failed. Carries the library's status code and the message the library (or the
/// binding, for a disposed handle) gave for it, e.g. <see cref="SpecLA.Status.Io"/> with
/// "model folder '/x' does not exist or is not a folder".
/// </summary>
public class SpeclaException : global::System.Exception {
  /// <summary>The status the C call returned.</summary>
  public Status Status { get; }

  public SpeclaException(Status status, string message) : base(message) {
    Status = status;
  }

  public override string ToString() {
    return GetType().FullName + " [" + Status + "]: " + Message;
  }
}

}
