package specla

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestStopStrings(t *testing.T) {
	model := loadModel(t)
	full, err := newSession(t, model).GenerateText(streamPrompt, &GenerateOptions{MaxTokens: maxTokens})
	if err != nil || len(full) <= 8 {
		t.Fatalf("GenerateText: %q, %v", full, err)
	}
	stop := full[len(full)/2 : len(full)/2+3]
	options := &GenerateOptions{MaxTokens: maxTokens, StopStrings: []string{"never appears here", stop}}
	s := newSession(t, model)
	streamed, g := drain(t, func() (*Generation, error) { return s.StreamText(context.Background(), streamPrompt, options) })
	if strings.Contains(streamed, stop) || !strings.HasPrefix(full, streamed) {
		t.Errorf("stop string %q: streamed %q of %q", stop, streamed, full)
	}
	if g.FinishReason() != FinishStopString || g.StopIndex() != 1 {
		t.Errorf("finish reason %v, stop index %d", g.FinishReason(), g.StopIndex())
	}

	options.IncludeStopString = true
	s2 := newSession(t, model)
	if text, _ := drain(t, func() (*Generation, error) { return s2.StreamText(context.Background(), streamPrompt, options) }); !strings.HasSuffix(text, stop) {
		t.Errorf("IncludeStopString: %q does not end with %q", text, stop)
	}

	spec := &SpecOptions{Generate: GenerateOptions{MaxTokens: maxTokens, StopStrings: []string{stop}}}
	text, _, err := newSession(t, model).GenerateSpeculativeText(newDrafter(t, model), streamPrompt, spec)
	if err != nil || strings.Contains(text, stop) || !strings.HasPrefix(full, text) {
		t.Errorf("speculative with a stop string: %q, %v", text, err)
	}

	p, err := options.toNative()
	if err != nil {
		t.Fatal(err)
	}
	if back := generateOptionsFrom(p); !reflect.DeepEqual(back.StopStrings, options.StopStrings) || !back.IncludeStopString {
		t.Errorf("round trip through C: %+v", back)
	}

	_, err = newSession(t, model).StreamText(context.Background(), streamPrompt, &GenerateOptions{StopStrings: []string{""}})
	if e := expectStatus(t, err, StatusInvalidArgument, "an empty stop string"); e != nil && !strings.Contains(e.Message, "stop") {
		t.Errorf("empty stop string message: %s", e.Message)
	}
	_, err = newSession(t, model).GenerateText(streamPrompt, &GenerateOptions{StopStrings: []string{"a\x00b"}})
	expectStatus(t, err, StatusInvalidArgument, "a stop string with a NUL byte")
}
