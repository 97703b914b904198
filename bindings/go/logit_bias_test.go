package specla

import (
	"reflect"
	"runtime"
	"strings"
	"testing"

	"specla/internal/native"
)

// A +100 logit bias forces its token in greedy decoding, plain and speculative; the C parameters
// hold a copy of the map (read back equal), and an id outside the vocabulary is the library's
// refusal naming the entry.
func TestLogitBiasForcesTheToken(t *testing.T) {
	const forced = 1234
	model := loadModel(t)
	prompt, err := model.Tokenize(streamPrompt)
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{forced, forced, forced, forced, forced, forced}
	options := GenerateOptions{MaxTokens: int32(len(want)), IgnoreEOS: true}
	plain, err := newSession(t, model).Generate(prompt, &options)
	if err != nil || reflect.DeepEqual(plain, want) {
		t.Fatalf("without a bias: %v, %v", plain, err)
	}
	options.Sampling.LogitBias = map[int32]float32{forced: 100}
	if got := generateOptionsRoundTrip(&options).Sampling.LogitBias; !reflect.DeepEqual(got, options.Sampling.LogitBias) {
		t.Errorf("the C parameters hold the logit bias %v, want %v", got, options.Sampling.LogitBias)
	}
	got, err := newSession(t, model).Generate(prompt, &options)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("biased greedy: %v, %v; want %v", got, err, want)
	}
	speculative, _, err := newSession(t, model).GenerateSpeculative(newDrafter(t, model), prompt,
		&SpecOptions{Generate: options})
	if err != nil || !reflect.DeepEqual(speculative, want) {
		t.Errorf("biased speculative: %v, %v; want %v", speculative, err, want)
	}

	info, err := model.Info()
	if err != nil {
		t.Fatal(err)
	}
	options.Sampling.LogitBias = map[int32]float32{5: 1, info.VocabSize: 1}
	_, err = newSession(t, model).Generate(prompt, &options)
	// Entries go to C in increasing token order: the out-of-range id is entry 1.
	if e := expectStatus(t, err, StatusInvalidArgument, "a logit bias id outside the vocabulary"); e != nil &&
		!strings.Contains(e.Message, "logit_bias[1]") {
		t.Errorf("logit bias message: %s", e.Message)
	}
	if d := DefaultGenerateOptions(); d.Sampling.LogitBias != nil {
		t.Errorf("a logit bias by default: %v", d.Sampling.LogitBias)
	}
}

// The setters that copy into the C parameters report their own outcome, not a failure an earlier
// call left on the same OS thread.
func TestParamSettersResetTheErrorRecord(t *testing.T) {
	runtime.LockOSThread() // the failure and the setters on one thread, where the record lives
	defer runtime.UnlockOSThread()
	model := loadModel(t)
	info, err := model.Info()
	if err != nil {
		t.Fatal(err)
	}
	_, err = newSession(t, model).Generate([]int32{info.VocabSize}, nil)
	expectStatus(t, err, StatusTokenOutOfRange, "an id outside the vocabulary")
	p, err := (&GenerateOptions{StopStrings: []string{"x"},
		Sampling: SamplingOptions{LogitBias: map[int32]float32{1: 1}}}).toNative()
	if err != nil {
		t.Fatalf("setting stop strings and a logit bias after a failure: %v", err)
	}
	native.DeleteGenerateParams(p)
}
