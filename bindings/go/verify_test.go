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
