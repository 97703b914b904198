package specla

import "specla/internal/native"

// StreamDecoder turns token ids into text one at a time (specla_stream_decoder): each Push returns
// only text that is final, never part of a character; the pieces plus Flush equal Detokenize of
// all the ids. Use it from one goroutine at a time; after Close every call returns an error.
type StreamDecoder struct {
	handle native.StreamDecoder // nil once closed
}

// NewStreamDecoder creates a decoder over the model's tokenizer (kept alive by the decoder).
func (m *Model) NewStreamDecoder(skipSpecial bool) (*StreamDecoder, error) {
	handle, err := checked(func() native.StreamDecoder { return native.NewStreamDecoder(m.native(), skipSpecial) })
	if err != nil {
		return nil, err
	}
	return &StreamDecoder{handle: handle}, nil
}

func (d *StreamDecoder) native() native.StreamDecoder {
	if d == nil || d.handle == nil {
		return native.SwigcptrStreamDecoder(0) // the C layer answers "the stream decoder is closed"
	}
	return d.handle
}

// Push decodes one id and returns the text it made final (possibly empty).
func (d *StreamDecoder) Push(token int32) (string, error) {
	return checked(func() string { return d.native().PushPiece(int(token)) })
}

// Flush returns what is still held back (an incomplete sequence becomes U+FFFD) and starts over.
func (d *StreamDecoder) Flush() (string, error) {
	return checked(d.native().FlushPiece)
}

// Close releases the decoder. Closing twice is a no-op.
func (d *StreamDecoder) Close() error {
	if d != nil && d.handle != nil {
		native.DeleteStreamDecoder(d.handle)
		d.handle = nil
	}
	return nil
}
