package specla

import (
	"strings"
	"testing"
)

func TestStreamDecoderRoundTrip(t *testing.T) {
	const text = "def f(x):\n    return \"h\u00e9llo \u2713 \U0001F642\"\n"
	model := loadModel(t)
	ids, err := model.TokenizeWith(text, false, false)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.NewStreamDecoder(false)
	if err != nil {
		t.Fatal(err)
	}
	var decoded strings.Builder
	for _, id := range ids {
		piece, err := d.Push(id)
		if err != nil {
			t.Fatal(err)
		}
		decoded.WriteString(piece)
	}
	rest, err := d.Flush()
	if err != nil {
		t.Fatal(err)
	}
	if decoded.WriteString(rest); decoded.String() != text {
		t.Errorf("decoded %q, want %q", decoded.String(), text)
	}
	_, err = d.Push(-1)
	expectStatus(t, err, StatusTokenOutOfRange, "an out-of-range id")
	d.Close()
	d.Close() // a no-op
	_, err = d.Push(ids[0])
	if e := expectStatus(t, err, StatusInvalidArgument, "a closed decoder"); e != nil && !strings.Contains(e.Message, "closed") {
		t.Errorf("closed-decoder message: %s", e.Message)
	}
	if _, err := d.Flush(); err == nil {
		t.Errorf("Flush on a closed decoder gave no error")
	}
}
