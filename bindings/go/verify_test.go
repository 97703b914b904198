package specla

import (
	"reflect"
	"strings"
	"testing"
)

func argmax(values []float32) int32 {
	best := 0
	for i := range values {
		if values[i] > values[best] {
			best = i
		}
	}
	return int32(best)
}

// A chain of the model's own greedy tokens is accepted whole, and decoding goes on from the
// bonus token exactly as plain greedy decoding does.
func TestVerifyTreeGreedyChain(t *testing.T) {
	const chain = 7
	model := loadModel(t)
	promptIDs, err := model.Tokenize(streamPrompt)
	if err != nil {
		t.Fatal(err)
	}
	greedy, err := newSession(t, model).Generate(promptIDs, &GenerateOptions{MaxTokens: 2*chain + 2, IgnoreEOS: true})
	if err != nil || len(greedy) != 2*chain+2 {
		t.Fatalf("Generate: %v, %v", greedy, err)
	}
	tokens := greedy[:chain]
	parents := make([]int32, chain)
	want := make([]int32, chain)
	for i := range parents {
		parents[i] = int32(i - 1)
		want[i] = int32(i)
	}
	info, err := model.Info()
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, model)
	if _, err := s.Eval(promptIDs, LogitsNone); err != nil {
		t.Fatal(err)
	}
	v, err := s.VerifyTree(tokens, parents, &VerifyOptions{DeferredCommit: true, NodeLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v.AcceptedNodes, want) || v.BonusToken != greedy[chain] {
		t.Errorf("accepted %v, bonus %d; want %v, %d", v.AcceptedNodes, v.BonusToken, want, greedy[chain])
	}
	vocab := int(info.VocabSize)
	if len(v.NodeLogits) != chain*vocab {
		t.Errorf("node logits: %d floats, want %d", len(v.NodeLogits), chain*vocab)
	} else {
		for i := 0; i+1 < chain; i++ {
			if got := argmax(v.NodeLogits[i*vocab : (i+1)*vocab]); got != tokens[i+1] {
				t.Errorf("node %d's logits pick %d, not %d", i, got, tokens[i+1])
			}
		}
	}
	continued, err := s.Generate(nil, &GenerateOptions{MaxTokens: chain, IgnoreEOS: true})
	if err != nil || !reflect.DeepEqual(continued, greedy[chain+1:2*chain+1]) {
		t.Errorf("continued %v (%v), greedy %v", continued, err, greedy[chain+1:2*chain+1])
	}

	if empty, err := s.VerifyTree(nil, nil, nil); err != nil || len(empty.AcceptedNodes) != 0 {
		t.Errorf("an empty tree: %+v, %v", empty, err)
	}
	_, err = s.VerifyTree(tokens[:2], []int32{-1, 5}, nil)
	if e := expectStatus(t, err, StatusInvalidArgument, "a bad parent index"); e != nil && !strings.Contains(e.Message, "parent 5") {
		t.Errorf("bad-parent message: %s", e.Message)
	}
	_, err = s.VerifyTree(tokens[:1], []int32{-1, 0}, nil)
	expectStatus(t, err, StatusInvalidArgument, "parents of another length")
	s.Close()
	_, err = s.VerifyTree(tokens[:1], []int32{-1}, nil)
	expectStatus(t, err, StatusInvalidArgument, "a closed session")
}

// A small tree around the model's greedy path (a chain of 3 with a wrong sibling at the root and
// one below it): every tree algorithm accepts the chain and gives the same bonus token.
func TestVerifyTreeAlgorithmsAgree(t *testing.T) {
	model := loadModel(t)
	prompt, err := model.Tokenize(streamPrompt)
	if err != nil {
		t.Fatal(err)
	}
	g, err := newSession(t, model).Generate(prompt, &GenerateOptions{MaxTokens: 4, IgnoreEOS: true})
	if err != nil || len(g) != 4 {
		t.Fatalf("Generate: %v, %v", g, err)
	}
	info, err := model.Info()
	if err != nil {
		t.Fatal(err)
	}
	vocab := info.VocabSize
	tokens := []int32{g[0], g[1], (g[0] + 1) % vocab, g[2], (g[1] + 1) % vocab}
	parents := []int32{-1, 0, -1, 1, 0}
	path := []int32{0, 1, 3}
	for _, algorithm := range []TreeAlgorithm{TreeAuto, TreeHybrid, TreeParallelWY} {
		s := newSession(t, model)
		if _, err := s.Eval(prompt, LogitsNone); err != nil {
			t.Fatal(err)
		}
		v, err := s.VerifyTree(tokens, parents, &VerifyOptions{TreeAlgorithm: algorithm})
		if err != nil || !reflect.DeepEqual(v.AcceptedNodes, path) || v.BonusToken != g[3] {
			t.Errorf("algorithm %d: accepted %v, bonus %d, %v; want %v, %d", algorithm, v.AcceptedNodes,
				v.BonusToken, err, path, g[3])
		}
	}
	s := newSession(t, model)
	_, err = s.VerifyTree(tokens, parents, &VerifyOptions{TreeAlgorithm: 7})
	if e := expectStatus(t, err, StatusInvalidArgument, "an unknown tree algorithm"); e != nil &&
		!strings.Contains(e.Message, "tree algorithm") {
		t.Errorf("unknown-algorithm message: %s", e.Message)
	}
}
