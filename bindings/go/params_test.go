package specla

import (
	"testing"

	"specla/internal/native"
)

// The C structs point to their nested params (ABI 3); the binding's GenerateParams and SpecParams
// own theirs: a getter is a view into the object, a setter copies, nested params included.
func TestNestedParamsAreOwned(t *testing.T) {
	spec := native.NewSpecParams()
	defer native.DeleteSpecParams(spec)
	g := native.NewGenerateParams()
	g.SetMaxTokens(9)
	g.GetSampling().SetTopK(7)
	spec.SetGenerate(g)
	g.GetSampling().SetTopK(3) // the copy does not follow the original ...
	native.DeleteGenerateParams(g)
	if got := spec.GetGenerate(); got.GetMaxTokens() != 9 || got.GetSampling().GetTopK() != 7 {
		t.Errorf("SetGenerate did not copy: max_tokens %d, top_k %d", got.GetMaxTokens(), got.GetSampling().GetTopK())
	}
	// ... and a view writes into its parent.
	spec.GetGenerate().GetSampling().SetSeed(42)
	if spec.GetGenerate().GetSampling().GetSeed() != 42 {
		t.Errorf("a view did not write into its parent")
	}
	if spec.GetStructSize() == 0 || spec.GetGenerate().GetStructSize() == 0 ||
		spec.GetGenerate().GetSampling().GetStructSize() == 0 {
		t.Errorf("a struct without its size")
	}
	stats := native.NewSpecStats()
	defer native.DeleteSpecStats(stats)
	if stats.GetStructSize() == 0 {
		t.Errorf("SpecStats without its size: the library would refuse it")
	}
}
