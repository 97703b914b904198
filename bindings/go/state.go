package specla

import "specla/internal/native"

// Session state: the committed recurrent state, conv cache, context ids and pending token, in a
// versioned format tied to the model (lib/session/session_state.md). A refused state leaves the
// session as it was and returns the library's *Error: StatusFormat (not a state, truncated,
// checksum), StatusUnsupported (another format version), StatusShape (another model).

// SaveState returns the session's state.
func (s *Session) SaveState() ([]byte, error) {
	return checked(s.native().SaveState)
}

// LoadState restores a state SaveState returned (or a state file's contents).
func (s *Session) LoadState(state []byte) error {
	return checkedVoid(func() { s.native().LoadState(state) })
}

// SaveStateFile writes the state to path (through path.part, renamed over path).
func (s *Session) SaveStateFile(path string) error {
	return checkedVoid(func() { s.native().SaveStateFile(path) })
}

// LoadStateFile restores a state written by SaveStateFile.
func (s *Session) LoadStateFile(path string) error {
	return checkedVoid(func() { s.native().LoadStateFile(path) })
}

// CopyStateFrom forks: s receives source's state and continues exactly as source would.
func (s *Session) CopyStateFrom(source *Session) error {
	return checkedVoid(func() { s.native().CopyStateFrom(source.native()) })
}

// SessionMemory is every buffer a session owns, in bytes as allocated (specla_session_memory).
type SessionMemory struct {
	StateBytes   int64 // recurrent state + conv cache
	FactorBytes  int64 // per-node factors kept for committing verified tokens
	ScratchBytes int64 // activations, logits, snapshots, sampling buffers, staging
	ContextBytes int64 // the token history
	HostBytes    int64 // of all of the above, in host memory
	DeviceBytes  int64 // in GPU memory
	TotalBytes   int64 // HostBytes + DeviceBytes
}

// Memory reports the session's memory footprint.
func (s *Session) Memory() (SessionMemory, error) {
	m, err := checked(s.native().Memory)
	if err != nil {
		return SessionMemory{}, err
	}
	defer native.DeleteSessionMemory(m)
	return SessionMemory{
		StateBytes:   m.GetStateBytes(),
		FactorBytes:  m.GetFactorBytes(),
		ScratchBytes: m.GetScratchBytes(),
		ContextBytes: m.GetContextBytes(),
		HostBytes:    m.GetHostBytes(),
		DeviceBytes:  m.GetDeviceBytes(),
		TotalBytes:   m.GetTotalBytes(),
	}, nil
}
