// Command specla-go-sample continues a Python function header with speculative decoding, through
// the Go binding.
//
//	specla-go-sample MODEL_DIR [PROMPT]
package main

import (
	"fmt"
	"os"

	"specla"
)

const defaultPrompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: specla-go-sample MODEL_DIR [PROMPT]")
		os.Exit(2)
	}
	prompt := defaultPrompt
	if len(os.Args) > 2 {
		prompt = os.Args[2]
	}
	fmt.Println("SpecLA", specla.Version())
	if err := run(os.Args[1], prompt); err != nil {
		fmt.Fprintln(os.Stderr, "specla:", err)
		os.Exit(1)
	}
}

func run(modelDir, prompt string) error {
	model, err := specla.LoadModel(modelDir, nil)
	if err != nil {
		return err
	}
	defer model.Close() // deferred calls run last-in first-out: drafter and session close first
	session, err := model.NewSession(nil)
	if err != nil {
		return err
	}
	defer session.Close()
	drafter, err := model.NewDrafter(nil)
	if err != nil {
		return err
	}
	defer drafter.Close()

	options := specla.DefaultSpecOptions() // greedy, the library's draft defaults
	options.Generate.MaxTokens = 96
	text, stats, err := session.GenerateSpeculativeText(drafter, prompt, &options)
	if err != nil {
		return err
	}
	fmt.Print(prompt)
	fmt.Println(text)
	fmt.Printf("[%d tokens, %d verification passes, %.2f tokens per pass]\n",
		stats.Generated, stats.Steps, stats.MeanAcceptedLength)
	return nil
}
