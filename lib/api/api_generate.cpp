// C API: sampling defaults and plain generation (ids and text), run to completion on the
// generation loop (lib/generate/generation.h) that the pull API steps through.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "api/guard.h"
#include "api/handles.h"
#include "api/params.h"
#include "api/struct_size.h"
#include "generate/generation.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

using namespace specla;

namespace specla {
namespace {

// A caller's array of n entries at ptr, n at most limit. The count is checked first: a huge one
// (a -1 that became a size_t) must not make us read the array.
template <class T>
void require_caller_array(const T *ptr, size_t n, size_t limit, const char *array_name, const char *count_name,
                          const char *limit_name) {
    require(n <= limit, SPECLA_ERR_INVALID_ARGUMENT, count_name, " is ", n, ", more than ", limit_name, " (", limit,
            ")");
    require(ptr != nullptr, SPECLA_ERR_INVALID_ARGUMENT, array_name, " is NULL but ", count_name, " is ", n);
}

specla_sampling_params sampling_defaults() {
    specla_sampling_params p{};
    p.struct_size = sizeof p;
    p.temperature = 0.f;
    p.top_k = 0;
    p.top_p = 1.f;
    p.seed = 0;
    p.repetition_penalty = 1.f;
    p.presence_penalty = 0.f;
    p.frequency_penalty = 0.f;
    p.penalty_last_n = 64;
    p.min_p = 0.f;
    p.logit_bias = nullptr;
    p.n_logit_bias = 0;
    return p;
}

specla_generate_params generate_defaults() {
    specla_generate_params p{};
    p.struct_size = sizeof p;
    p.sampling = nullptr;
    p.max_tokens = 128;
    p.on_token = nullptr;
    p.user_data = nullptr;
    p.stop_strings = nullptr;
    p.n_stop_strings = 0;
    p.stop_at_eos = true;
    p.include_special_tokens = false;
    p.include_stop_string = false;
    p.logprobs = false;
    p.top_logprobs = 0;
    return p;
}

}  // namespace

specla_sampling_params read_sampling_params(const specla_sampling_params *caller) {
    return read_params(caller, sampling_defaults(), "specla_sampling_params");
}

GenerateArgs read_generate_params(const specla_generate_params *caller) {
    GenerateArgs a;
    a.generate = read_params(caller, generate_defaults(), "specla_generate_params");
    a.sampling = read_sampling_params(a.generate.sampling);
    a.generate.sampling = nullptr;  // the caller's pointer is not kept beyond the read
    return a;
}

SamplingConfig sampling_for(const specla_session *session, const specla_sampling_params &p) {
    // Written so that NaN fails every check.
    require(std::isfinite(p.temperature) && p.temperature >= 0.f, SPECLA_ERR_INVALID_ARGUMENT,
            "temperature must be a finite number >= 0, got ", p.temperature);
    require(p.top_k >= 0, SPECLA_ERR_INVALID_ARGUMENT, "top_k must not be negative, got ", p.top_k);
    require(p.top_p > 0.f && p.top_p <= 1.f, SPECLA_ERR_INVALID_ARGUMENT, "top_p must be in (0, 1], got ", p.top_p);
    require(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.f, SPECLA_ERR_INVALID_ARGUMENT,
            "repetition_penalty must be a finite number > 0 (1 = off), got ", p.repetition_penalty);
    require(std::isfinite(p.presence_penalty), SPECLA_ERR_INVALID_ARGUMENT,
            "presence_penalty must be a finite number (0 = off), got ", p.presence_penalty);
    require(std::isfinite(p.frequency_penalty), SPECLA_ERR_INVALID_ARGUMENT,
            "frequency_penalty must be a finite number (0 = off), got ", p.frequency_penalty);
    require(p.penalty_last_n >= -1, SPECLA_ERR_INVALID_ARGUMENT,
            "penalty_last_n must be >= -1 (-1 = the whole context, 0 = none), got ", p.penalty_last_n);
    require(p.min_p >= 0.f && p.min_p <= 1.f, SPECLA_ERR_INVALID_ARGUMENT, "min_p must be in [0, 1], got ", p.min_p);
    SamplingConfig s;
    s.temperature = p.temperature;
    s.top_k = p.top_k;
    s.top_p = p.top_p;
    s.repetition_penalty = p.repetition_penalty;
    s.presence_penalty = p.presence_penalty;
    s.frequency_penalty = p.frequency_penalty;
    s.penalty_last_n = p.penalty_last_n;
    s.min_p = p.min_p;
    if (p.n_logit_bias) {
        require_caller_array(p.logit_bias, p.n_logit_bias, SPECLA_LIMIT_LOGIT_BIAS, "logit_bias", "n_logit_bias",
                             "SPECLA_LIMIT_LOGIT_BIAS");
        const int32_t vocab = session->impl->config().vocab_size;
        s.logit_bias.reserve(p.n_logit_bias);
        for (size_t i = 0; i < p.n_logit_bias; ++i) {
            const specla_logit_bias &b = p.logit_bias[i];
            require(b.token >= 0 && b.token < vocab, SPECLA_ERR_INVALID_ARGUMENT, "logit_bias[", i, "].token is ",
                    b.token, ", outside the model's vocabulary [0, ", vocab, ")");
            require(std::isfinite(b.bias), SPECLA_ERR_INVALID_ARGUMENT, "logit_bias[", i,
                    "].bias must be a finite number, got ", b.bias);
            s.logit_bias.emplace_back(b.token, b.bias);
        }
    }
    if (const Tokenizer *tok = tokenizer_of(session->model)) s.n_candidates = tok->vocab_size();
    return s;
}

uint64_t seed_for(uint64_t requested) {
    if (requested != SPECLA_SEED_RANDOM) return requested;
    std::random_device device;
    uint64_t seed;
    do {
        // Two 32-bit draws, mixed with the clock in case the device is a deterministic fallback.
        seed = (uint64_t(device()) << 32) ^ uint64_t(device()) ^
               uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    } while (seed == SPECLA_SEED_RANDOM);  // the value reported must repeat the run when passed back
    return seed;
}

GenerateOptions generate_options(const specla_session *session, const GenerateArgs &args) {
    const specla_generate_params &p = args.generate;
    require(p.max_tokens >= 0, SPECLA_ERR_INVALID_ARGUMENT, "max_tokens must not be negative, got ", p.max_tokens);
    GenerateOptions opts;
    opts.sampling = sampling_for(session, args.sampling);
    opts.seed = seed_for(args.sampling.seed);
    opts.max_tokens = p.max_tokens;
    opts.eos_token = p.stop_at_eos ? session->impl->config().eos_token_id : -1;
    static_assert(SPECLA_LIMIT_TOP_LOGPROBS == kMaxTopLogprobs, "one bound for the C API and the engine");
    opts.logprobs = p.logprobs;
    opts.top_logprobs = p.top_logprobs;  // checked by the generation
    if (specla_token_callback cb = p.on_token) {
        void *user_data = p.user_data;
        opts.on_token = [cb, user_data](int32_t t, const std::string &piece) { return cb(t, piece.c_str(), user_data); };
    }
    return opts;
}

void require_no_logprobs(const GenerateOptions &opts) {
    require(!opts.logprobs && opts.top_logprobs == 0, SPECLA_ERR_INVALID_ARGUMENT,
            "logprobs are reported per step by the pull API (specla_generation_begin / "
            "specla_generation_next); this call has nowhere to put them");
}

TextOptions text_options(const specla_session *session, const GenerateArgs &args) {
    const specla_generate_params &p = args.generate;
    TextOptions t;
    t.tokenizer = tokenizer_of(session->model);
    t.include_special = p.include_special_tokens;
    t.include_stop_string = p.include_stop_string;
    if (p.n_stop_strings) {
        require_caller_array(p.stop_strings, p.n_stop_strings, SPECLA_LIMIT_STOP_STRINGS, "stop_strings",
                             "n_stop_strings", "SPECLA_LIMIT_STOP_STRINGS");
        for (size_t i = 0; i < p.n_stop_strings; ++i) {
            require(p.stop_strings[i] != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "stop string ", i, " is NULL");
            t.stop_strings.emplace_back(p.stop_strings[i]);
        }
    }
    return t;
}

const Tokenizer *tokenizer_of(const specla_model *model) {
    return model->tokenizer ? model->tokenizer->impl.get() : nullptr;
}

std::vector<int32_t> encode_text_prompt(const specla_session *session, const char *prompt, size_t prompt_len) {
    const Tokenizer *tok = tokenizer_of(session->model);
    require(tok != nullptr, SPECLA_ERR_STATE, "this model has no tokenizer: generate from token ids instead");
    std::vector<int32_t> ids =
        tok->encode(std::string_view(prompt, prompt_len), tok->add_bos_default(), /*parse_special=*/true);
    require(!ids.empty() || session->impl->n_past() > 0, SPECLA_ERR_INVALID_ARGUMENT,
            "the prompt is empty and the session has no context to continue from");
    return ids;
}

void check_generate_args(const specla_session *session, const int32_t *prompt, size_t n_prompt,
                         const int32_t *out_tokens, size_t out_capacity, int32_t max_tokens) {
    require_arg(session, "session");
    require(n_prompt == 0 || prompt != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "prompt must not be NULL");
    require(out_capacity == 0 || out_tokens != nullptr, SPECLA_ERR_INVALID_ARGUMENT,
            "out_tokens must not be NULL when out_capacity > 0");
    // NULL with capacity 0: the caller takes the ids from on_token and needs no buffer.
    require(out_tokens == nullptr || out_capacity >= size_t(std::max(max_tokens, 0)), SPECLA_ERR_CAPACITY,
            "out_tokens holds ", out_capacity, " ids but max_tokens is ", max_tokens,
            " (pass NULL and 0 to receive the ids through on_token only)");
}

void require_no_generation(const specla_session *session, const specla_drafter *drafter) {
    require(!session || !session->generation, SPECLA_ERR_STATE,
            "the session is in use by a generation that has not ended (specla_generation_end ends it)");
    require(!drafter || !drafter->generation, SPECLA_ERR_STATE,
            "the drafter is in use by a generation that has not ended (specla_generation_end ends it)");
}

char *library_string(const std::string &text) {
    char *buf = static_cast<char *>(std::malloc(text.size() + 1));
    if (!buf) throw std::bad_alloc();
    std::memcpy(buf, text.c_str(), text.size() + 1);
    return buf;
}

}  // namespace specla

extern "C" {

SPECLA_API specla_status specla_sampling_params_init(specla_sampling_params *params, size_t struct_size) {
    return guarded([&] { init_params(params, struct_size, sampling_defaults(), "specla_sampling_params"); });
}

SPECLA_API specla_status specla_generate_params_init(specla_generate_params *params, size_t struct_size) {
    return guarded([&] { init_params(params, struct_size, generate_defaults(), "specla_generate_params"); });
}

SPECLA_API specla_status specla_generate(specla_session *session, const int32_t *prompt, size_t n_prompt,
                                         const specla_generate_params *caller_params, int32_t *out_tokens,
                                         size_t out_capacity, size_t *n_out) {
    if (n_out) *n_out = 0;
    return guarded([&] {
        const GenerateArgs params = read_generate_params(caller_params);
        check_generate_args(session, prompt, n_prompt, out_tokens, out_capacity, params.generate.max_tokens);
        require_no_generation(session);
        TextOptions text = text_options(session, params);
        SpecOptions opts;
        opts.gen = generate_options(session, params);
        require_no_logprobs(opts.gen);
        const GenerationResult r = run_generation(*session->impl, nullptr, prompt, n_prompt, opts, std::move(text));
        if (out_tokens) std::copy(r.tokens.begin(), r.tokens.end(), out_tokens);
        if (n_out) *n_out = r.tokens.size();
    });
}

SPECLA_API specla_status specla_generate_text(specla_session *session, const char *prompt,
                                              const specla_generate_params *caller_params, char **out_text,
                                              size_t *n_generated) {
    if (out_text) *out_text = nullptr;
    if (n_generated) *n_generated = 0;
    return guarded([&] {
        const GenerateArgs params = read_generate_params(caller_params);
        require_arg(session, "session");
        require_arg(prompt, "prompt");
        require_no_generation(session);
        const std::vector<int32_t> ids = encode_text_prompt(session, prompt, std::strlen(prompt));
        TextOptions text = text_options(session, params);
        SpecOptions opts;
        opts.gen = generate_options(session, params);
        require_no_logprobs(opts.gen);
        const GenerationResult r = run_generation(*session->impl, nullptr, ids.data(), ids.size(), opts, std::move(text));
        if (out_text) *out_text = library_string(r.text);
        if (n_generated) *n_generated = r.tokens.size();
    });
}

SPECLA_API void specla_string_free(char *text) { std::free(text); }

}  // extern "C"
