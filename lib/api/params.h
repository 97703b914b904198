// Conversions from the C parameter structs shared by several C API files.
#pragma once

#include <string>
#include <vector>

#include "engine/backend.h"
#include "generate/generate.h"
#include "generate/text_stream.h"
#include "specla/specla.h"

struct specla_model;
struct specla_session;
struct specla_drafter;

namespace specla {

class Tokenizer;

// A caller's generation parameters read (struct_size.h: defaults for what an older caller does
// not pass) together with the sampling parameters they point to (NULL: the defaults).
struct GenerateArgs {
    specla_generate_params generate;
    specla_sampling_params sampling;
};
// A caller's speculative parameters read with the generation (and sampling) parameters they point to.
struct SpecArgs {
    specla_spec_params spec;
    GenerateArgs generate;
};
specla_sampling_params read_sampling_params(const specla_sampling_params *caller);
GenerateArgs read_generate_params(const specla_generate_params *caller);
SpecArgs read_spec_params(const specla_spec_params *caller);

// Checks and converts; throws SPECLA_ERR_INVALID_ARGUMENT naming the bad field. The candidates
// are the ids the model's tokenizer defines: a model vocabulary padded beyond the tokenizer's
// (public checkpoints round it up) has ids that are not tokens, and they are never generated.
SamplingConfig sampling_for(const specla_session *session, const specla_sampling_params &p);
// The seed a generation uses: `requested`, or a freshly drawn one for SPECLA_SEED_RANDOM (never
// SPECLA_SEED_RANDOM itself, so that reporting it lets the caller repeat the run).
uint64_t seed_for(uint64_t requested);
// The engine's generation options from the C params: sampling checked, the seed resolved, EOS per stop_at_eos,
// the C callback (if any) as the per-token hook.
GenerateOptions generate_options(const specla_session *session, const GenerateArgs &p);
// SPECLA_ERR_INVALID_ARGUMENT when logprobs are asked of a call that runs to completion (only the
// pull API's steps carry them).
void require_no_logprobs(const GenerateOptions &opts);
// The text options: stop strings checked (their count before the array is read) and copied,
// the model's tokenizer, special tokens and stop strings in or out of the text.
TextOptions text_options(const specla_session *session, const GenerateArgs &p);
// The speculative options: generate_options plus the draft budget and tree parameters, checked,
// and the drafter checked (not NULL, of the session's model).
SpecOptions spec_options(const specla_session *session, const specla_drafter *drafter, const SpecArgs &p);
// The engine's statistics written to the caller's struct (struct_size.h); out may be NULL.
void fill_stats(const SpecStats &s, specla_spec_stats *out);

// The model's tokenizer or null.
const Tokenizer *tokenizer_of(const specla_model *model);

// The prompt of a text-generation call as ids (BOS per the tokenizer's default, special tokens
// parsed); SPECLA_ERR_STATE without a tokenizer, SPECLA_ERR_INVALID_ARGUMENT for an empty prompt
// on an empty session.
std::vector<int32_t> encode_text_prompt(const specla_session *session, const char *prompt, size_t prompt_len);

// The argument checks shared by the id-based generation calls: session, prompt and output buffer
// (which must hold max_tokens ids, or be NULL with capacity 0 when ids are only streamed).
void check_generate_args(const specla_session *session, const int32_t *prompt, size_t n_prompt,
                         const int32_t *out_tokens, size_t out_capacity, int32_t max_tokens);

// SPECLA_ERR_STATE when a pull generation (specla_generation_begin) that has not ended is using
// the session or the drafter (either may be NULL): nothing else may use them meanwhile.
void require_no_generation(const specla_session *session, const specla_drafter *drafter = nullptr);

// A copy of `text` the caller releases with specla_string_free().
char *library_string(const std::string &text);

}  // namespace specla
