// Conversions from the C parameter structs shared by several C API files.
#pragma once

#include <string>
#include <vector>

#include "engine/backend.h"
#include "generate/generate.h"
#include "specla/specla.h"

struct specla_model;
struct specla_session;

namespace specla {

class Tokenizer;
class TextStream;

// Checks and converts; throws SPECLA_ERR_INVALID_ARGUMENT naming the bad field. The candidates
// are the ids the model's tokenizer defines: a model vocabulary padded beyond the tokenizer's
// (public checkpoints round it up) has ids that are not tokens, and they are never generated.
SamplingConfig sampling_for(const specla_session *session, const specla_sampling_params &p);
// The engine's generation options from the C params: sampling checked, EOS per stop_at_eos,
// each token handed to `stream`.
GenerateOptions generate_options(const specla_session *session, const specla_generate_params &p, TextStream &stream);

// The model's tokenizer or null.
const Tokenizer *tokenizer_of(const specla_model *model);

// The prompt of a text-generation call as ids (BOS per the tokenizer's default, special tokens
// parsed); SPECLA_ERR_STATE without a tokenizer, SPECLA_ERR_INVALID_ARGUMENT for an empty prompt
// on an empty session. `tok` receives the tokenizer.
std::vector<int32_t> encode_text_prompt(const specla_session *session, const char *prompt, const Tokenizer *&tok);

// The argument checks shared by the id-based generation calls: session, prompt and output buffer
// (which must hold max_tokens ids, or be NULL with capacity 0 when ids are only streamed).
void check_generate_args(const specla_session *session, const int32_t *prompt, size_t n_prompt,
                         const int32_t *out_tokens, size_t out_capacity, int32_t max_tokens);

// A copy of `text` the caller releases with specla_string_free().
char *library_string(const std::string &text);

}  // namespace specla
