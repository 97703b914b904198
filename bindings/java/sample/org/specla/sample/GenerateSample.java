package org.specla.sample;

import org.specla.Drafter;
import org.specla.Model;
import org.specla.Session;
import org.specla.SpecParams;
import org.specla.SpecStats;
import org.specla.Specla;
import org.specla.SpeclaException;

/**
 * Continues a Python function header with speculative decoding, through the Java binding.
 *
 * <pre>
 *   java -Djava.library.path=DIR_OF_libspecla_java.so -cp specla.jar:specla_java_sample.jar \
 *        org.specla.sample.GenerateSample MODEL_DIR [PROMPT]
 * </pre>
 */
public final class GenerateSample {
  private static final String DEFAULT_PROMPT =
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";

  public static void main(String[] args) {
    if (args.length < 1) {
      System.err.println("usage: GenerateSample MODEL_DIR [PROMPT]");
      System.exit(2);
    }
    String prompt = args.length > 1 ? args[1] : DEFAULT_PROMPT;
    System.out.println("SpecLA " + Specla.version());

    // Closed in reverse order by try-with-resources: drafter and session before the model.
    try (Model model = new Model(args[0]);
        Session session = new Session(model);
        Drafter drafter = new Drafter(model)) {
      SpecParams params = new SpecParams(); // greedy, the library's draft defaults
      params.getGenerate().setMaxTokens(96);
      SpecStats stats = new SpecStats();

      String text = session.generateSpeculativeText(drafter, prompt, params, stats);

      System.out.print(prompt);
      System.out.println(text);
      System.out.printf("[%d tokens, %d verification passes, %.2f tokens per pass]%n",
          stats.getGenerated(), stats.getSteps(), stats.getMeanAcceptedLength());
    } catch (SpeclaException e) {
      System.err.println("specla: " + e.getStatus() + ": " + e.getMessage());
      System.exit(1);
    }
  }
}
