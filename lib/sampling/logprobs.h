// Log-probabilities of generated tokens, as an application reports them (OpenAI's `logprobs`):
// under the model's own distribution, log-softmax of the target's raw logits over the candidate
// ids (SamplingConfig::candidates: padding beyond a tokenizer's vocabulary is not a token). They
// describe the model, not the sampler: temperature, top-k/top-p/min-p, penalties and logit bias
// change which token is chosen, not the numbers reported for it, so a greedy and a sampled run
// report the same value for the same token after the same context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specla {

// The log-probability of `token` (which must be a candidate) and, in top_ids / top_logprobs
// (n_top entries each), the n_top most likely candidates in descending order (ties: lower id
// first). n_top at most n_candidates. Computed in double, returned as float.
void token_logprobs(const float *logits, int32_t n_candidates, int32_t token, int32_t n_top, float *logprob,
                    int32_t *top_ids, float *top_logprobs);

// The k most likely of the first n_candidates ids (k >= 1, any size: slots past the candidates,
// and candidates of logit -inf, probability 0, are id -1 with logp -inf), most likely first (ties:
// lower id first), with their log-probabilities as token_logprobs gives them (within float
// rounding: the exponentials are taken in float): what greedy drafting needs of a row
// (engine/backend.h TopTokens; the device form is kernels/top_tokens.cuh).
void top_tokens(const float *logits, int32_t n_candidates, int32_t k, int32_t *ids, float *logp);

// What a generation reports per emitted token when asked: one logprob per token, and n_top
// alternatives per token (row-major, n_tokens x n_top).
struct LogprobRows {
    std::vector<float> logprobs;
    std::vector<int32_t> top_ids;
    std::vector<float> top_logprobs;
    void clear() {
        logprobs.clear();
        top_ids.clear();
        top_logprobs.clear();
    }
    // Appends one token's row.
    void append(const float *logits, int32_t n_candidates, int32_t token, int32_t n_top);
    // Appends another's rows (same n_top).
    void extend(const LogprobRows &other);
};

}  // namespace specla
