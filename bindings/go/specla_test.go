package specla

import (
	"errors"
	"flag"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"specla/internal/native"
)

// The model folder: -model DIR, or SPECLA_MODEL_DIR.
var modelDir = flag.String("model", os.Getenv("SPECLA_MODEL_DIR"), "model folder (e.g. models/gdn-pycode-22m)")

const (
	prompt    = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
	maxTokens = 64
)

func requireModelDir(t *testing.T) string {
	t.Helper()
	if *modelDir == "" {
		t.Fatal("no model folder: pass -model DIR or set SPECLA_MODEL_DIR")
	}
	return *modelDir
}

func loadModel(t *testing.T) *Model {
	t.Helper()
	model, err := LoadModel(requireModelDir(t), nil)
	if err != nil {
		t.Fatalf("LoadModel: %v", err)
	}
	t.Cleanup(func() { model.Close() })
	return model
}

// expectStatus checks that err is an *Error with the given status and returns it.
func expectStatus(t *testing.T, err error, status Status, what string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error %v, want a *specla.Error with %v", what, err, status)
		return nil
	}
	if !errors.Is(err, status) {
		t.Errorf("%s: status %v, want %v", what, e.Status, status)
	}
	if e.Message == "" {
		t.Errorf("%s: empty message", what)
	}
	return e
}

func TestVersion(t *testing.T) {
	want := strconv.Itoa(VersionMajor) + "." + strconv.Itoa(VersionMinor) + "." + strconv.Itoa(VersionPatch)
	if got := Version(); got != want {
		t.Errorf("Version() = %q, header says %q", got, want)
	}
}

func TestStatusValues(t *testing.T) {
	// The Go constants are written out by hand; they must match the library's enum.
	pairs := map[Status]native.Enum_SS_specla_status{
		StatusOK: native.OK, StatusInvalidArgument: native.INVALID_ARGUMENT, StatusIO: native.IO,
		StatusFormat: native.FORMAT, StatusUnsupported: native.UNSUPPORTED, StatusShape: native.SHAPE,
		StatusTokenOutOfRange: native.TOKEN_OUT_OF_RANGE, StatusOutOfMemory: native.OUT_OF_MEMORY,
		StatusBackendUnavailable: native.BACKEND_UNAVAILABLE, StatusDevice: native.DEVICE,
		StatusAborted: native.ABORTED, StatusCapacity: native.CAPACITY, StatusState: native.STATE,
		StatusInternal: native.INTERNAL,
	}
	for status, value := range pairs {
		if int(status) != int(value) {
			t.Errorf("%v is %d in Go, %d in C", status, int(status), int(value))
		}
	}
	if !strings.HasPrefix(StatusIO.String(), "SPECLA_ERR_IO") {
		t.Errorf("StatusIO.String() = %q", StatusIO.String())
	}
}

func TestMissingModel(t *testing.T) {
	missing := requireModelDir(t) + "/no-such-model"
	model, err := LoadModel(missing, nil)
	if model != nil {
		t.Errorf("LoadModel(%q) returned a model", missing)
	}
	if e := expectStatus(t, err, StatusIO, "loading a missing folder"); e != nil && !strings.Contains(e.Message, missing) {
		t.Errorf("message %q does not name %q", e.Message, missing)
	}
}

func TestClosedAndNilHandles(t *testing.T) {
	model := loadModel(t)
	session, err := model.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	session.Close()
	session.Close() // idempotent
	_, err = session.Generate([]int32{1}, nil)
	if e := expectStatus(t, err, StatusInvalidArgument, "a closed session"); e != nil && !strings.Contains(e.Message, "closed") {
		t.Errorf("closed-session message: %q", e.Message)
	}
	var nilModel *Model
	_, err = nilModel.NewSession(nil)
	expectStatus(t, err, StatusInvalidArgument, "a session of a nil model")

	model.Close()
	_, err = model.Info()
	expectStatus(t, err, StatusInvalidArgument, "a closed model")
	_, err = model.NewDrafter(nil)
	expectStatus(t, err, StatusInvalidArgument, "a drafter of a closed model")
}

func TestTokenOutOfRange(t *testing.T) {
	model := loadModel(t)
	session, err := model.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	info, err := model.Info()
	if err != nil {
		t.Fatal(err)
	}
	bad := info.VocabSize + 5
	_, err = session.Generate([]int32{1, bad}, nil)
	if e := expectStatus(t, err, StatusTokenOutOfRange, "generating from an out-of-range token"); e != nil &&
		!strings.Contains(e.Message, strconv.Itoa(int(bad))) {
		t.Errorf("message does not name the id: %q", e.Message)
	}
	_, err = model.Detokenize([]int32{-1}, false)
	expectStatus(t, err, StatusTokenOutOfRange, "detokenizing an out-of-range token")

	// A refused call changes nothing: the session still works.
	if n, err := session.NPast(); err != nil || n != 0 {
		t.Errorf("NPast after a refused call: %d, %v", n, err)
	}
	if logits, err := session.Eval([]int32{1, 2}, LogitsLast); err != nil || len(logits) != int(info.VocabSize) {
		t.Errorf("Eval after a refused call: %d logits, %v", len(logits), err)
	}
}

func TestUTF8RoundTrip(t *testing.T) {
	model := loadModel(t)
	text := "héllo wörld ✓ 🙂 = \"ok\"\n"
	ids, err := model.TokenizeWith(text, false, false)
	if err != nil {
		t.Fatal(err)
	}
	back, err := model.Detokenize(ids, false)
	if err != nil {
		t.Fatal(err)
	}
	if back != text {
		t.Errorf("round trip gave %q, want %q", back, text)
	}
}

func TestModelClosedBeforeSession(t *testing.T) {
	model, err := LoadModel(requireModelDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	session, err := model.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	drafter, err := model.NewDrafter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drafter.Close()
	ids, err := model.Tokenize(prompt)
	if err != nil {
		t.Fatal(err)
	}
	model.Close() // the native model stays alive for the open session and drafter
	out, _, err := session.GenerateSpeculative(drafter, ids, nil)
	if err != nil || len(out) == 0 {
		t.Errorf("generation after closing the model handle: %d tokens, %v", len(out), err)
	}
}

// Greedy generation of the test prompt, plain and speculative with a drafter of the given options
// (nil: prompt lookup); the test fails where a call fails or the two outputs differ.
func speculativeAgainstPlain(t *testing.T, model *Model, drafterOptions *DrafterOptions) ([]int32, SpecStats, SpecOptions) {
	t.Helper()
	ids, err := model.Tokenize(prompt)
	if err != nil || len(ids) == 0 {
		t.Fatalf("Tokenize: %v, %d ids", err, len(ids))
	}
	plain, err := model.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	greedy := DefaultGenerateOptions()
	greedy.MaxTokens = maxTokens
	want, err := plain.Generate(ids, &greedy)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("plain greedy generated nothing")
	}
	speculative, err := model.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer speculative.Close()
	drafter, err := model.NewDrafter(drafterOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer drafter.Close()
	options := DefaultSpecOptions()
	options.Generate = greedy
	got, stats, err := speculative.GenerateSpeculative(drafter, ids, &options)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("speculative %v != plain %v", got, want)
	}
	return got, stats, options
}

func TestSpeculativeEqualsPlainGreedy(t *testing.T) {
	model := loadModel(t)
	got, stats, options := speculativeAgainstPlain(t, model, nil)
	if stats.Generated != int64(len(got)) || stats.Steps <= 0 || stats.Steps > int64(len(got)) {
		t.Errorf("stats %+v for %d tokens", stats, len(got))
	}

	text, err := model.Detokenize(got, false)
	if err != nil || text == "" {
		t.Fatalf("Detokenize: %q, %v", text, err)
	}
	textSession, err := model.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer textSession.Close()
	textDrafter, err := model.NewDrafter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer textDrafter.Close()
	streamed, _, err := textSession.GenerateSpeculativeText(textDrafter, prompt, &options)
	if err != nil {
		t.Fatal(err)
	}
	if streamed != text {
		t.Errorf("GenerateSpeculativeText gave %q, Detokenize of the tokens %q", streamed, text)
	}
}

// The EAGLE drafter's folder travels as a string the parameters own; a folder that is not a
// drafter trained for the model is refused with the status and a message naming the file.
func TestEagleDrafterFolderChecked(t *testing.T) {
	model := loadModel(t)
	missing := requireModelDir(t) + "/no-such-drafter"
	_, err := model.NewDrafter(&DrafterOptions{Type: DrafterEagle, Path: missing})
	if e := expectStatus(t, err, StatusIO, "a missing drafter folder"); e != nil && !strings.Contains(e.Message, missing) {
		t.Errorf("message %q does not name %q", e.Message, missing)
	}
	// The model's own folder has no specla_drafter block.
	_, err = model.NewDrafter(&DrafterOptions{Type: DrafterEagle, Path: requireModelDir(t)})
	if e := expectStatus(t, err, StatusFormat, "a target model's folder as drafter"); e != nil && !strings.Contains(e.Message, "specla_drafter") {
		t.Errorf("message %q does not name the specla_drafter block", e.Message)
	}
	if d := DefaultDrafterOptions(); d.Type != DrafterPromptLookup || d.Path != "" {
		t.Errorf("default drafter options %+v", d)
	}
	if s := DefaultSpecOptions(); s.TreeTopK != 4 || s.TreePruneMargin != 8 || s.FillDraftBudget {
		t.Errorf("default tree options %+v", s)
	}
}

// The model's learned drafter sits beside it (models/gdn-pycode-22m-eagle): greedy speculative
// output with it equals plain greedy output, and some of its drafts are accepted.
func TestEagleDrafterEqualsPlainGreedy(t *testing.T) {
	model := loadModel(t)
	_, stats, _ := speculativeAgainstPlain(t, model, &DrafterOptions{Type: DrafterEagle, Path: requireModelDir(t) + "-eagle"})
	if stats.Accepted == 0 {
		t.Errorf("the learned drafter had nothing accepted in %d passes", stats.Steps)
	}
}
