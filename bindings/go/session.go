package specla

import "specla/internal/native"

// Session is one sequence and its recurrent state. Use it from one goroutine at a time.
type Session struct {
	handle native.Session // nil once closed
}

// LogitsMode selects which logits Session.Eval returns.
type LogitsMode int

const (
	LogitsNone LogitsMode = 0 // none (pure prefill)
	LogitsLast LogitsMode = 1 // the last position: VocabSize values
	LogitsAll  LogitsMode = 2 // every position: len(tokens) * VocabSize values, row-major
)

// SpecStats is what the drafter and the verifier did in one speculative call.
type SpecStats struct {
	Steps              int64   // verification passes
	Drafted            int64   // draft tokens submitted
	Accepted           int64   // draft tokens accepted
	Generated          int64   // tokens emitted, plain steps' included
	MeanAcceptedLength float64 // tokens per verification pass
	AcceptanceRate     float64 // accepted / drafted
	PlainSteps         int64   // plain steps taken where speculation measured slower
}

// NewSession creates a session with an empty context; nil options mean the defaults.
func (m *Model) NewSession(options *SessionOptions) (*Session, error) {
	params := options.toNative()
	defer native.DeleteSessionParams(params)
	handle, err := checked(func() native.Session { return native.NewSession(m.native(), params) })
	if err != nil {
		return nil, err
	}
	return &Session{handle: handle}, nil
}

// Close releases the session. Closing twice is a no-op.
func (s *Session) Close() error {
	if s != nil && s.handle != nil {
		native.DeleteSession(s.handle)
		s.handle = nil
	}
	return nil
}

func (s *Session) native() native.Session {
	if s == nil || s.handle == nil {
		return native.SwigcptrSession(0)
	}
	return s.handle
}

// Reset forgets the context.
func (s *Session) Reset() error {
	return checkedVoid(s.native().Reset)
}

// NPast is the number of tokens the session's state has consumed.
func (s *Session) NPast() (int64, error) {
	return checked(s.native().NPast)
}

// Eval feeds tokens through the model and returns the logits mode asks for.
func (s *Session) Eval(tokens []int32, mode LogitsMode) ([]float32, error) {
	return checked(func() []float32 {
		return s.native().Eval(tokens, native.Enum_SS_specla_logits_mode(mode))
	})
}

// Generate evaluates prompt (which may be empty when the session has context) and generates;
// nil options mean the defaults (greedy, 128 tokens, stop at EOS).
func (s *Session) Generate(prompt []int32, options *GenerateOptions) ([]int32, error) {
	params, err := options.toNative()
	if err != nil {
		return nil, err
	}
	defer native.DeleteGenerateParams(params)
	return checked(func() []int32 { return s.native().Generate(prompt, params) })
}

// GenerateText tokenizes prompt, generates, and returns the generated text.
func (s *Session) GenerateText(prompt string, options *GenerateOptions) (string, error) {
	params, err := options.toNative()
	if err != nil {
		return "", err
	}
	defer native.DeleteGenerateParams(params)
	return checked(func() string { return s.native().GenerateText(prompt, params) })
}

// GenerateSpeculative is Generate with speculative decoding: the same tokens as plain decoding
// (token for token when greedy) in fewer model passes.
func (s *Session) GenerateSpeculative(d *Drafter, prompt []int32, options *SpecOptions) ([]int32, SpecStats, error) {
	params, err := options.toNative()
	if err != nil {
		return nil, SpecStats{}, err
	}
	defer native.DeleteSpecParams(params)
	stats := native.NewSpecStats()
	defer native.DeleteSpecStats(stats)
	tokens, err := checked(func() []int32 {
		return s.native().GenerateSpeculative(d.native(), prompt, params, stats)
	})
	return tokens, specStatsFrom(stats), err
}

// GenerateSpeculativeText is GenerateText with speculative decoding.
func (s *Session) GenerateSpeculativeText(d *Drafter, prompt string, options *SpecOptions) (string, SpecStats, error) {
	params, err := options.toNative()
	if err != nil {
		return "", SpecStats{}, err
	}
	defer native.DeleteSpecParams(params)
	stats := native.NewSpecStats()
	defer native.DeleteSpecStats(stats)
	text, err := checked(func() string {
		return s.native().GenerateSpeculativeText(d.native(), prompt, params, stats)
	})
	return text, specStatsFrom(stats), err
}

func specStatsFrom(s native.SpecStats) SpecStats {
	return SpecStats{
		Steps:              s.GetSteps(),
		Drafted:            s.GetDrafted(),
		Accepted:           s.GetAccepted(),
		Generated:          s.GetGenerated(),
		MeanAcceptedLength: s.GetMeanAcceptedLength(),
		AcceptanceRate:     s.GetAcceptanceRate(),
		PlainSteps:         s.GetPlainSteps(),
	}
}
