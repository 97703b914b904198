// Checks the C# binding against a real model: version, error mapping, disposed and null handles,
// ownership, and greedy speculative decoding equal to plain greedy decoding.
//   mono specla_csharp_test.exe MODEL_DIR      (exit status 1 when any check fails)
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using SpecLA;

public sealed class BindingTest {
  const string Prompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
  const int MaxTokens = 64;

  readonly string modelDir;
  readonly List<string> failures = new List<string>();

  BindingTest(string modelDir) {
    this.modelDir = modelDir;
  }

  public static int Main(string[] args) {
    if (args.Length != 1) {
      Console.Error.WriteLine("usage: specla_csharp_test.exe MODEL_DIR");
      return 2;
    }
    var test = new BindingTest(args[0]);
    test.Run("version", test.Version);
    test.Run("missing model", test.MissingModel);
    test.Run("disposed and null handles", test.DisposedHandles);
    test.Run("token out of range", test.TokenOutOfRange);
    test.Run("UTF-8 round trip", test.Utf8RoundTrip);
    test.Run("model disposed before its session", test.ModelDisposedFirst);
    test.Run("speculative equals plain greedy", test.SpeculativeEqualsGreedy);
    test.Run("the learned drafter equals plain greedy", test.EagleEqualsGreedy);
    test.Run("streamed pieces equal the full text", test.StreamEqualsFullText);
    test.Run("cancellation aborts a stream", test.CancellationAborts);
    test.Run("cancellation aborts an async stream", test.CancellationAbortsAsync);
    test.Run("save, load and fork continue equally", test.SessionState);
    test.Run("a corrupted state is refused", test.CorruptedState);
    test.Run("stop strings end the stream", test.StopStrings);
    test.Run("VerifyTree accepts the model's own greedy chain", test.VerifyTreeGreedyChain);
    test.Run("every tree algorithm accepts the same path", test.VerifyTreeAlgorithms);
    test.Run("a +100 logit bias forces the token", test.LogitBiasForcesToken);
    test.Run("the stream decoder reproduces the text", test.StreamDecoderRoundTrip);
    test.Run("log messages reach the handler", test.LogHandler);
    test.Run("log handlers replaced while other threads log", test.LogHandlerAcrossThreads);
    if (test.failures.Count > 0) {
      Console.Error.WriteLine("{0} check(s) failed:", test.failures.Count);
      foreach (string f in test.failures) Console.Error.WriteLine("  " + f);
      return 1;
    }
    Console.WriteLine("all C# binding checks passed");
    return 0;
  }

  void Run(string name, Action body) {
    int before = failures.Count;
    try {
      body();
    } catch (Exception e) {
      failures.Add(name + ": unexpected " + e);
    }
    Console.WriteLine((failures.Count == before ? "ok    " : "FAIL  ") + name);
  }

  void Check(bool condition, string what) {
    if (!condition) failures.Add(what);
  }

  // Runs body, which must throw a SpeclaException with the given status; returns it.
  SpeclaException ExpectFailure(Status status, string what, Action body) {
    try {
      body();
    } catch (SpeclaException e) {
      Check(e.Status == status, what + ": status " + e.Status + ", expected " + status);
      Check(e.Message.Length > 0, what + ": empty message");
      return e;
    }
    failures.Add(what + ": no SpeclaException");
    return null;
  }

  void Version() {
    string expected = Specla.VersionMajor + "." + Specla.VersionMinor + "." + Specla.VersionPatch;
    Check(Specla.Version() == expected, "Version() is '" + Specla.Version() + "', header says " + expected);
    Check(Specla.StatusString(Status.Io).StartsWith("SPECLA_ERR_IO"), "StatusString(Io)");
  }

  void MissingModel() {
    string missing = modelDir + "/no-such-model";
    SpeclaException e = ExpectFailure(Status.Io, "loading a missing folder", () => new Model(missing).Dispose());
    if (e != null) Check(e.Message.Contains(missing), "message '" + e.Message + "' does not name " + missing);
  }

  void DisposedHandles() {
    var model = new Model(modelDir);
    var session = new Session(model);
    session.Dispose();
    session.Dispose();  // idempotent
    SpeclaException e = ExpectFailure(Status.InvalidArgument, "a disposed session",
                                      () => session.Generate(new[] { 1 }));
    if (e != null) Check(e.Message.Contains("closed"), "disposed-session message: " + e.Message);
    ExpectFailure(Status.InvalidArgument, "a session of a null model", () => new Session(null).Dispose());
    model.Dispose();
    ExpectFailure(Status.InvalidArgument, "a disposed model", () => model.Info());
    ExpectFailure(Status.InvalidArgument, "a drafter of a disposed model", () => new Drafter(model).Dispose());
  }

  void TokenOutOfRange() {
    using (var model = new Model(modelDir))
    using (var session = new Session(model)) {
      int vocab = model.Info().VocabSize;
      int bad = vocab + 5;
      SpeclaException e = ExpectFailure(Status.TokenOutOfRange, "generating from an out-of-range token",
                                        () => session.Generate(new[] { 1, bad }));
      if (e != null) Check(e.Message.Contains(bad.ToString()), "message does not name the id: " + e.Message);
      ExpectFailure(Status.TokenOutOfRange, "detokenizing an out-of-range token",
                    () => model.Detokenize(new[] { -1 }));
      // A refused call changes nothing: the session still works.
      Check(session.NPast() == 0, "NPast after a refused call is " + session.NPast());
      Check(session.Eval(new[] { 1, 2 }).Length == vocab, "Eval after a refused call");
    }
  }

  void Utf8RoundTrip() {
    string text = "h\u00e9llo w\u00f6rld \u2713 \U0001F642 = \"ok\"\n";
    using (var model = new Model(modelDir)) {
      string back = model.Detokenize(model.Tokenize(text, false, false));
      Check(back == text, "round trip gave '" + back + "'");
    }
  }

  void ModelDisposedFirst() {
    var model = new Model(modelDir);
    var session = new Session(model);
    var drafter = new Drafter(model);
    int[] prompt = model.Tokenize(Prompt);
    model.Dispose();  // the library model stays alive for the open session and drafter
    int[] output = session.GenerateSpeculative(drafter, prompt, new SpecParams());
    Check(output.Length > 0, "no tokens from a session whose model handle was disposed");
    drafter.Dispose();
    session.Dispose();
  }

  // Greedy generation of the test prompt, plain and speculative with the drafter (parameters
  // and stats filled); checks that the two outputs are equal and returns the speculative one.
  int[] SpeculativeAgainstPlain(Model model, Drafter drafter, SpecParams parameters, SpecStats stats) {
    int[] prompt = model.Tokenize(Prompt);
    Check(prompt.Length > 0, "empty prompt ids");
    int[] expected;
    using (var greedy = new GenerateParams())
    using (var plain = new Session(model)) {
      greedy.MaxTokens = MaxTokens;
      expected = plain.Generate(prompt, greedy);
      parameters.Generate = greedy;
    }
    Check(expected.Length > 0, "plain greedy generated nothing");
    int[] got;
    using (var speculative = new Session(model)) {
      got = speculative.GenerateSpeculative(drafter, prompt, parameters, stats);
    }
    Check(expected.SequenceEqual(got),
          "speculative [" + string.Join(",", got) + "] != plain [" + string.Join(",", expected) + "]");
    return got;
  }

  void SpeculativeEqualsGreedy() {
    using (var model = new Model(modelDir))
    using (var drafter = new Drafter(model))
    using (var parameters = new SpecParams())
    using (var stats = new SpecStats()) {
      int[] got = SpeculativeAgainstPlain(model, drafter, parameters, stats);
      Check(stats.Generated == got.Length, "stats.Generated " + stats.Generated + " != " + got.Length);
      Check(stats.Steps > 0 && stats.Steps <= got.Length, "stats.Steps " + stats.Steps);

      string text = model.Detokenize(got);
      Check(text.Length > 0, "empty text");
      using (var textSession = new Session(model))
      using (var textDrafter = new Drafter(model)) {
        string streamed = textSession.GenerateSpeculativeText(textDrafter, Prompt, parameters);
        Check(streamed == text, "GenerateSpeculativeText differs from Detokenize of the tokens");
      }
    }
  }

  // The model's learned drafter sits beside it (models/gdn-pycode-22m-eagle); a folder that is
  // not a drafter is refused with the library's message.
  void EagleEqualsGreedy() {
    using (var eagle = new DrafterParams())
    using (var model = new Model(modelDir))
    using (var parameters = new SpecParams())
    using (var stats = new SpecStats()) {
      eagle.Type = DrafterType.Eagle;
      eagle.SetPath(modelDir + "-eagle");
      using (var drafter = new Drafter(model, eagle)) {
        SpeculativeAgainstPlain(model, drafter, parameters, stats);
        Check(stats.Accepted > 0, "the learned drafter had nothing accepted in " + stats.Steps + " passes");
      }
      using (var notADrafter = new DrafterParams()) {
        notADrafter.Type = DrafterType.Eagle;
        notADrafter.SetPath(modelDir);
        SpeclaException e = ExpectFailure(Status.Format, "a model folder as a drafter",
                                          () => new Drafter(model, notADrafter).Dispose());
        if (e != null) Check(e.Message.Contains("specla_drafter"), "message does not name the block: " + e.Message);
      }
    }
  }

  static GenerateParams Greedy(int maxTokens, bool stopAtEos = true) {
    var p = new GenerateParams();
    p.MaxTokens = maxTokens;
    p.StopAtEos = stopAtEos;
    return p;
  }

  // Drains an async enumeration from this thread, waiting on each step's task.
  static string DrainAsync(IAsyncEnumerable<string> pieces) {
    var text = new System.Text.StringBuilder();
    IAsyncEnumerator<string> e = pieces.GetAsyncEnumerator();
    try {
      while (e.MoveNextAsync().AsTask().Result) text.Append(e.Current);
    } finally {
      e.DisposeAsync().AsTask().Wait();
    }
    return text.ToString();
  }

  void StreamEqualsFullText() {
    using (var model = new Model(modelDir))
    using (var p = Greedy(MaxTokens))
    using (var spec = new SpecParams()) {
      string full;
      using (var s = new Session(model)) full = s.GenerateText(Prompt, p);
      Check(full.Length > 0, "plain GenerateText gave nothing");
      using (var s = new Session(model)) {
        using (var g = s.StreamText(Prompt, p)) {
          string streamed = string.Concat(g);
          Check(streamed == full, "plain streamed '" + streamed + "' != '" + full + "'");
          Check(g.FinishReason == FinishReason.MaxTokens || g.FinishReason == FinishReason.Eos,
                "plain finish reason " + g.FinishReason);
        }
        s.Reset();
        using (var g = s.StreamText(Prompt, p)) {
          string streamed = DrainAsync(g.PiecesAsync());
          Check(streamed == full, "plain async streamed '" + streamed + "' != '" + full + "'");
        }
      }
      spec.Generate = p;
      string fullSpec;
      using (var s = new Session(model))
      using (var d = new Drafter(model)) fullSpec = s.GenerateSpeculativeText(d, Prompt, spec);
      Check(fullSpec == full, "speculative text differs from plain");
      using (var s = new Session(model))
      using (var d = new Drafter(model)) {
        using (var g = s.StreamSpeculativeText(d, Prompt, spec)) {
          string streamed = string.Concat(g.Pieces());
          Check(streamed == fullSpec, "speculative streamed '" + streamed + "' != '" + fullSpec + "'");
          using (SpecStats stats = g.Stats())
            Check(stats.Steps > 0 && stats.Steps < stats.Generated,
                  "speculative stats: " + stats.Steps + " passes for " + stats.Generated + " tokens");
        }
        s.Reset();
        using (var d2 = new Drafter(model))
        using (var g = s.StreamSpeculativeText(d2, Prompt, spec)) {
          string streamed = DrainAsync(g.PiecesAsync());
          Check(streamed == fullSpec, "speculative async streamed differs");
          Check(g.FinishReason != FinishReason.None, "no finish reason after the last piece");
        }
      }
    }
  }

  void CancellationAborts() {
    using (var model = new Model(modelDir))
    using (var s = new Session(model))
    using (var p = Greedy(100000, false))
    using (var cts = new CancellationTokenSource()) {
      var clock = new Stopwatch();
      int pieces = 0;
      bool cancelled = false;
      using (var g = s.StreamText(Prompt, p)) {
        try {
          foreach (string piece in g.Pieces(cts.Token)) {
            if (++pieces == 3) {
              // Cancelled from another thread while this one is mid-stream.
              new Thread(() => { clock.Start(); cts.Cancel(); }).Start();
            }
          }
        } catch (OperationCanceledException) {
          cancelled = true;
        }
        clock.Stop();
        Console.WriteLine("      ended {0} ms after the cancellation", clock.Elapsed.TotalMilliseconds);
        Check(cancelled, "no OperationCanceledException");
        Check(g.FinishReason == FinishReason.Aborted, "finish reason " + g.FinishReason);
        Check(clock.Elapsed.TotalMilliseconds < 1000, "the cancellation took " + clock.Elapsed.TotalMilliseconds + " ms");
      }
      using (var q = Greedy(4)) Check(s.GenerateText(Prompt, q).Length > 0, "session unusable after a cancellation");
    }
  }

  void CancellationAbortsAsync() {
    using (var model = new Model(modelDir))
    using (var s = new Session(model))
    using (var p = Greedy(100000, false))
    using (var cts = new CancellationTokenSource()) {
      using (var g = s.StreamText(Prompt, p)) {
        IAsyncEnumerator<string> e = g.PiecesAsync(cts.Token).GetAsyncEnumerator();
        bool cancelled = false;
        var clock = new Stopwatch();
        try {
          for (int i = 0; ; ++i) {
            ValueTask<bool> next = e.MoveNextAsync();
            if (i == 3) {
              // The step runs on the pool: this thread cancels while it is in flight.
              clock.Start();
              cts.Cancel();
            }
            if (!next.AsTask().Result) break;
          }
        } catch (AggregateException ex) when (ex.InnerException is OperationCanceledException) {
          cancelled = true;
        } finally {
          e.DisposeAsync().AsTask().Wait();
        }
        clock.Stop();
        Console.WriteLine("      async ended {0} ms after the cancellation", clock.Elapsed.TotalMilliseconds);
        Check(cancelled, "no OperationCanceledException from the async stream");
        Check(g.FinishReason == FinishReason.Aborted, "async finish reason " + g.FinishReason);
        Check(clock.Elapsed.TotalMilliseconds < 1000, "the async cancellation took " + clock.Elapsed.TotalMilliseconds + " ms");
      }
      using (var q = Greedy(4)) Check(s.GenerateText(Prompt, q).Length > 0, "session unusable after an async cancellation");
    }
  }

  void SessionState() {
    const int half = 16;
    using (var model = new Model(modelDir))
    using (var a = new Session(model))
    using (var restored = new Session(model))
    using (var fromFile = new Session(model))
    using (var fork = new Session(model))
    using (var whole = new Session(model))
    using (var p = Greedy(half, false))
    using (var all = Greedy(2 * half, false)) {
      int[] prompt = model.Tokenize(Prompt);
      int[] first = a.Generate(prompt, p);
      byte[] state = a.SaveState();
      Check(state.Length > 0, "empty state");
      string file = System.IO.Path.GetTempFileName();
      try {
        a.SaveStateFile(file);
        fork.CopyStateFrom(a);
        int[] second = a.Generate(new int[0], p);
        restored.LoadState(state);
        Check(restored.Generate(new int[0], p).SequenceEqual(second), "load -> continue differs");
        fromFile.LoadStateFile(file);
        Check(fromFile.Generate(new int[0], p).SequenceEqual(second), "load file -> continue differs");
        Check(fork.Generate(new int[0], p).SequenceEqual(second), "fork -> continue differs");
        int[] uninterrupted = whole.Generate(prompt, all);
        Check(first.Concat(second).SequenceEqual(uninterrupted), "saved halves differ from the uninterrupted run");
      } finally {
        System.IO.File.Delete(file);
      }
      using (SessionMemory memory = a.Memory())
      using (ModelInfo info = model.Info()) {
        Check(memory.StateBytes == info.StateBytes, "memory.StateBytes");
        Check(memory.TotalBytes > memory.StateBytes, "memory.TotalBytes " + memory.TotalBytes);
      }
    }
  }

  void CorruptedState() {
    using (var model = new Model(modelDir))
    using (var s = new Session(model))
    using (var other = new Session(model))
    using (var p = Greedy(4)) {
      s.Generate(model.Tokenize(Prompt), p);
      byte[] state = s.SaveState();
      byte[] flipped = (byte[])state.Clone();
      flipped[flipped.Length / 2] ^= 0x5a;
      SpeclaException e = ExpectFailure(Status.Format, "a corrupted state", () => other.LoadState(flipped));
      if (e != null) Check(e.Message.Contains("checksum"), "corrupted-state message: " + e.Message);
      byte[] truncated = state.Take(state.Length - 7).ToArray();
      ExpectFailure(Status.Format, "a truncated state", () => other.LoadState(truncated));
      ExpectFailure(Status.Io, "a missing state file", () => other.LoadStateFile(modelDir + "/no-such-state"));
      Check(other.NPast() == 0, "a refused state changed the session");
      other.LoadState(state);
      Check(other.NPast() == s.NPast(), "the good state after refused ones");
    }
  }

  void StopStrings() {
    using (var model = new Model(modelDir))
    using (var p = Greedy(MaxTokens)) {
      string full;
      using (var s = new Session(model)) full = s.GenerateText(Prompt, p);
      Check(full.Length > 8, "too little text to pick a stop string from: '" + full + "'");
      string stop = full.Substring(full.Length / 2, 3);
      p.SetStopStrings("never appears here", stop);
      Check(p.StopStrings.SequenceEqual(new[] { "never appears here", stop }), "StopStrings " + string.Join("|", p.StopStrings));
      using (var s = new Session(model))
      using (var g = s.StreamText(Prompt, p)) {
        string streamed = string.Concat(g);
        Check(!streamed.Contains(stop), "the stop string '" + stop + "' is in the streamed text '" + streamed + "'");
        Check(full.StartsWith(streamed, StringComparison.Ordinal), "streamed text is not a prefix of the full text");
        Check(g.FinishReason == FinishReason.StopString, "finish reason " + g.FinishReason);
        Check(g.StopIndex() == 1, "stop index " + g.StopIndex());
      }
      p.IncludeStopString = true;
      using (var s = new Session(model))
      using (var g = s.StreamText(Prompt, p))
        Check(string.Concat(g).EndsWith(stop, StringComparison.Ordinal), "IncludeStopString: the text does not end with it");
      // Through SpecParams (a copy of the struct) the same strings apply.
      using (var spec = new SpecParams())
      using (var q = Greedy(MaxTokens)) {
        spec.Generate = q;
        spec.Generate.StopStrings = new List<string> { stop };
        using (var s = new Session(model))
        using (var d = new Drafter(model)) {
          string text = s.GenerateSpeculativeText(d, Prompt, spec);
          Check(!text.Contains(stop) && full.StartsWith(text, StringComparison.Ordinal),
                "speculative text with a stop string: '" + text + "'");
        }
      }
      using (var empty = Greedy(MaxTokens))
      using (var s = new Session(model)) {
        empty.SetStopStrings("");
        SpeclaException e = ExpectFailure(Status.InvalidArgument, "an empty stop string",
                                          () => s.StreamText(Prompt, empty).Dispose());
        if (e != null) Check(e.Message.Contains("stop"), "empty stop string message: " + e.Message);
      }
      bool refused = false;
      try {
        p.SetStopStrings("a\0b");
      } catch (ArgumentException) {
        refused = true;
      }
      Check(refused, "a stop string with a NUL character was taken");
      p.SetStopStrings();
      Check(p.StopStrings.Count == 0, "clearing the stop strings");
    }
  }

  static int ArgMax(float[] values, int offset, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
      if (values[offset + i] > values[offset + best]) best = i;
    return best;
  }

  void VerifyTreeGreedyChain() {
    const int chain = 7;
    using (var model = new Model(modelDir))
    using (var p = Greedy(2 * chain + 2, false))
    using (var rest = Greedy(chain, false)) {
      int[] prompt = model.Tokenize(Prompt);
      int[] greedy;
      using (var s = new Session(model)) greedy = s.Generate(prompt, p);
      Check(greedy.Length == 2 * chain + 2, "greedy made " + greedy.Length + " tokens");
      int[] tokens = greedy.Take(chain).ToArray();
      int[] parents = Enumerable.Range(-1, chain).ToArray();
      int vocab = model.Info().VocabSize;
      using (var s = new Session(model)) {
        s.Eval(prompt);
        TreeVerification v = s.VerifyTree(tokens, parents, deferredCommit: true, wantNodeLogits: true);
        Check(v.AcceptedNodes.SequenceEqual(Enumerable.Range(0, chain)), "accepted " + string.Join(",", v.AcceptedNodes));
        Check(v.BonusToken == greedy[chain], "bonus " + v.BonusToken + " != greedy " + greedy[chain]);
        float[] logits = v.NodeLogits;
        Check(logits != null && logits.Length == chain * vocab, "node logits length");
        if (logits != null && logits.Length == chain * vocab)
          for (int i = 0; i + 1 < chain; ++i)
            Check(ArgMax(logits, i * vocab, vocab) == tokens[i + 1], "node " + i + "'s logits do not pick the next token");
        // Decoding goes on from the bonus token exactly as plain greedy decoding does.
        int[] continued = s.Generate(new int[0], rest);
        int[] expected = greedy.Skip(chain + 1).Take(chain).ToArray();
        Check(continued.SequenceEqual(expected),
              "continued " + string.Join(",", continued) + " != greedy " + string.Join(",", expected));
        Check(s.VerifyTree(new int[0], new int[0]).AcceptedNodes.Length == 0, "an empty tree");
        SpeclaException e = ExpectFailure(Status.InvalidArgument, "a bad parent index",
                                          () => s.VerifyTree(new[] { tokens[0], tokens[1] }, new[] { -1, 5 }));
        if (e != null) Check(e.Message.Contains("parent 5"), "bad-parent message: " + e.Message);
        ExpectFailure(Status.InvalidArgument, "parents of another length",
                      () => s.VerifyTree(new[] { tokens[0] }, new[] { -1, 0 }));
      }
    }
  }

  static int[] GenerateWith(Model model, int[] prompt, GenerateParams p) {
    using (var s = new Session(model)) return s.Generate(prompt, p);
  }

  void LogitBiasForcesToken() {
    const int forced = 1234;
    int[] expected = Enumerable.Repeat(forced, 6).ToArray();
    using (var model = new Model(modelDir))
    using (var drafter = new Drafter(model))
    using (var p = Greedy(expected.Length, false))
    using (var spec = new SpecParams()) {
      int[] prompt = model.Tokenize(Prompt);
      Check(!GenerateWith(model, prompt, p).SequenceEqual(expected), "the token was greedy without a bias");
      // Set on a SamplingParams, copied into the GenerateParams: the copy owns its own entries,
      // so disposing of the original changes nothing.
      var bias = new Dictionary<int, float> { { forced, 100f } };
      using (var sampling = new SamplingParams()) {
        sampling.LogitBias = bias;
        Check(sampling.LogitBias.Count == 1 && sampling.LogitBias[forced] == 100f, "LogitBias reads back");
        p.Sampling = sampling;
      }
      GC.Collect();
      int[] got = GenerateWith(model, prompt, p);
      Check(got.SequenceEqual(expected), "biased greedy " + string.Join(",", got));
      // Copied once more into SpecParams: speculative decoding is forced as well.
      spec.Generate = p;
      p.Sampling.LogitBias = new Dictionary<int, float>();
      Check(p.Sampling.LogitBias.Count == 0, "clearing the logit bias");
      using (var s = new Session(model)) {
        int[] speculative = s.GenerateSpeculative(drafter, prompt, spec);
        Check(speculative.SequenceEqual(expected), "biased speculative " + string.Join(",", speculative));
      }
      // A token outside the vocabulary is the library's refusal, naming the entry.
      p.Sampling.SetLogitBias(new[] { 5, model.Info().VocabSize }, new[] { 1f, 1f });
      SpeclaException e = ExpectFailure(Status.InvalidArgument, "a logit bias id outside the vocabulary",
                                        () => GenerateWith(model, prompt, p));
      if (e != null) Check(e.Message.Contains("logit_bias[1]"), "logit bias message: " + e.Message);
      bool refused = false;
      try {
        p.Sampling.SetLogitBias(new[] { 1, 2 }, new[] { 1f });
      } catch (ArgumentException) {
        refused = true;
      }
      Check(refused, "arrays of two lengths were taken");
    }
  }

  // A small tree around the model's greedy path (a chain of 3 with a wrong sibling at the root
  // and one below it): every algorithm accepts the chain, and gives the same bonus token.
  void VerifyTreeAlgorithms() {
    using (var model = new Model(modelDir))
    using (var p = Greedy(4, false)) {
      int[] prompt = model.Tokenize(Prompt);
      int[] g = GenerateWith(model, prompt, p);
      int vocab = model.Info().VocabSize;
      int[] tokens = { g[0], g[1], (g[0] + 1) % vocab, g[2], (g[1] + 1) % vocab };
      int[] parents = { -1, 0, -1, 1, 0 };
      int[] path = { 0, 1, 3 };
      foreach (TreeAlgorithm algorithm in new[] { TreeAlgorithm.Auto, TreeAlgorithm.Hybrid, TreeAlgorithm.ParallelWy }) {
        using (var s = new Session(model)) {
          s.Eval(prompt);
          TreeVerification v = s.VerifyTree(tokens, parents, treeAlgorithm: algorithm);
          Check(v.AcceptedNodes.SequenceEqual(path), algorithm + ": accepted " + string.Join(",", v.AcceptedNodes));
          Check(v.BonusToken == g[3], algorithm + ": bonus " + v.BonusToken + " != greedy " + g[3]);
        }
      }
    }
  }

  void StreamDecoderRoundTrip() {
    string text = "def f(x):\n    return \"h\u00e9llo \u2713 \U0001F642\"\n";
    using (var model = new Model(modelDir)) {
      int[] ids = model.Tokenize(text, false, false);
      var decoder = new StreamDecoder(model, false);
      var decoded = new System.Text.StringBuilder();
      foreach (int id in ids) decoded.Append(decoder.Push(id));
      decoded.Append(decoder.Flush());
      Check(decoded.ToString() == text, "decoded '" + decoded + "'");
      ExpectFailure(Status.TokenOutOfRange, "an out-of-range id", () => decoder.Push(-1));
      decoder.Dispose();
      decoder.Dispose();  // idempotent
      bool threw = false;
      try {
        decoder.Push(ids[0]);
      } catch (ObjectDisposedException) {
        threw = true;
      }
      Check(threw, "a disposed decoder did not throw ObjectDisposedException");
    }
  }

  void LogHandler() {
    var received = new List<string>();
    bool nestedRefused = false;
    Logging.SetHandler((level, message) => {
      lock (received) received.Add(level + " " + message);
      try {
        Logging.RemoveHandler();
      } catch (InvalidOperationException) {
        nestedRefused = true;
      }
    }, LogLevel.Info);
    // More threads than this machine has CPUs: accepted, with a warning through the log.
    using (var many = new ModelParams()) {
      many.NThreads = Specla.LIMIT_THREADS;
      new Model(modelDir, many).Dispose();
      lock (received)
        Check(received.Any(m => m.StartsWith("Warn ") && m.Contains("n_threads")),
              "no n_threads warning among " + string.Join(" | ", received));
      Check(nestedRefused, "replacing the handler from inside it was not refused");
      // Replaced, then removed: neither hears anything more.
      int before = received.Count;
      var second = new List<string>();
      Logging.SetHandler((level, message) => { lock (second) second.Add(message); }, LogLevel.Warn);
      new Model(modelDir, many).Dispose();
      Logging.RemoveHandler();
      Check(received.Count == before, "the replaced handler was called");
      Check(second.Count >= 1 && second[0].Contains("n_threads"), "the second handler got " + string.Join(" | ", second));
      int kept = second.Count;
      new Model(modelDir, many).Dispose();
      Check(second.Count == kept, "the removed handler was called");
    }
  }

  // Threads log while the handler is replaced over and over: every message reaches exactly one of
  // the installed handlers, and nothing breaks.
  void LogHandlerAcrossThreads() {
    const int loaders = 3, loads = 4;
    int heard = 0;
    Action<LogLevel, string> handler = (level, message) => {
      if (message.Contains("n_threads")) Interlocked.Increment(ref heard);
    };
    var errors = new List<Exception>();
    Logging.SetHandler(handler, LogLevel.Warn);
    var threads = new Thread[loaders];
    for (int t = 0; t < loaders; ++t) {
      threads[t] = new Thread(() => {
        try {
          using (var many = new ModelParams()) {
            many.NThreads = Specla.LIMIT_THREADS;
            for (int i = 0; i < loads; ++i) new Model(modelDir, many).Dispose();
          }
        } catch (Exception e) {
          lock (errors) errors.Add(e);
        }
      });
      threads[t].Start();
    }
    for (int i = 0; i < 50; ++i) Logging.SetHandler(handler, LogLevel.Warn);
    foreach (Thread t in threads) t.Join();
    Logging.RemoveHandler();
    Check(errors.Count == 0, "a loading thread failed: " + string.Join(" | ", errors));
    Check(heard == loaders * loads, "heard " + heard + " of " + loaders * loads + " warnings");
  }
}
