package specla

import "specla/internal/native"

// VerifyOptions are the optional inputs of Session.VerifyTree; the zero value verifies
// deterministic candidates greedily, commits at once and returns no logits.
type VerifyOptions struct {
	// DraftDists is nil (the candidates were chosen deterministically) or len(tokens) x VocabSize
	// probabilities: row i is the drafter distribution node i's token was drawn from.
	DraftDists     []float32
	Sampling       SamplingOptions // acceptance: greedy (the zero value) or sampled
	DeferredCommit bool            // apply the accepted factors inside the next pass
	NodeLogits     bool            // return the target's logits after every node
	TreeAlgorithm  TreeAlgorithm   // how the tree pass runs; TreeAuto (the zero value): the backend picks
}

// TreeVerification is what Session.VerifyTree gave.
type TreeVerification struct {
	AcceptedNodes []int32   // accepted node indices, root to leaf
	BonusToken    int32     // the target's next token after them, fed at the session's next call
	NodeLogits    []float32 // len(tokens) x VocabSize, row-major, when VerifyOptions.NodeLogits
}

// VerifyTree verifies a draft tree of your own drafter (specla_session_verify_tree): node i has
// token tokens[i] and parent parents[i] (< i, or -1 for a candidate right after the context). The
// context then holds the accepted tokens. A tree the library refuses is an *Error with its message.
func (s *Session) VerifyTree(tokens, parents []int32, options *VerifyOptions) (TreeVerification, error) {
	if options == nil {
		options = &VerifyOptions{}
	}
	sampling := native.NewSamplingParams()
	defer native.DeleteSamplingParams(sampling)
	if err := options.Sampling.fill(sampling); err != nil {
		return TreeVerification{}, err
	}
	var result TreeVerification
	err := checkedVoid(func() {
		raw := s.native().VerifyTreeRaw(tokens, parents, options.DraftDists, sampling, options.DeferredCommit,
			native.Enum_SS_specla_tree_algorithm(options.TreeAlgorithm), options.NodeLogits)
		if raw == nil || raw.Swigcptr() == 0 {
			return
		}
		defer native.DeleteVerification(raw)
		result.AcceptedNodes = raw.AcceptedNodes()
		result.BonusToken = int32(raw.BonusToken())
		if options.NodeLogits {
			result.NodeLogits = raw.NodeLogits()
		}
	})
	return result, err
}
