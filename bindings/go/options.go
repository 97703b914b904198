package specla

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"

	"specla/internal/native"
)

// Options mirror the C parameter structs, with one rule: the zero value of every field means
// the library's default, so a struct literal names only what it changes
// (&SpecOptions{MaxDraftNodes: 8} keeps every other default; nil options are all defaults).
// Flags whose library default is on are spelled negatively for that reason (SkipTokenizer,
// IgnoreEOS, NoDeferredCommit, FillDraftBudget). Where a real zero is meaningful, the field says
// how to ask for it. The Default* functions return the library's defaults spelled out.

// orDefault is value, or def (the library's default) when value is the zero value.
func orDefault[T comparable](value, def T) T {
	var zero T
	if value == zero {
		return def
	}
	return value
}

// Backend selects where a model runs.
type Backend int

const (
	BackendCPU  Backend = 0
	BackendCUDA Backend = 1
)

// ModelOptions configures LoadModel (specla_model_params).
type ModelOptions struct {
	Backend         Backend
	Device          int32  // CUDA device ordinal
	Threads         int32  // CPU worker threads per session call; 0 = the default (all cores)
	ArenaBlockBytes uint64 // CUDA: device memory per arena block; 0 = the library's default
	SkipTokenizer   bool   // do not load tokenizer.json (default: loaded when the folder has one)
}

// DefaultModelOptions returns the library's defaults.
func DefaultModelOptions() ModelOptions {
	p := native.NewModelParams()
	defer native.DeleteModelParams(p)
	return ModelOptions{
		Backend:         Backend(p.GetBackend()),
		Device:          int32(p.GetDevice()),
		Threads:         int32(p.GetNThreads()),
		ArenaBlockBytes: uint64(p.GetArenaBlockBytes()),
		SkipTokenizer:   !p.GetLoadTokenizer(),
	}
}

// toNative returns C parameters the caller deletes; nil options mean the defaults.
func (o *ModelOptions) toNative() native.ModelParams {
	p := native.NewModelParams()
	if o != nil {
		p.SetBackend(native.Enum_SS_specla_backend(orDefault(int(o.Backend), int(p.GetBackend()))))
		p.SetDevice(orDefault(int(o.Device), p.GetDevice()))
		p.SetNThreads(orDefault(int(o.Threads), p.GetNThreads()))
		p.SetArenaBlockBytes(orDefault(int64(o.ArenaBlockBytes), p.GetArenaBlockBytes()))
		p.SetLoadTokenizer(p.GetLoadTokenizer() && !o.SkipTokenizer)
	}
	return p
}

// SessionOptions configures Model.NewSession (specla_session_params).
type SessionOptions struct {
	MaxTreeNodes   int32 // largest draft tree a session verifies; 0 = the default
	MaxBatchTokens int32 // largest block of tokens evaluated in one pass; 0 = the default
}

// DefaultSessionOptions returns the library's defaults.
func DefaultSessionOptions() SessionOptions {
	p := native.NewSessionParams()
	defer native.DeleteSessionParams(p)
	return SessionOptions{
		MaxTreeNodes:   int32(p.GetMaxTreeNodes()),
		MaxBatchTokens: int32(p.GetMaxBatchTokens()),
	}
}

func (o *SessionOptions) toNative() native.SessionParams {
	p := native.NewSessionParams()
	if o != nil {
		p.SetMaxTreeNodes(orDefault(int(o.MaxTreeNodes), p.GetMaxTreeNodes()))
		p.SetMaxBatchTokens(orDefault(int(o.MaxBatchTokens), p.GetMaxBatchTokens()))
	}
	return p
}

// SamplingOptions selects greedy decoding (Temperature 0) or sampling (specla_sampling_params).
// The penalties and min-p apply to greedy decoding too (the header gives the order).
type SamplingOptions struct {
	Temperature float32 // 0 = greedy (the default)
	TopK        int32   // 0 = off (the default)
	TopP        float32 // nucleus mass in (0, 1]; 0 = the default (1: off)
	Seed        uint64  // 0 = the default seed
	MinP        float32 // in [0, 1]: keep tokens of at least MinP x the top probability; 0 = off (the default)
	// RepetitionPenalty divides a seen token's positive logit (multiplies a negative one); > 0;
	// 0 = the default (1: off).
	RepetitionPenalty float32
	PresencePenalty   float32 // subtracted once from a seen token's logit; 0 = off (the default)
	FrequencyPenalty  float32 // subtracted per occurrence; 0 = off (the default)
	// PenaltyLastN is how many of the last tokens the penalties count: 0 = the default (64),
	// PenaltyWholeContext for all of them, PenaltyNone for none (the C value 0, which the zero
	// value here cannot mean, as it means the default).
	PenaltyLastN int32
	// LogitBias adds a bias to the logit of each token id, before the penalties and any sampling
	// (+100 practically forces a token, -100 bans it); nil or empty = none (the default). The
	// library refuses an id outside the model's vocabulary or a bias that is not finite, naming
	// the entry (entries go to C in increasing token order).
	LogitBias map[int32]float32
}

// Values of SamplingOptions.PenaltyLastN besides a count.
const (
	PenaltyWholeContext int32 = -1            // the penalties count the whole context
	PenaltyNone         int32 = math.MinInt32 // the penalties count no token (off)
)

// penaltyLastNToC is o.PenaltyLastN as specla_sampling_params.penalty_last_n (def: the default).
func penaltyLastNToC(value int32, def int) int {
	switch value {
	case 0:
		return def
	case PenaltyNone:
		return 0
	default:
		return int(value)
	}
}

// penaltyLastNFromC is the inverse of penaltyLastNToC.
func penaltyLastNFromC(value int) int32 {
	if value == 0 {
		return PenaltyNone
	}
	return int32(value)
}

// GenerateOptions configures generation (specla_generate_params). Streaming is Session.Stream*;
// callbacks are not available through this binding.
type GenerateOptions struct {
	Sampling  SamplingOptions
	MaxTokens int32 // token budget; 0 = the default (128)
	IgnoreEOS bool  // keep generating past the model's EOS token (default: stop after it)
	// StopStrings end generation after the token that completes one of them in the generated
	// text (FinishStopString, Generation.StopIndex); the text ends where it begins unless
	// IncludeStopString. None may be empty or hold a NUL byte.
	StopStrings       []string
	IncludeStopString bool
}

// DefaultGenerateOptions returns the library's defaults (greedy).
func DefaultGenerateOptions() GenerateOptions {
	p := native.NewGenerateParams()
	defer native.DeleteGenerateParams(p)
	return generateOptionsFrom(p)
}

func generateOptionsFrom(p native.GenerateParams) GenerateOptions {
	s := p.GetSampling() // a view into p
	return GenerateOptions{
		Sampling: SamplingOptions{
			Temperature:       s.GetTemperature(),
			TopK:              int32(s.GetTopK()),
			TopP:              s.GetTopP(),
			Seed:              s.GetSeed(),
			MinP:              s.GetMinP(),
			RepetitionPenalty: s.GetRepetitionPenalty(),
			PresencePenalty:   s.GetPresencePenalty(),
			FrequencyPenalty:  s.GetFrequencyPenalty(),
			PenaltyLastN:      penaltyLastNFromC(s.GetPenaltyLastN()),
			LogitBias:         logitBiasFrom(s),
		},
		MaxTokens:         int32(p.GetMaxTokens()),
		IgnoreEOS:         !p.GetStopAtEos(),
		StopStrings:       unpackStopStrings(p.StopStringsPacked()),
		IncludeStopString: p.GetIncludeStopString(),
	}
}

// fill writes o into C sampling parameters that already hold the defaults.
func (o *SamplingOptions) fill(s native.SamplingParams) error {
	s.SetTemperature(orDefault(o.Temperature, s.GetTemperature()))
	s.SetTopK(orDefault(int(o.TopK), s.GetTopK()))
	s.SetTopP(orDefault(o.TopP, s.GetTopP()))
	s.SetSeed(orDefault(o.Seed, s.GetSeed()))
	s.SetMinP(orDefault(o.MinP, s.GetMinP()))
	s.SetRepetitionPenalty(orDefault(o.RepetitionPenalty, s.GetRepetitionPenalty()))
	s.SetPresencePenalty(orDefault(o.PresencePenalty, s.GetPresencePenalty()))
	s.SetFrequencyPenalty(orDefault(o.FrequencyPenalty, s.GetFrequencyPenalty()))
	s.SetPenaltyLastN(penaltyLastNToC(o.PenaltyLastN, s.GetPenaltyLastN()))
	return setLogitBias(s, o.LogitBias)
}

// setLogitBias hands the entries to C as two arrays of one length, which the C struct copies and
// owns (bindings/specla.i: freed with it, as its stop strings are).
func setLogitBias(s native.SamplingParams, bias map[int32]float32) error {
	tokens := make([]int32, 0, len(bias))
	for token := range bias {
		tokens = append(tokens, token)
	}
	sort.Slice(tokens, func(i, j int) bool { return tokens[i] < tokens[j] })
	biases := make([]float32, len(tokens))
	for i, token := range tokens {
		biases[i] = bias[token]
	}
	return checkedVoid(func() { s.SetLogitBiasRaw(tokens, biases) })
}

// logitBiasFrom is the C struct's entries as a map (a token listed twice: the sum, which is what
// applies); nil when there are none.
func logitBiasFrom(s native.SamplingParams) map[int32]float32 {
	tokens, biases := s.LogitBiasTokens(), s.LogitBiasValues()
	if len(tokens) == 0 {
		return nil
	}
	bias := make(map[int32]float32, len(tokens))
	for i, token := range tokens {
		bias[token] += biases[i]
	}
	return bias
}

// fill writes o into C parameters that already hold the defaults.
func (o *GenerateOptions) fill(p native.GenerateParams) error {
	if err := o.Sampling.fill(p.GetSampling()); err != nil {
		return err
	}
	p.SetMaxTokens(orDefault(int(o.MaxTokens), p.GetMaxTokens()))
	p.SetStopAtEos(p.GetStopAtEos() && !o.IgnoreEOS)
	p.SetIncludeStopString(o.IncludeStopString)
	return setStopStrings(p, o.StopStrings)
}

// setStopStrings hands the strings to C packed, each NUL-terminated (bindings/specla.i).
func setStopStrings(p native.GenerateParams, stops []string) error {
	var packed []byte
	for i, stop := range stops {
		if strings.IndexByte(stop, 0) >= 0 {
			return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("stop string %d contains a NUL byte", i)}
		}
		packed = append(append(packed, stop...), 0)
	}
	return checkedVoid(func() { p.SetStopStringsPacked(packed, int64(len(stops))) })
}

func unpackStopStrings(packed []byte) []string {
	var stops []string
	for len(packed) > 0 {
		end := bytes.IndexByte(packed, 0)
		stops = append(stops, string(packed[:end]))
		packed = packed[end+1:]
	}
	return stops
}

func (o *GenerateOptions) toNative() (native.GenerateParams, error) {
	p := native.NewGenerateParams()
	if o != nil {
		if err := o.fill(p); err != nil {
			native.DeleteGenerateParams(p)
			return nil, err
		}
	}
	return p, nil
}

// TreeAlgorithm selects how draft trees are verified.
type TreeAlgorithm int

const (
	TreeAuto       TreeAlgorithm = 0
	TreeHybrid     TreeAlgorithm = 1
	TreeParallelWY TreeAlgorithm = 2
)

// SpecOptions configures speculative generation (specla_spec_params).
type SpecOptions struct {
	Generate         GenerateOptions
	MaxDraftNodes    int32         // nodes per verification; 0 = the default (4)
	MaxDraftDepth    int32         // deepest draft position; 0 = the default (8)
	TreeAlgorithm    TreeAlgorithm // TreeAuto (the zero value) is the default
	NoDeferredCommit bool          // apply accepted factors at once (default: inside the next pass)
	// EAGLE drafter trees (prompt lookup ignores them).
	TreeTopK        int32   // children per expanded node and nodes expanded per depth; 0 = the default (4)
	TreePruneMargin float32 // nats behind the best path's log-probability; 0 = the default (8); < 0: no pruning
	FillDraftBudget bool    // always fill MaxDraftNodes (default: size trees from the measured pass costs)
	// Greedy generations take plain steps while speculation measures below this multiple of
	// plain decoding's tokens/s (sampled ones always speculate); 0 = the default (1).
	SpeculationMinGain float64
	AlwaysSpeculate    bool // never take plain steps
}

// DefaultSpecOptions returns the library's defaults (greedy).
func DefaultSpecOptions() SpecOptions {
	p := native.NewSpecParams()
	defer native.DeleteSpecParams(p)
	return specOptionsFrom(p)
}

// specOptionsFrom reads C parameters back as options.
func specOptionsFrom(p native.SpecParams) SpecOptions {
	return SpecOptions{
		Generate:           generateOptionsFrom(p.GetGenerate()),
		MaxDraftNodes:      int32(p.GetMaxDraftNodes()),
		MaxDraftDepth:      int32(p.GetMaxDraftDepth()),
		TreeAlgorithm:      TreeAlgorithm(p.GetTreeAlgorithm()),
		NoDeferredCommit:   !p.GetDeferredCommit(),
		TreeTopK:           int32(p.GetTreeTopK()),
		TreePruneMargin:    p.GetTreePruneMargin(),
		FillDraftBudget:    !p.GetTreeSizeFromCost(),
		SpeculationMinGain: p.GetSpeculationMinGain(),
		AlwaysSpeculate:    p.GetSpeculationMinGain() == 0,
	}
}

func (o *SpecOptions) toNative() (native.SpecParams, error) {
	p := native.NewSpecParams()
	if o != nil {
		if err := o.Generate.fill(p.GetGenerate()); err != nil {
			native.DeleteSpecParams(p)
			return nil, err
		}
		p.SetMaxDraftNodes(orDefault(int(o.MaxDraftNodes), p.GetMaxDraftNodes()))
		p.SetMaxDraftDepth(orDefault(int(o.MaxDraftDepth), p.GetMaxDraftDepth()))
		p.SetTreeAlgorithm(native.Enum_SS_specla_tree_algorithm(
			orDefault(int(o.TreeAlgorithm), int(p.GetTreeAlgorithm()))))
		p.SetDeferredCommit(p.GetDeferredCommit() && !o.NoDeferredCommit)
		p.SetTreeTopK(orDefault(int(o.TreeTopK), p.GetTreeTopK()))
		p.SetTreePruneMargin(orDefault(o.TreePruneMargin, p.GetTreePruneMargin()))
		p.SetTreeSizeFromCost(p.GetTreeSizeFromCost() && !o.FillDraftBudget)
		p.SetSpeculationMinGain(orDefault(o.SpeculationMinGain, p.GetSpeculationMinGain()))
		if o.AlwaysSpeculate {
			p.SetSpeculationMinGain(0)
		}
	}
	return p, nil
}

// DrafterType selects the drafter (specla_drafter_type).
type DrafterType int

const (
	DrafterPromptLookup DrafterType = 0 // n-gram match against the session's own context
	DrafterEagle        DrafterType = 1 // a learned drafter folder (Path) trained for the model
)

// DrafterOptions configures Model.NewDrafter (specla_drafter_params).
type DrafterOptions struct {
	Type        DrafterType // DrafterPromptLookup (the zero value) is the default
	MinNgram    int32       // prompt lookup: shortest suffix matched; 0 = the default (2)
	MaxNgram    int32       // prompt lookup: longest suffix matched, tried first; 0 = the default (4)
	MaxDraftLen int32       // prompt lookup: longest proposed continuation; 0 = the default (8)
	MaxBranches int32       // prompt lookup: distinct continuations kept as tree branches; 0 = the default
	Path        string      // EAGLE: the drafter folder
}

// DefaultDrafterOptions returns the library's defaults.
func DefaultDrafterOptions() DrafterOptions {
	p := native.NewDrafterParams()
	defer native.DeleteDrafterParams(p)
	return DrafterOptions{
		Type:        DrafterType(p.GetDrafterType()),
		Path:        p.GetPath(),
		MinNgram:    int32(p.GetMinNgram()),
		MaxNgram:    int32(p.GetMaxNgram()),
		MaxDraftLen: int32(p.GetMaxDraftLen()),
		MaxBranches: int32(p.GetMaxBranches()),
	}
}

func (o *DrafterOptions) toNative() native.DrafterParams {
	p := native.NewDrafterParams()
	if o != nil {
		p.SetMinNgram(orDefault(int(o.MinNgram), p.GetMinNgram()))
		p.SetMaxNgram(orDefault(int(o.MaxNgram), p.GetMaxNgram()))
		p.SetMaxDraftLen(orDefault(int(o.MaxDraftLen), p.GetMaxDraftLen()))
		p.SetMaxBranches(orDefault(int(o.MaxBranches), p.GetMaxBranches()))
		p.SetDrafterType(native.Enum_SS_specla_drafter_type(orDefault(int(o.Type), int(p.GetDrafterType()))))
		if o.Path != "" {
			p.SetPath(o.Path)
		}
	}
	return p
}
