package org.specla.test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.specla.Drafter;
import org.specla.DrafterParams;
import org.specla.DrafterType;
import org.specla.FinishReason;
import org.specla.Generation;
import org.specla.GenerateParams;
import org.specla.Model;
import org.specla.SamplingParams;
import org.specla.LogLevel;
import org.specla.Logging;
import org.specla.ModelInfo;
import org.specla.ModelParams;
import org.specla.Session;
import org.specla.SessionMemory;
import org.specla.SpecParams;
import org.specla.SpecStats;
import org.specla.Specla;
import org.specla.SpeclaException;
import org.specla.Status;
import org.specla.StreamDecoder;
import org.specla.TreeAlgorithm;
import org.specla.TreeVerification;

/**
 * Checks the Java binding against a real model: version, error mapping, closed handles,
 * ownership, and greedy speculative decoding equal to plain greedy decoding.
 * Usage: BindingTest MODEL_DIR. Exits non-zero when any check fails.
 */
public final class BindingTest {
  private static final String PROMPT =
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
  private static final int MAX_TOKENS = 64;

  private final String modelDir;
  private final List<String> failures = new ArrayList<>();

  private BindingTest(String modelDir) {
    this.modelDir = modelDir;
  }

  public static void main(String[] args) {
    if (args.length != 1) {
      System.err.println("usage: BindingTest MODEL_DIR");
      System.exit(2);
    }
    BindingTest test = new BindingTest(args[0]);
    test.run("version", test::version);
    test.run("missing model", test::missingModel);
    test.run("closed and null handles", test::closedHandles);
    test.run("token out of range", test::tokenOutOfRange);
    test.run("UTF-8 round trip", test::utf8RoundTrip);
    test.run("model closed before its session", test::modelClosedFirst);
    test.run("speculative equals plain greedy", test::speculativeEqualsGreedy);
    test.run("the learned drafter equals plain greedy", test::eagleEqualsGreedy);
    test.run("streamed pieces equal the full text", test::streamEqualsFullText);
    test.run("abort from another thread", test::abortFromAnotherThread);
    test.run("thread interruption aborts", test::interruptionAborts);
    test.run("save, load and fork continue equally", test::sessionState);
    test.run("a corrupted state is refused", test::corruptedState);
    test.run("stop strings end the stream", test::stopStrings);
    test.run("verifyTree accepts the model's own greedy chain", test::verifyTreeGreedyChain);
    test.run("every tree algorithm accepts the same path", test::verifyTreeAlgorithms);
    test.run("a +100 logit bias forces the token", test::logitBiasForcesToken);
    test.run("the stream decoder reproduces the text", test::streamDecoder);
    test.run("log messages reach the handler", test::logHandler);
    test.run("log handlers replaced while other threads log", test::logHandlerAcrossThreads);
    if (!test.failures.isEmpty()) {
      System.err.println(test.failures.size() + " check(s) failed:");
      for (String f : test.failures) System.err.println("  " + f);
      System.exit(1);
    }
    System.out.println("all Java binding checks passed");
  }

  private void run(String name, Runnable body) {
    int before = failures.size();
    try {
      body.run();
    } catch (Throwable t) {
      failures.add(name + ": unexpected " + t);
    }
    System.out.println((failures.size() == before ? "ok    " : "FAIL  ") + name);
  }

  private void check(boolean condition, String what) {
    if (!condition) failures.add(what);
  }

  /** Runs body, which must throw a SpeclaException with the given status; returns it. */
  private SpeclaException expectFailure(Status status, String what, Runnable body) {
    try {
      body.run();
    } catch (SpeclaException e) {
      check(e.getStatus() == status, what + ": status " + e.getStatus() + ", expected " + status);
      check(!e.getMessage().isEmpty(), what + ": empty message");
      return e;
    }
    failures.add(what + ": no SpeclaException");
    return null;
  }

  private void version() {
    String expected = Specla.VERSION_MAJOR + "." + Specla.VERSION_MINOR + "." + Specla.VERSION_PATCH;
    check(Specla.version().equals(expected), "version() is '" + Specla.version() + "', header says " + expected);
    check(Specla.statusString(Status.IO).startsWith("SPECLA_ERR_IO"), "statusString(IO)");
  }

  private void missingModel() {
    String missing = modelDir + "/no-such-model";
    SpeclaException e = expectFailure(Status.IO, "loading a missing folder", () -> new Model(missing).close());
    if (e != null) check(e.getMessage().contains(missing), "message '" + e.getMessage() + "' does not name " + missing);
  }

  private void closedHandles() {
    Model model = new Model(modelDir);
    Session session = new Session(model);
    session.close();
    session.close(); // idempotent
    SpeclaException e = expectFailure(Status.INVALID_ARGUMENT, "a closed session", () -> session.generate(new int[] {1}));
    if (e != null) check(e.getMessage().contains("closed"), "closed-session message: " + e.getMessage());
    expectFailure(Status.INVALID_ARGUMENT, "a session of a null model", () -> new Session(null).close());
    model.close();
    expectFailure(Status.INVALID_ARGUMENT, "a closed model", model::info);
    expectFailure(Status.INVALID_ARGUMENT, "a drafter of a closed model", () -> new Drafter(model).close());
  }

  private void tokenOutOfRange() {
    try (Model model = new Model(modelDir);
        Session session = new Session(model)) {
      ModelInfo info = model.info();
      int bad = info.getVocabSize() + 5;
      SpeclaException e = expectFailure(Status.TOKEN_OUT_OF_RANGE, "generating from an out-of-range token",
          () -> session.generate(new int[] {1, bad}));
      if (e != null) check(e.getMessage().contains(Integer.toString(bad)), "message does not name the id: " + e.getMessage());
      expectFailure(Status.TOKEN_OUT_OF_RANGE, "detokenizing an out-of-range token", () -> model.detokenize(new int[] {-1}));
      // A refused call changes nothing: the session still works.
      check(session.nPast() == 0, "nPast after a refused call is " + session.nPast());
      check(session.eval(new int[] {1, 2}).length == info.getVocabSize(), "eval after a refused call");
    }
  }

  private void utf8RoundTrip() {
    // Characters outside the BMP are where JNI's "modified UTF-8" and real UTF-8 differ.
    String text = "h\u00e9llo w\u00f6rld \u2713 \ud83d\ude42 = \"ok\"\n";
    try (Model model = new Model(modelDir)) {
      String back = model.detokenize(model.tokenize(text, false, false));
      check(back.equals(text), "round trip gave '" + back + "'");
    }
  }

  private void modelClosedFirst() {
    Model model = new Model(modelDir);
    Session session = new Session(model);
    Drafter drafter = new Drafter(model);
    int[] prompt = model.tokenize(PROMPT);
    model.close(); // the library model stays alive for the open session and drafter
    int[] out = session.generateSpeculative(drafter, prompt, new SpecParams());
    check(out.length > 0, "no tokens from a session whose model handle was closed");
    drafter.close();
    session.close();
  }

  // Greedy generation of the test prompt, plain and speculative with the drafter (params and
  // stats filled); checks that the two outputs are equal and returns the speculative one.
  private int[] speculativeAgainstPlain(Model model, Drafter drafter, SpecParams params, SpecStats stats) {
    int[] prompt = model.tokenize(PROMPT);
    check(prompt.length > 0, "empty prompt ids");
    GenerateParams greedy = new GenerateParams();
    greedy.setMaxTokens(MAX_TOKENS);
    int[] expected;
    try (Session plain = new Session(model)) {
      expected = plain.generate(prompt, greedy);
    }
    check(expected.length > 0, "plain greedy generated nothing");
    params.setGenerate(greedy);
    int[] got;
    try (Session speculative = new Session(model)) {
      got = speculative.generateSpeculative(drafter, prompt, params, stats);
    }
    check(Arrays.equals(expected, got),
        "speculative " + Arrays.toString(got) + " != plain " + Arrays.toString(expected));
    return got;
  }

  private void speculativeEqualsGreedy() {
    try (Model model = new Model(modelDir);
        Drafter drafter = new Drafter(model)) {
      SpecParams params = new SpecParams();
      SpecStats stats = new SpecStats();
      int[] got = speculativeAgainstPlain(model, drafter, params, stats);
      check(stats.getGenerated() == got.length, "stats.generated " + stats.getGenerated() + " != " + got.length);
      check(stats.getSteps() > 0 && stats.getSteps() <= got.length, "stats.steps " + stats.getSteps());

      String text = model.detokenize(got);
      check(!text.isEmpty(), "empty text");
      try (Session textSession = new Session(model);
          Drafter textDrafter = new Drafter(model)) {
        params.getGenerate().setMaxTokens(MAX_TOKENS);
        String streamed = textSession.generateSpeculativeText(textDrafter, PROMPT, params);
        check(streamed.equals(text), "generateSpeculativeText differs from detokenize of the tokens");
      }
    }
  }

  // The model's learned drafter sits beside it (models/gdn-pycode-22m-eagle); a folder that is
  // not a drafter is refused with the library's message.
  private void eagleEqualsGreedy() {
    DrafterParams eagle = new DrafterParams();
    eagle.setType(DrafterType.EAGLE);
    eagle.setPath(modelDir + "-eagle");
    try (Model model = new Model(modelDir);
        Drafter drafter = new Drafter(model, eagle)) {
      SpecStats stats = new SpecStats();
      speculativeAgainstPlain(model, drafter, new SpecParams(), stats);
      check(stats.getAccepted() > 0, "the learned drafter had nothing accepted in " + stats.getSteps() + " passes");

      DrafterParams notADrafter = new DrafterParams();
      notADrafter.setType(DrafterType.EAGLE);
      notADrafter.setPath(modelDir);
      SpeclaException e = expectFailure(Status.FORMAT, "a model folder as a drafter",
          () -> new Drafter(model, notADrafter).close());
      if (e != null) check(e.getMessage().contains("specla_drafter"), "message does not name the block: " + e.getMessage());
    }
  }

  private static GenerateParams greedy(int maxTokens) {
    GenerateParams p = new GenerateParams();
    p.setMaxTokens(maxTokens);
    return p;
  }

  private static String concat(Generation g) {
    StringBuilder text = new StringBuilder();
    g.forEachRemaining(text::append);
    return text.toString();
  }

  private void streamEqualsFullText() {
    try (Model model = new Model(modelDir)) {
      String full;
      try (Session s = new Session(model)) {
        full = s.generateText(PROMPT, greedy(MAX_TOKENS));
      }
      check(!full.isEmpty(), "plain generateText gave nothing");
      try (Session s = new Session(model);
          Generation g = s.streamText(PROMPT, greedy(MAX_TOKENS))) {
        String streamed = concat(g);
        check(streamed.equals(full), "plain streamed '" + streamed + "' != '" + full + "'");
        check(g.finishReason() == FinishReason.MAX_TOKENS || g.finishReason() == FinishReason.EOS,
            "plain finish reason " + g.finishReason());
        check(g.stats().getGenerated() > 0, "plain stats.generated is 0");
      }
      SpecParams spec = new SpecParams();
      spec.setGenerate(greedy(MAX_TOKENS));
      String fullSpec;
      try (Session s = new Session(model);
          Drafter d = new Drafter(model)) {
        fullSpec = s.generateSpeculativeText(d, PROMPT, spec);
      }
      check(fullSpec.equals(full), "speculative text differs from plain");
      try (Session s = new Session(model);
          Drafter d = new Drafter(model);
          Generation g = s.streamSpeculativeText(d, PROMPT, spec)) {
        List<String> pieces = new ArrayList<>();
        g.forEachRemaining(pieces::add);
        String streamed = String.join("", pieces);
        check(streamed.equals(fullSpec), "speculative streamed '" + streamed + "' != '" + fullSpec + "'");
        SpecStats stats = g.stats();
        check(stats.getSteps() > 0 && stats.getSteps() < stats.getGenerated(),
            "speculative stats: " + stats.getSteps() + " passes for " + stats.getGenerated() + " tokens");
        check(g.finishReason() != FinishReason.NONE, "no finish reason after the last piece");
      }
      // The Stream view: the same text, and closing the Stream frees the session.
      try (Session s = new Session(model)) {
        String viaStream;
        try (java.util.stream.Stream<String> pieces = s.streamText(PROMPT, greedy(MAX_TOKENS)).stream()) {
          viaStream = pieces.collect(java.util.stream.Collectors.joining());
        }
        check(viaStream.equals(full), "Stream<String> text differs");
        check(!s.generateText(PROMPT, greedy(4)).isEmpty(), "session unusable after the Stream closed");
      }
    }
  }

  // A long generation (no EOS stop, a large budget) to be stopped from outside.
  private static GenerateParams longRun() {
    GenerateParams p = greedy(100000);
    p.setStopAtEos(false);
    return p;
  }

  private void abortFromAnotherThread() {
    try (Model model = new Model(modelDir);
        Session s = new Session(model)) {
      long[] abortedAt = new long[1];
      try (Generation g = s.streamText(PROMPT, longRun())) {
        for (int i = 0; i < 3 && g.hasNext(); ++i) g.next(); // mid-stream
        Thread aborter = new Thread(() -> {
          abortedAt[0] = System.nanoTime();
          g.abort();
        });
        aborter.start();
        int steps = 0;
        while (g.hasNext()) {
          g.next();
          ++steps;
        }
        long ended = System.nanoTime();
        try {
          aborter.join();
        } catch (InterruptedException e) {
          throw new RuntimeException(e);
        }
        double ms = (ended - abortedAt[0]) / 1e6;
        System.out.println("      ended " + ms + " ms after the abort, " + steps + " steps later");
        check(g.finishReason() == FinishReason.ABORTED, "finish reason " + g.finishReason());
        check(ms < 1000, "the abort took " + ms + " ms to end the generation");
      }
      check(!s.generateText(PROMPT, greedy(4)).isEmpty(), "session unusable after an abort");
    }
  }

  private void interruptionAborts() {
    try (Model model = new Model(modelDir);
        Session s = new Session(model)) {
      FinishReason[] reason = new FinishReason[1];
      boolean[] flagKept = new boolean[1];
      Thread worker = new Thread(() -> {
        try (Generation g = s.streamText(PROMPT, longRun())) {
          while (g.hasNext()) g.next();
          reason[0] = g.finishReason();
          flagKept[0] = Thread.currentThread().isInterrupted();
        }
      });
      worker.start();
      try {
        Thread.sleep(100);
        worker.interrupt();
        worker.join(5000);
      } catch (InterruptedException e) {
        throw new RuntimeException(e);
      }
      check(!worker.isAlive(), "the interrupted generation is still running");
      check(reason[0] == FinishReason.ABORTED, "finish reason after interrupt: " + reason[0]);
      check(flagKept[0], "the interrupt flag was swallowed");
      check(!s.generateText(PROMPT, greedy(4)).isEmpty(), "session unusable after an interrupt");
    }
  }

  private void sessionState() {
    final int half = 16;
    try (Model model = new Model(modelDir);
        Session a = new Session(model);
        Session restored = new Session(model);
        Session fromFile = new Session(model);
        Session fork = new Session(model);
        Session whole = new Session(model)) {
      int[] prompt = model.tokenize(PROMPT);
      GenerateParams p = greedy(half);
      p.setStopAtEos(false);
      int[] first = a.generate(prompt, p);
      byte[] state = a.saveState();
      check(state.length > 0, "empty state");
      java.io.File file;
      try {
        file = java.io.File.createTempFile("specla-state", ".bin");
      } catch (java.io.IOException e) {
        throw new RuntimeException(e);
      }
      file.deleteOnExit();
      a.saveStateFile(file.getPath());
      fork.copyStateFrom(a);
      int[] second = a.generate(new int[0], p);

      restored.loadState(state);
      check(Arrays.equals(restored.generate(new int[0], p), second), "load -> continue differs");
      fromFile.loadStateFile(file.getPath());
      check(Arrays.equals(fromFile.generate(new int[0], p), second), "load file -> continue differs");
      check(Arrays.equals(fork.generate(new int[0], p), second), "fork -> continue differs");

      GenerateParams all = greedy(2 * half);
      all.setStopAtEos(false);
      int[] uninterrupted = whole.generate(prompt, all);
      int[] joined = Arrays.copyOf(first, first.length + second.length);
      System.arraycopy(second, 0, joined, first.length, second.length);
      check(Arrays.equals(joined, uninterrupted), "saved halves " + Arrays.toString(joined)
          + " != uninterrupted " + Arrays.toString(uninterrupted));

      SessionMemory memory = a.memory();
      check(memory.getStateBytes() == model.info().getStateBytes(), "memory.stateBytes");
      check(memory.getTotalBytes() > memory.getStateBytes(), "memory.totalBytes " + memory.getTotalBytes());
      file.delete();
    }
  }

  private void corruptedState() {
    try (Model model = new Model(modelDir);
        Session s = new Session(model)) {
      s.generate(model.tokenize(PROMPT), greedy(4));
      byte[] state = s.saveState();
      byte[] flipped = state.clone();
      flipped[flipped.length / 2] ^= 0x5a;
      try (Session other = new Session(model)) {
        SpeclaException e = expectFailure(Status.FORMAT, "a corrupted state", () -> other.loadState(flipped));
        if (e != null) check(e.getMessage().contains("checksum"), "corrupted-state message: " + e.getMessage());
        byte[] truncated = Arrays.copyOf(state, state.length - 7);
        expectFailure(Status.FORMAT, "a truncated state", () -> other.loadState(truncated));
        expectFailure(Status.IO, "a missing state file", () -> other.loadStateFile(modelDir + "/no-such-state"));
        check(other.nPast() == 0, "a refused state changed the session");
        other.loadState(state);
        check(other.nPast() == s.nPast(), "the good state after refused ones");
      }
    }
  }

  private void stopStrings() {
    try (Model model = new Model(modelDir)) {
      String full;
      try (Session s = new Session(model)) {
        full = s.generateText(PROMPT, greedy(MAX_TOKENS));
      }
      check(full.length() > 8, "too little text to pick a stop string from: '" + full + "'");
      String stop = full.substring(full.length() / 2, full.length() / 2 + 3);
      GenerateParams p = greedy(MAX_TOKENS);
      p.setStopStrings("never appears here", stop);
      check(p.getStopStrings().equals(Arrays.asList("never appears here", stop)), "getStopStrings " + p.getStopStrings());
      try (Session s = new Session(model);
          Generation g = s.streamText(PROMPT, p)) {
        String streamed = concat(g);
        check(!streamed.contains(stop), "the stop string '" + stop + "' is in the streamed text '" + streamed + "'");
        check(full.startsWith(streamed), "streamed text is not a prefix of the full text");
        check(g.finishReason() == FinishReason.STOP_STRING, "finish reason " + g.finishReason());
        check(g.stopIndex() == 1, "stop index " + g.stopIndex());
      }
      p.setIncludeStopString(true);
      try (Session s = new Session(model);
          Generation g = s.streamText(PROMPT, p)) {
        check(concat(g).endsWith(stop), "includeStopString: the text does not end with the stop string");
      }
      // Through SpecParams (a copy of the struct) the same strings apply.
      SpecParams spec = new SpecParams();
      spec.setGenerate(greedy(MAX_TOKENS));
      spec.getGenerate().setStopStrings(Arrays.asList(stop));
      try (Session s = new Session(model);
          Drafter d = new Drafter(model)) {
        String text = s.generateSpeculativeText(d, PROMPT, spec);
        check(!text.contains(stop) && full.startsWith(text), "speculative text with a stop string: '" + text + "'");
      }
      // setGenerate copies the strings: the copy ignores later changes to the original and
      // outlives it (each params struct owns its strings).
      GenerateParams source = greedy(MAX_TOKENS);
      source.setStopStrings(stop);
      SpecParams copied = new SpecParams();
      copied.setGenerate(source);
      source.setStopStrings("something else");
      source.delete();
      check(copied.getGenerate().getStopStrings().equals(Arrays.asList(stop)),
          "stop strings of the copy after the original changed and was freed: " + copied.getGenerate().getStopStrings());
      try (Session s = new Session(model);
          Drafter d = new Drafter(model)) {
        String text = s.generateSpeculativeText(d, PROMPT, copied);
        check(!text.contains(stop) && full.startsWith(text), "speculative text with a copied stop string: '" + text + "'");
      }
      // Many distinct per-request lists, replaced and freed with their structs: the replace and
      // free paths of the C layer (a double free or a use after free would crash here).
      for (int i = 0; i < 1000; ++i) {
        GenerateParams request = greedy(MAX_TOKENS);
        request.setStopStrings("request " + i, "and another " + i);
        request.setStopStrings("replaced " + i);
        request.delete();
      }
      GenerateParams empty = greedy(MAX_TOKENS);
      empty.setStopStrings("");
      try (Session s = new Session(model)) {
        SpeclaException e = expectFailure(Status.INVALID_ARGUMENT, "an empty stop string", () -> s.streamText(PROMPT, empty).close());
        if (e != null) check(e.getMessage().contains("stop"), "empty stop string message: " + e.getMessage());
      }
      boolean refused = false;
      try {
        p.setStopStrings("a\u0000b");
      } catch (IllegalArgumentException e) {
        refused = true;
      }
      check(refused, "a stop string with a NUL character was taken");
      p.setStopStrings();
      check(p.getStopStrings().isEmpty(), "clearing the stop strings");
    }
  }

  private static int argmax(float[] values, int offset, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
      if (values[offset + i] > values[offset + best]) best = i;
    return best;
  }

  private void verifyTreeGreedyChain() {
    final int chain = 7;
    try (Model model = new Model(modelDir)) {
      int[] prompt = model.tokenize(PROMPT);
      GenerateParams p = greedy(2 * chain + 2);
      p.setStopAtEos(false);
      int[] greedyTokens;
      try (Session s = new Session(model)) {
        greedyTokens = s.generate(prompt, p);
      }
      check(greedyTokens.length == 2 * chain + 2, "greedy made " + greedyTokens.length + " tokens");
      int[] tokens = Arrays.copyOf(greedyTokens, chain);
      int[] parents = new int[chain];
      for (int i = 0; i < chain; ++i) parents[i] = i - 1;
      int vocab = model.info().getVocabSize();
      try (Session s = new Session(model)) {
        s.eval(prompt);
        TreeVerification v = s.verifyTree(tokens, parents, null, null, true, true);
        int[] expectedPath = new int[chain];
        for (int i = 0; i < chain; ++i) expectedPath[i] = i;
        check(Arrays.equals(v.acceptedNodes(), expectedPath), "accepted " + Arrays.toString(v.acceptedNodes()));
        check(v.bonusToken() == greedyTokens[chain], "bonus " + v.bonusToken() + " != greedy " + greedyTokens[chain]);
        float[] logits = v.nodeLogits();
        check(logits != null && logits.length == chain * vocab, "node logits length");
        if (logits != null && logits.length == chain * vocab)
          for (int i = 0; i + 1 < chain; ++i)
            check(argmax(logits, i * vocab, vocab) == tokens[i + 1], "node " + i + "'s logits do not pick the next token");
        // Decoding goes on from the bonus token exactly as plain greedy decoding does.
        GenerateParams rest = greedy(chain);
        rest.setStopAtEos(false);
        int[] continued = s.generate(new int[0], rest);
        int[] expectedRest = Arrays.copyOfRange(greedyTokens, chain + 1, 2 * chain + 1);
        check(Arrays.equals(continued, expectedRest),
            "continued " + Arrays.toString(continued) + " != greedy " + Arrays.toString(expectedRest));
        check(s.verifyTree(new int[0], new int[0]).acceptedNodes().length == 0, "an empty tree");
        SpeclaException e = expectFailure(Status.INVALID_ARGUMENT, "a bad parent index",
            () -> s.verifyTree(new int[] {tokens[0], tokens[1]}, new int[] {-1, 5}));
        if (e != null) check(e.getMessage().contains("parent 5"), "bad-parent message: " + e.getMessage());
        expectFailure(Status.INVALID_ARGUMENT, "parents of another length",
            () -> s.verifyTree(new int[] {tokens[0]}, new int[] {-1, 0}));
      }
    }
  }

  private void logitBiasForcesToken() {
    final int forced = 1234;
    try (Model model = new Model(modelDir);
        Drafter drafter = new Drafter(model)) {
      int[] prompt = model.tokenize(PROMPT);
      int[] expected = new int[6];
      Arrays.fill(expected, forced);
      // Set on a SamplingParams, copied into a GenerateParams: the copy owns its own entries, so
      // freeing the original (and collecting it) changes nothing.
      SamplingParams sampling = new SamplingParams();
      java.util.Map<Integer, Float> bias = new java.util.LinkedHashMap<>();
      bias.put(forced, 100f);
      sampling.setLogitBias(bias);
      check(sampling.getLogitBias().equals(bias), "getLogitBias " + sampling.getLogitBias());
      GenerateParams p = greedy(expected.length);
      p.setStopAtEos(false);
      check(!Arrays.equals(generateWith(model, prompt, p), expected), "the token was greedy without a bias");
      p.setSampling(sampling);
      sampling.delete();
      System.gc();
      int[] got = generateWith(model, prompt, p);
      check(Arrays.equals(got, expected), "biased greedy " + Arrays.toString(got));
      // Copied once more into SpecParams: speculative decoding is forced as well.
      SpecParams spec = new SpecParams();
      spec.setGenerate(p);
      p.getSampling().setLogitBias(new int[0], new float[0]);
      check(p.getSampling().getLogitBias().isEmpty(), "clearing the logit bias");
      try (Session s = new Session(model)) {
        int[] speculative = s.generateSpeculative(drafter, prompt, spec);
        check(Arrays.equals(speculative, expected), "biased speculative " + Arrays.toString(speculative));
      }
      // A token outside the vocabulary is the library's refusal, naming the entry.
      p.getSampling().setLogitBias(new int[] {5, model.info().getVocabSize()}, new float[] {1f, 1f});
      SpeclaException e = expectFailure(Status.INVALID_ARGUMENT, "a logit bias id outside the vocabulary",
          () -> generateWith(model, prompt, p));
      if (e != null) check(e.getMessage().contains("logit_bias[1]"), "logit bias message: " + e.getMessage());
      boolean refused = false;
      try {
        p.getSampling().setLogitBias(new int[] {1, 2}, new float[] {1f});
      } catch (IllegalArgumentException expectedRefusal) {
        refused = true;
      }
      check(refused, "arrays of two lengths were taken");
    }
  }

  private static int[] generateWith(Model model, int[] prompt, GenerateParams p) {
    try (Session s = new Session(model)) {
      return s.generate(prompt, p);
    }
  }

  // A small tree around the model's greedy path (a chain of 3 with a wrong sibling at the root
  // and one below it): every algorithm accepts the chain, and gives the same bonus token.
  private void verifyTreeAlgorithms() {
    try (Model model = new Model(modelDir)) {
      int[] prompt = model.tokenize(PROMPT);
      GenerateParams p = greedy(4);
      p.setStopAtEos(false);
      int[] g = generateWith(model, prompt, p);
      int vocab = model.info().getVocabSize();
      int[] tokens = {g[0], g[1], (g[0] + 1) % vocab, g[2], (g[1] + 1) % vocab};
      int[] parents = {-1, 0, -1, 1, 0};
      int[] path = {0, 1, 3};
      for (TreeAlgorithm algorithm : new TreeAlgorithm[] {TreeAlgorithm.AUTO, TreeAlgorithm.HYBRID, TreeAlgorithm.PARALLEL_WY}) {
        try (Session s = new Session(model)) {
          s.eval(prompt);
          TreeVerification v = s.verifyTree(tokens, parents, null, null, false, false, algorithm);
          check(Arrays.equals(v.acceptedNodes(), path), algorithm + ": accepted " + Arrays.toString(v.acceptedNodes()));
          check(v.bonusToken() == g[3], algorithm + ": bonus " + v.bonusToken() + " != greedy " + g[3]);
        }
      }
    }
  }

  private void streamDecoder() {
    String text = "def f(x):\n    return \"h\u00e9llo \u2713 \ud83d\ude42\"\n";
    try (Model model = new Model(modelDir)) {
      int[] ids = model.tokenize(text, false, false);
      StreamDecoder decoder = new StreamDecoder(model, false);
      StringBuilder decoded = new StringBuilder();
      for (int id : ids) decoded.append(decoder.push(id));
      decoded.append(decoder.flush());
      check(decoded.toString().equals(text), "decoded '" + decoded + "'");
      expectFailure(Status.TOKEN_OUT_OF_RANGE, "an out-of-range id", () -> decoder.push(-1));
      decoder.close();
      decoder.close(); // idempotent
      boolean threw = false;
      try {
        decoder.push(ids[0]);
      } catch (IllegalStateException e) {
        threw = true;
      }
      check(threw, "a closed decoder did not throw IllegalStateException");
    }
  }

  private void logHandler() {
    List<String> received = java.util.Collections.synchronizedList(new ArrayList<>());
    boolean[] nestedRefused = new boolean[1];
    Logging.setHandler((level, message) -> {
      received.add(level + " " + message);
      try {
        Logging.removeHandler();
      } catch (IllegalStateException e) {
        nestedRefused[0] = true;
      }
    }, LogLevel.INFO);
    // More threads than this machine has CPUs: accepted, with a warning through the log.
    ModelParams many = new ModelParams();
    many.setNThreads(Specla.LIMIT_THREADS);
    new Model(modelDir, many).close();
    boolean warned = false;
    synchronized (received) {
      for (String m : received) warned |= m.startsWith("WARN ") && m.contains("n_threads");
    }
    check(warned, "no n_threads warning among " + received);
    check(nestedRefused[0], "replacing the handler from inside it was not refused");
    // Replaced, then removed: the first handler hears nothing more.
    int before = received.size();
    List<String> second = java.util.Collections.synchronizedList(new ArrayList<>());
    Logging.setHandler((level, message) -> second.add(message), LogLevel.WARN);
    new Model(modelDir, many).close();
    Logging.removeHandler();
    check(received.size() == before, "the replaced handler was called");
    check(second.size() >= 1 && second.get(0).contains("n_threads"), "the second handler got " + second);
    int kept = second.size();
    new Model(modelDir, many).close();
    check(second.size() == kept, "the removed handler was called");
  }

  // Threads log while the handler is replaced and removed over and over: every message reaches
  // the handler installed at the time or the default, and nothing breaks.
  private void logHandlerAcrossThreads() {
    ModelParams many = new ModelParams();
    many.setNThreads(Specla.LIMIT_THREADS);
    java.util.concurrent.atomic.AtomicInteger heard = new java.util.concurrent.atomic.AtomicInteger();
    List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
    Logging.setHandler((level, message) -> heard.incrementAndGet(), LogLevel.WARN);
    Thread[] loaders = new Thread[3];
    for (int t = 0; t < loaders.length; ++t) {
      loaders[t] = new Thread(() -> {
        try {
          for (int i = 0; i < 4; ++i) new Model(modelDir, many).close();
        } catch (Throwable e) {
          errors.add(e);
        }
      });
      loaders[t].start();
    }
    for (int i = 0; i < 50; ++i) Logging.setHandler((level, message) -> heard.incrementAndGet(), LogLevel.WARN);
    try {
      for (Thread loader : loaders) loader.join();
    } catch (InterruptedException e) {
      throw new RuntimeException(e);
    }
    Logging.removeHandler();
    check(errors.isEmpty(), "a loading thread failed: " + errors);
    check(heard.get() == 3 * 4, "heard " + heard.get() + " of " + 3 * 4 + " warnings");
  }
}
