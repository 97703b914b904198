package specla

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"specla/internal/native"
)

const streamPrompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"

func newSession(t *testing.T, model *Model) *Session {
	t.Helper()
	s, err := model.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newDrafter(t *testing.T, model *Model) *Drafter {
	t.Helper()
	d, err := model.NewDrafter(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// drain concatenates the pieces of the generation begin starts, which it closes.
func drain(t *testing.T, begin func() (*Generation, error)) (string, *Generation) {
	t.Helper()
	g, err := begin()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var text strings.Builder
	for g.Next() {
		text.WriteString(g.Text())
	}
	if g.Err() != nil {
		t.Fatalf("stream: %v", g.Err())
	}
	return text.String(), g
}

func TestStreamEqualsFullText(t *testing.T) {
	model := loadModel(t)
	options := &GenerateOptions{MaxTokens: 64}
	full, err := newSession(t, model).GenerateText(streamPrompt, options)
	if err != nil || full == "" {
		t.Fatalf("GenerateText: %q, %v", full, err)
	}
	plain := newSession(t, model)
	streamed, g := drain(t, func() (*Generation, error) {
		return plain.StreamText(context.Background(), streamPrompt, options)
	})
	if streamed != full {
		t.Errorf("plain streamed %q != %q", streamed, full)
	}
	if r := g.FinishReason(); r != FinishMaxTokens && r != FinishEOS {
		t.Errorf("plain finish reason %v", r)
	}

	spec := &SpecOptions{Generate: *options}
	fullSpec, _, err := newSession(t, model).GenerateSpeculativeText(newDrafter(t, model), streamPrompt, spec)
	if err != nil || fullSpec != full {
		t.Fatalf("GenerateSpeculativeText: %q (plain %q), %v", fullSpec, full, err)
	}
	speculative, drafter := newSession(t, model), newDrafter(t, model)
	streamed, g = drain(t, func() (*Generation, error) {
		return speculative.StreamSpeculativeText(context.Background(), drafter, streamPrompt, spec)
	})
	if streamed != fullSpec {
		t.Errorf("speculative streamed %q != %q", streamed, fullSpec)
	}
	if stats := g.Stats(); stats.Steps == 0 || stats.Steps >= stats.Generated {
		t.Errorf("speculative stats after Close: %+v", stats)
	}
	if g.FinishReason() == FinishNone {
		t.Error("no finish reason after the last piece")
	}
}

func TestStreamContextCancel(t *testing.T) {
	model := loadModel(t)
	s := newSession(t, model)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := s.StreamText(ctx, streamPrompt, &GenerateOptions{MaxTokens: 100000, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var cancelledAt time.Time
	for i := 0; g.Next(); i++ {
		if i == 3 { // mid-stream, from another goroutine
			done := make(chan struct{})
			go func() { cancelledAt = time.Now(); cancel(); close(done) }()
			<-done
		}
	}
	took := time.Since(cancelledAt)
	t.Logf("ended %v after the cancellation", took)
	if g.FinishReason() != FinishAborted {
		t.Errorf("finish reason %v", g.FinishReason())
	}
	if !errors.Is(g.Err(), context.Canceled) {
		t.Errorf("Err() = %v, want context.Canceled", g.Err())
	}
	if took > time.Second {
		t.Errorf("the cancellation took %v", took)
	}
	g.Close()
	if text, err := s.GenerateText(streamPrompt, &GenerateOptions{MaxTokens: 4}); err != nil || text == "" {
		t.Errorf("session after a cancellation: %q, %v", text, err)
	}
}

func TestSessionStateContinuesEqually(t *testing.T) {
	model := loadModel(t)
	ids, err := model.Tokenize(streamPrompt)
	if err != nil {
		t.Fatal(err)
	}
	half := &GenerateOptions{MaxTokens: 16, IgnoreEOS: true}
	a, restored, fromFile, fork, whole := newSession(t, model), newSession(t, model), newSession(t, model), newSession(t, model), newSession(t, model)
	first, err := a.Generate(ids, half)
	if err != nil {
		t.Fatal(err)
	}
	state, err := a.SaveState()
	if err != nil || len(state) == 0 {
		t.Fatalf("SaveState: %d bytes, %v", len(state), err)
	}
	file := filepath.Join(t.TempDir(), "state.bin")
	if err := a.SaveStateFile(file); err != nil {
		t.Fatal(err)
	}
	if err := fork.CopyStateFrom(a); err != nil {
		t.Fatal(err)
	}
	second, err := a.Generate(nil, half)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Session{"load": restored, "load file": fromFile, "fork": fork} {
		switch name {
		case "load":
			err = s.LoadState(state)
		case "load file":
			err = s.LoadStateFile(file)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, err := s.Generate(nil, half); err != nil || !reflect.DeepEqual(got, second) {
			t.Errorf("%s -> continue: %v (%v), want %v", name, got, err, second)
		}
	}
	uninterrupted, err := whole.Generate(ids, &GenerateOptions{MaxTokens: 32, IgnoreEOS: true})
	if err != nil || !reflect.DeepEqual(append(first, second...), uninterrupted) {
		t.Errorf("saved halves %v %v != uninterrupted %v (%v)", first, second, uninterrupted, err)
	}
	memory, err := a.Memory()
	info, _ := model.Info()
	if err != nil || memory.StateBytes != int64(info.StateBytes) || memory.TotalBytes <= memory.StateBytes {
		t.Errorf("Memory: %+v, %v (model state %d)", memory, err, info.StateBytes)
	}
}

func TestCorruptedStateRefused(t *testing.T) {
	model := loadModel(t)
	s, other := newSession(t, model), newSession(t, model)
	ids, _ := model.Tokenize(streamPrompt)
	if _, err := s.Generate(ids, &GenerateOptions{MaxTokens: 4}); err != nil {
		t.Fatal(err)
	}
	state, err := s.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), state...)
	flipped[len(flipped)/2] ^= 0x5a
	if e := expectStatus(t, other.LoadState(flipped), StatusFormat, "a corrupted state"); e != nil && !strings.Contains(e.Message, "checksum") {
		t.Errorf("corrupted-state message %q", e.Message)
	}
	expectStatus(t, other.LoadState(state[:len(state)-7]), StatusFormat, "a truncated state")
	expectStatus(t, other.LoadStateFile(filepath.Join(t.TempDir(), "missing")), StatusIO, "a missing state file")
	if n, _ := other.NPast(); n != 0 {
		t.Errorf("a refused state changed the session: n_past %d", n)
	}
	if err := other.LoadState(state); err != nil {
		t.Errorf("the good state after refused ones: %v", err)
	}
}

// Struct literals name only what they change: every other field is the library's default.
func TestStructLiteralsMeanDefaults(t *testing.T) {
	spec, _ := (&SpecOptions{MaxDraftNodes: 8}).toNative()
	defer native.DeleteSpecParams(spec)
	def := native.NewSpecParams()
	defer native.DeleteSpecParams(def)
	if spec.GetMaxDraftNodes() != 8 || spec.GetMaxDraftDepth() != def.GetMaxDraftDepth() ||
		spec.GetTreeTopK() != def.GetTreeTopK() || spec.GetTreePruneMargin() != def.GetTreePruneMargin() ||
		spec.GetDeferredCommit() != def.GetDeferredCommit() || spec.GetTreeSizeFromCost() != def.GetTreeSizeFromCost() ||
		spec.GetGenerate().GetMaxTokens() != def.GetGenerate().GetMaxTokens() ||
		spec.GetGenerate().GetStopAtEos() != def.GetGenerate().GetStopAtEos() ||
		spec.GetGenerate().GetSampling().GetTopP() != def.GetGenerate().GetSampling().GetTopP() {
		t.Errorf("&SpecOptions{MaxDraftNodes: 8} is not the defaults elsewhere")
	}
	// The ways to ask for a real zero / off.
	off, _ := (&SpecOptions{TreePruneMargin: -1, NoDeferredCommit: true, FillDraftBudget: true,
		AlwaysSpeculate: true, Generate: GenerateOptions{IgnoreEOS: true}}).toNative()
	defer native.DeleteSpecParams(off)
	if off.GetTreePruneMargin() >= 0 || off.GetDeferredCommit() || off.GetTreeSizeFromCost() ||
		off.GetSpeculationMinGain() != 0 || off.GetGenerate().GetStopAtEos() {
		t.Errorf("the explicit offs did not reach the C parameters")
	}
	if d := DefaultSpecOptions(); !reflect.DeepEqual(d, specOptionsRoundTrip(&SpecOptions{})) {
		t.Errorf("DefaultSpecOptions %+v != the zero value's parameters", d)
	}

	// Behaviour: a literal with one field loads the tokenizer and drafts.
	model, err := LoadModel(requireModelDir(t), &ModelOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	if ids, err := model.Tokenize(streamPrompt); err != nil || len(ids) == 0 {
		t.Errorf("&ModelOptions{Threads: 1} lost the tokenizer: %v", err)
	}
	_, stats, err := newSession(t, model).GenerateSpeculativeText(newDrafter(t, model), streamPrompt, &SpecOptions{MaxDraftNodes: 8})
	if err != nil || stats.Drafted == 0 || stats.Generated == 0 {
		t.Errorf("&SpecOptions{MaxDraftNodes: 8} drafted nothing: %+v, %v", stats, err)
	}
	bare, err := LoadModel(requireModelDir(t), &ModelOptions{SkipTokenizer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	_, err = bare.Tokenize(streamPrompt)
	expectStatus(t, err, StatusState, "SkipTokenizer")
}

func specOptionsRoundTrip(o *SpecOptions) SpecOptions {
	p, _ := o.toNative()
	defer native.DeleteSpecParams(p)
	return specOptionsFrom(p)
}
