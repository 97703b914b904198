package specla

import "specla/internal/native"

// Model is a loaded checkpoint. It is immutable and may be shared by goroutines.
type Model struct {
	handle native.Model // nil once closed
}

// ModelInfo describes a loaded model (specla_model_info). Sizes are element counts.
type ModelInfo struct {
	VocabSize        int32
	HiddenSize       int32
	NumLayers        int32
	NumHeads         int32
	NumVHeads        int32
	HeadKDim         int32
	HeadVDim         int32
	ConvSize         int32
	IntermediateSize int32
	BOSTokenID       int32 // -1 when none
	EOSTokenID       int32 // -1 when none
	NumParameters    int64
	StateBytes       uint64 // recurrent state + conv cache of one session
	Backend          Backend
	HasTokenizer     bool
}

// TokenizerInfo describes a model's tokenizer (specla_tokenizer_info).
type TokenizerInfo struct {
	VocabSize     int32
	BOSTokenID    int32 // -1 when none
	EOSTokenID    int32 // -1 when none
	AddBOSDefault bool
}

// LoadModel loads a Hugging Face checkpoint folder; nil options mean the library's defaults.
func LoadModel(folder string, options *ModelOptions) (*Model, error) {
	params := options.toNative()
	defer native.DeleteModelParams(params)
	handle, err := checked(func() native.Model { return native.NewModel(folder, params) })
	if err != nil {
		return nil, err
	}
	return &Model{handle: handle}, nil
}

// Close releases the model handle; the native model lives on until its last session and drafter
// are closed. Closing twice is a no-op.
func (m *Model) Close() error {
	if m != nil && m.handle != nil {
		native.DeleteModel(m.handle)
		m.handle = nil
	}
	return nil
}

// native returns the handle, or a null one that the binding reports as closed.
func (m *Model) native() native.Model {
	if m == nil || m.handle == nil {
		return native.SwigcptrModel(0)
	}
	return m.handle
}

// Info describes the model.
func (m *Model) Info() (ModelInfo, error) {
	info, err := checked(m.native().Info)
	if err != nil {
		return ModelInfo{}, err
	}
	defer native.DeleteModelInfo(info)
	return ModelInfo{
		VocabSize:        int32(info.GetVocabSize()),
		HiddenSize:       int32(info.GetHiddenSize()),
		NumLayers:        int32(info.GetNumLayers()),
		NumHeads:         int32(info.GetNumHeads()),
		NumVHeads:        int32(info.GetNumVHeads()),
		HeadKDim:         int32(info.GetHeadKDim()),
		HeadVDim:         int32(info.GetHeadVDim()),
		ConvSize:         int32(info.GetConvSize()),
		IntermediateSize: int32(info.GetIntermediateSize()),
		BOSTokenID:       int32(info.GetBosTokenId()),
		EOSTokenID:       int32(info.GetEosTokenId()),
		NumParameters:    info.GetNumParameters(),
		StateBytes:       uint64(info.GetStateBytes()),
		Backend:          Backend(info.GetBackend()),
		HasTokenizer:     info.GetHasTokenizer(),
	}, nil
}

// TokenizerInfo describes the model's tokenizer; StatusState when the model has none.
func (m *Model) TokenizerInfo() (TokenizerInfo, error) {
	info, err := checked(m.native().TokenizerInfo)
	if err != nil {
		return TokenizerInfo{}, err
	}
	defer native.DeleteTokenizerInfo(info)
	return TokenizerInfo{
		VocabSize:     int32(info.GetVocabSize()),
		BOSTokenID:    int32(info.GetBosTokenId()),
		EOSTokenID:    int32(info.GetEosTokenId()),
		AddBOSDefault: info.GetAddBosDefault(),
	}, nil
}

// Tokenize encodes text as the text generation functions do: BOS per the tokenizer's default,
// special tokens written in the text parsed.
func (m *Model) Tokenize(text string) ([]int32, error) {
	return checked(func() []int32 { return m.native().TokenizeDefault(text) })
}

// TokenizeWith encodes text with an explicit BOS choice and special-token parsing.
func (m *Model) TokenizeWith(text string, addBOS, parseSpecial bool) ([]int32, error) {
	return checked(func() []int32 { return m.native().Tokenize(text, addBOS, parseSpecial) })
}

// Detokenize decodes token ids to text; skipSpecial drops special tokens.
func (m *Model) Detokenize(tokens []int32, skipSpecial bool) (string, error) {
	return checked(func() string { return m.native().Detokenize(tokens, skipSpecial) })
}
