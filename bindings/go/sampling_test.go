package specla

import (
	"reflect"
	"testing"

	"specla/internal/native"
)

// The sampling fields beyond temperature, top-k, top-p and seed follow the options' rule: a
// literal that leaves them out is the library's defaults; PenaltyLastN's real zero has its own name.
func TestSamplingLiteralsMeanDefaults(t *testing.T) {
	def := native.NewGenerateParams()
	defer native.DeleteGenerateParams(def)
	ds := def.GetSampling()

	p, err := (&GenerateOptions{Sampling: SamplingOptions{Temperature: 0.7}}).toNative()
	if err != nil {
		t.Fatal(err)
	}
	defer native.DeleteGenerateParams(p)
	s := p.GetSampling()
	if s.GetTemperature() != 0.7 || s.GetMinP() != ds.GetMinP() ||
		s.GetRepetitionPenalty() != ds.GetRepetitionPenalty() || s.GetPresencePenalty() != ds.GetPresencePenalty() ||
		s.GetFrequencyPenalty() != ds.GetFrequencyPenalty() || s.GetPenaltyLastN() != ds.GetPenaltyLastN() {
		t.Errorf("SamplingOptions{Temperature: 0.7} is not the defaults elsewhere")
	}
	if ds.GetRepetitionPenalty() != 1 || ds.GetPenaltyLastN() != 64 || ds.GetMinP() != 0 {
		t.Errorf("unexpected library defaults: repetition %v, last n %v, min-p %v",
			ds.GetRepetitionPenalty(), ds.GetPenaltyLastN(), ds.GetMinP())
	}

	set, err := (&GenerateOptions{Sampling: SamplingOptions{MinP: 0.05, RepetitionPenalty: 1.3,
		PresencePenalty: 0.5, FrequencyPenalty: 0.25, PenaltyLastN: 16}}).toNative()
	if err != nil {
		t.Fatal(err)
	}
	defer native.DeleteGenerateParams(set)
	ss := set.GetSampling()
	if ss.GetMinP() != 0.05 || ss.GetRepetitionPenalty() != 1.3 || ss.GetPresencePenalty() != 0.5 ||
		ss.GetFrequencyPenalty() != 0.25 || ss.GetPenaltyLastN() != 16 {
		t.Errorf("the sampling fields did not reach the C parameters")
	}
	for value, want := range map[int32]int{PenaltyNone: 0, PenaltyWholeContext: -1, 0: 64} {
		q, err := (&GenerateOptions{Sampling: SamplingOptions{PenaltyLastN: value}}).toNative()
		if err != nil {
			t.Fatal(err)
		}
		if got := q.GetSampling().GetPenaltyLastN(); got != want {
			t.Errorf("PenaltyLastN %d became %d in C, want %d", value, got, want)
		}
		native.DeleteGenerateParams(q)
	}
	if d := DefaultGenerateOptions(); d.Sampling.PenaltyLastN != 64 || d.Sampling.RepetitionPenalty != 1 ||
		!reflect.DeepEqual(d.Sampling, generateOptionsRoundTrip(&GenerateOptions{}).Sampling) {
		t.Errorf("DefaultGenerateOptions().Sampling %+v is not the zero value's parameters", d.Sampling)
	}

	// Behaviour: the defaults spelled out generate what the literal without them does, and a
	// penalty that counts no token is no penalty.
	model, err := LoadModel(requireModelDir(t), &ModelOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	prompt, err := model.Tokenize(streamPrompt)
	if err != nil {
		t.Fatal(err)
	}
	generate := func(options *GenerateOptions) []int32 {
		ids, err := newSession(t, model).Generate(prompt, options)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	plain := generate(&GenerateOptions{MaxTokens: 24, IgnoreEOS: true})
	spelled := generate(&GenerateOptions{MaxTokens: 24, IgnoreEOS: true,
		Sampling: SamplingOptions{RepetitionPenalty: 1, PenaltyLastN: 64, TopP: 1}})
	unpenalised := generate(&GenerateOptions{MaxTokens: 24, IgnoreEOS: true,
		Sampling: SamplingOptions{RepetitionPenalty: 3, PenaltyLastN: PenaltyNone}})
	if !reflect.DeepEqual(plain, spelled) || !reflect.DeepEqual(plain, unpenalised) {
		t.Errorf("defaults spelled out or a penalty over no token changed greedy output:\n%v\n%v\n%v",
			plain, spelled, unpenalised)
	}
}

// generateOptionsRoundTrip is the options the C parameters of o hold.
func generateOptionsRoundTrip(o *GenerateOptions) GenerateOptions {
	p, err := o.toNative()
	if err != nil {
		panic(err)
	}
	defer native.DeleteGenerateParams(p)
	return generateOptionsFrom(p)
}
