package specla

import "specla/internal/native"

// Options mirror the C parameter structs. Start from the Default* functions, which read the
// library's own defaults, and change only the fields you need.

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
	Threads         int32  // CPU worker threads per session call; 0 = all cores
	ArenaBlockBytes uint64 // CUDA: device memory per arena block; 0 = the library's default
	LoadTokenizer   bool   // load tokenizer.json when the folder has one
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
		LoadTokenizer:   p.GetLoadTokenizer(),
	}
}

// toNative returns C parameters the caller deletes; nil options mean the defaults.
func (o *ModelOptions) toNative() native.ModelParams {
	p := native.NewModelParams()
	if o != nil {
		p.SetBackend(native.Enum_SS_specla_backend(o.Backend))
		p.SetDevice(int(o.Device))
		p.SetNThreads(int(o.Threads))
		p.SetArenaBlockBytes(int64(o.ArenaBlockBytes))
		p.SetLoadTokenizer(o.LoadTokenizer)
	}
	return p
}

// SessionOptions configures Model.NewSession (specla_session_params).
type SessionOptions struct {
	MaxTreeNodes   int32 // largest draft tree a session verifies
	MaxBatchTokens int32 // largest block of tokens evaluated in one pass
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
		p.SetMaxTreeNodes(int(o.MaxTreeNodes))
		p.SetMaxBatchTokens(int(o.MaxBatchTokens))
	}
	return p
}

// SamplingOptions selects greedy decoding (Temperature 0) or sampling (specla_sampling_params).
type SamplingOptions struct {
	Temperature float32 // 0 = greedy
	TopK        int32   // 0 = off
	TopP        float32 // 1 = off
	Seed        uint64
}

// GenerateOptions configures generation (specla_generate_params). Streaming callbacks and stop
// strings are not available through this binding.
type GenerateOptions struct {
	Sampling  SamplingOptions
	MaxTokens int32 // token budget
	StopAtEOS bool  // stop after the model's EOS token
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
			Temperature: s.GetTemperature(),
			TopK:        int32(s.GetTopK()),
			TopP:        s.GetTopP(),
			Seed:        s.GetSeed(),
		},
		MaxTokens: int32(p.GetMaxTokens()),
		StopAtEOS: p.GetStopAtEos(),
	}
}

// fill writes o into C parameters that already hold the defaults.
func (o *GenerateOptions) fill(p native.GenerateParams) {
	s := p.GetSampling()
	s.SetTemperature(o.Sampling.Temperature)
	s.SetTopK(int(o.Sampling.TopK))
	s.SetTopP(o.Sampling.TopP)
	s.SetSeed(o.Sampling.Seed)
	p.SetMaxTokens(int(o.MaxTokens))
	p.SetStopAtEos(o.StopAtEOS)
}

func (o *GenerateOptions) toNative() native.GenerateParams {
	p := native.NewGenerateParams()
	if o != nil {
		o.fill(p)
	}
	return p
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
	Generate       GenerateOptions
	MaxDraftNodes  int32 // nodes per verification
	MaxDraftDepth  int32 // deepest draft position
	TreeAlgorithm  TreeAlgorithm
	DeferredCommit bool
	// EAGLE drafter trees (prompt lookup ignores them).
	TreeTopK         int32   // children per expanded node and nodes expanded per depth
	TreePruneMargin  float32 // nats behind the best path's log-probability; <= 0: no pruning
	TreeSizeFromCost bool    // size trees from the measured pass costs (else fill the budget)
}

// DefaultSpecOptions returns the library's defaults (greedy).
func DefaultSpecOptions() SpecOptions {
	p := native.NewSpecParams()
	defer native.DeleteSpecParams(p)
	return SpecOptions{
		Generate:         generateOptionsFrom(p.GetGenerate()),
		MaxDraftNodes:    int32(p.GetMaxDraftNodes()),
		MaxDraftDepth:    int32(p.GetMaxDraftDepth()),
		TreeAlgorithm:    TreeAlgorithm(p.GetTreeAlgorithm()),
		DeferredCommit:   p.GetDeferredCommit(),
		TreeTopK:         int32(p.GetTreeTopK()),
		TreePruneMargin:  p.GetTreePruneMargin(),
		TreeSizeFromCost: p.GetTreeSizeFromCost(),
	}
}

func (o *SpecOptions) toNative() native.SpecParams {
	p := native.NewSpecParams()
	if o != nil {
		o.Generate.fill(p.GetGenerate())
		p.SetMaxDraftNodes(int(o.MaxDraftNodes))
		p.SetMaxDraftDepth(int(o.MaxDraftDepth))
		p.SetTreeAlgorithm(native.Enum_SS_specla_tree_algorithm(o.TreeAlgorithm))
		p.SetDeferredCommit(o.DeferredCommit)
		p.SetTreeTopK(int(o.TreeTopK))
		p.SetTreePruneMargin(o.TreePruneMargin)
		p.SetTreeSizeFromCost(o.TreeSizeFromCost)
	}
	return p
}

// DrafterType selects the drafter (specla_drafter_type).
type DrafterType int

const (
	DrafterPromptLookup DrafterType = 0 // n-gram match against the session's own context
	DrafterEagle        DrafterType = 1 // a learned drafter folder (Path) trained for the model
)

// DrafterOptions configures Model.NewDrafter (specla_drafter_params).
type DrafterOptions struct {
	Type        DrafterType
	MinNgram    int32  // prompt lookup: shortest suffix matched
	MaxNgram    int32  // prompt lookup: longest suffix matched, tried first
	MaxDraftLen int32  // prompt lookup: longest proposed continuation
	MaxBranches int32  // prompt lookup: distinct continuations kept as tree branches
	Path        string // EAGLE: the drafter folder
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
		p.SetMinNgram(int(o.MinNgram))
		p.SetMaxNgram(int(o.MaxNgram))
		p.SetMaxDraftLen(int(o.MaxDraftLen))
		p.SetMaxBranches(int(o.MaxBranches))
		p.SetDrafterType(native.Enum_SS_specla_drafter_type(o.Type))
		if o.Path != "" {
			p.SetPath(o.Path)
		}
	}
	return p
}
