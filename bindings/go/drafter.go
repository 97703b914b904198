package specla

import "specla/internal/native"

// Drafter proposes draft tokens for speculative decoding. It keeps per-sequence state: use one
// drafter per session.
type Drafter struct {
	handle native.Drafter // nil once closed
}

// NewDrafter creates a prompt-lookup drafter for sessions of m; nil options mean the defaults.
func (m *Model) NewDrafter(options *DrafterOptions) (*Drafter, error) {
	params := options.toNative()
	defer native.DeleteDrafterParams(params)
	handle, err := checked(func() native.Drafter { return native.NewDrafter(m.native(), params) })
	if err != nil {
		return nil, err
	}
	return &Drafter{handle: handle}, nil
}

// Close releases the drafter. Closing twice is a no-op.
func (d *Drafter) Close() error {
	if d != nil && d.handle != nil {
		native.DeleteDrafter(d.handle)
		d.handle = nil
	}
	return nil
}

func (d *Drafter) native() native.Drafter {
	if d == nil || d.handle == nil {
		return native.SwigcptrDrafter(0)
	}
	return d.handle
}
