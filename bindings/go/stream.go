package specla

import (
	"context"
	"sync"

	"specla/internal/native"
)

// FinishReason is why a generation finished (specla_finish_reason in C).
type FinishReason int

const (
	FinishNone       FinishReason = 0 // not finished: more steps follow
	FinishEOS        FinishReason = 1 // the model's EOS token
	FinishStopString FinishReason = 2 // a stop string completed (Generation.StopIndex)
	FinishMaxTokens  FinishReason = 3 // the token budget was used up
	FinishAborted    FinishReason = 4 // Generation.Abort or the context was done
	FinishError      FinishReason = 5 // a step failed (Generation.Err)
)

// Generation is a pull-style generation: text arrives one step at a time (one decoding step, or
// one verification pass with a drafter), in the manner of bufio.Scanner:
//
//	g, err := session.StreamText(ctx, "def f(", nil)
//	if err != nil { ... }
//	defer g.Close()
//	for g.Next() {
//		fmt.Print(g.Text())
//	}
//	if err := g.Err(); err != nil { ... } // ctx.Err() when the context ended it
//	reason, stats := g.FinishReason(), g.Stats()
//
// When ctx is done the generation is aborted, also in the middle of a step (the library's abort
// may be called from any goroutine); so is Abort. While the generation is open, its session and
// drafter belong to it: Close frees them. Next, Text and Close belong to one goroutine.
type Generation struct {
	mu      sync.Mutex        // orders Abort (any goroutine) against Close
	handle  native.Generation // nil once closed
	ctx     context.Context
	closed  chan struct{} // closed by Close: ends the context watcher
	text    string
	tokens  []int32
	reason  FinishReason
	stop    int
	err     error
	stats   SpecStats
	hasStat bool
}

func startGeneration(ctx context.Context, begin func() native.Generation) (*Generation, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	handle, err := checked(begin)
	if err != nil {
		return nil, err
	}
	g := &Generation{handle: handle, ctx: ctx, closed: make(chan struct{}), stop: -1}
	if done := ctx.Done(); done != nil {
		go func() {
			select {
			case <-done:
				g.Abort()
			case <-g.closed:
			}
		}()
	}
	return g, nil
}

// Stream begins a plain generation after prompt (empty: continue the session's context); nil
// options mean the defaults.
func (s *Session) Stream(ctx context.Context, prompt []int32, options *GenerateOptions) (*Generation, error) {
	params, err := options.toNative()
	if err != nil {
		return nil, err
	}
	defer native.DeleteGenerateParams(params)
	return startGeneration(ctx, func() native.Generation { return s.native().Stream(prompt, params) })
}

// StreamText is Stream from a text prompt (tokenized as GenerateText does).
func (s *Session) StreamText(ctx context.Context, prompt string, options *GenerateOptions) (*Generation, error) {
	params, err := options.toNative()
	if err != nil {
		return nil, err
	}
	defer native.DeleteGenerateParams(params)
	return startGeneration(ctx, func() native.Generation { return s.native().StreamText(prompt, params) })
}

// StreamSpeculative is Stream with speculative decoding by d: each step is one verification pass.
func (s *Session) StreamSpeculative(ctx context.Context, d *Drafter, prompt []int32, options *SpecOptions) (*Generation, error) {
	params, err := options.toNative()
	if err != nil {
		return nil, err
	}
	defer native.DeleteSpecParams(params)
	return startGeneration(ctx, func() native.Generation {
		return s.native().StreamSpeculative(d.native(), prompt, params)
	})
}

// StreamSpeculativeText is StreamSpeculative from a text prompt.
func (s *Session) StreamSpeculativeText(ctx context.Context, d *Drafter, prompt string, options *SpecOptions) (*Generation, error) {
	params, err := options.toNative()
	if err != nil {
		return nil, err
	}
	defer native.DeleteSpecParams(params)
	return startGeneration(ctx, func() native.Generation {
		return s.native().StreamSpeculativeText(d.native(), prompt, params)
	})
}

// Next runs one step; false once the generation has finished (after the step that finished it),
// failed, or was closed. The text of the step is Text (possibly empty: text held back while a
// stop string may still match, an incomplete character, a special token).
func (g *Generation) Next() bool {
	if g == nil || g.handle == nil || g.reason != FinishNone || g.err != nil {
		return false
	}
	var tokens []int32
	text, err := checked(func() string {
		t := g.handle.StepText()
		if native.LastStatus() == native.OK {
			tokens = g.handle.StepTokens()
		}
		return t
	})
	g.reason = FinishReason(g.handle.FinishReasonValue())
	g.stop = int(g.handle.StopIndex())
	if err != nil {
		g.err = err
		g.text, g.tokens = "", nil
		return false
	}
	g.text, g.tokens = text, tokens
	if g.reason == FinishAborted && g.ctx.Err() != nil {
		g.err = g.ctx.Err()
	}
	return true
}

// Text is the text the last step made final.
func (g *Generation) Text() string { return g.text }

// Tokens are the token ids of the last step.
func (g *Generation) Tokens() []int32 { return g.tokens }

// Err is the error that ended the generation: a failed step's *Error, or the context's error when
// the context ended it (FinishReason is then FinishAborted); nil otherwise.
func (g *Generation) Err() error { return g.err }

// FinishReason is why the generation finished; FinishNone while steps remain.
func (g *Generation) FinishReason() FinishReason { return g.reason }

// StopIndex is which stop string ended the generation (FinishStopString), otherwise -1.
func (g *Generation) StopIndex() int { return g.stop }

// Stats is what the generation did so far (for a plain one, each token is one step); still
// available after Close.
func (g *Generation) Stats() SpecStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.handle != nil {
		if stats, err := checked(g.handle.Stats); err == nil {
			g.stats, g.hasStat = specStatsFrom(stats), true
			native.DeleteSpecStats(stats)
		}
	}
	return g.stats
}

// Abort asks the generation to stop; callable from any goroutine, also while Next runs. The
// running (or next) step returns at once with FinishAborted. A no-op once closed.
func (g *Generation) Abort() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.handle == nil {
		return nil
	}
	return checkedVoid(g.handle.Abort)
}

// Close ends the generation (aborting it if it still runs) and frees it; the session and drafter
// are free for other calls. Closing twice is a no-op.
func (g *Generation) Close() error {
	if g == nil {
		return nil
	}
	g.Stats() // kept for Stats after Close
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.handle != nil {
		native.DeleteGeneration(g.handle)
		g.handle = nil
		close(g.closed)
	}
	return nil
}
