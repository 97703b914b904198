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
