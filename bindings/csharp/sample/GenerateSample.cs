// Continues a Python function header with speculative decoding, through the C# binding.
//   mono specla_csharp_sample.exe MODEL_DIR [PROMPT]
// (libspecla_csharp.so next to the program or on LD_LIBRARY_PATH, libspecla.so.3 findable.)
using System;
using SpecLA;

public static class GenerateSample {
  const string DefaultPrompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";

  public static int Main(string[] args) {
    if (args.Length < 1) {
      Console.Error.WriteLine("usage: specla_csharp_sample.exe MODEL_DIR [PROMPT]");
      return 2;
    }
    string prompt = args.Length > 1 ? args[1] : DefaultPrompt;
    Console.WriteLine("SpecLA " + Specla.Version());

    try {
      // Disposed in reverse order: drafter and session before the model.
      using (var model = new Model(args[0]))
      using (var session = new Session(model))
      using (var drafter = new Drafter(model))
      using (var parameters = new SpecParams())  // greedy, the library's draft defaults
      using (var stats = new SpecStats()) {
        parameters.Generate.MaxTokens = 96;
        string text = session.GenerateSpeculativeText(drafter, prompt, parameters, stats);

        Console.Write(prompt);
        Console.WriteLine(text);
        Console.WriteLine("[{0} tokens, {1} verification passes, {2:F2} tokens per pass]",
                          stats.Generated, stats.Steps, stats.MeanAcceptedLength);
      }
    } catch (SpeclaException e) {
      Console.Error.WriteLine("specla: {0}: {1}", e.Status, e.Message);
      return 1;
    }
    return 0;
  }
}
