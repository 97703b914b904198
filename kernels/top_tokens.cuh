// The k most probable tokens of each row of logits and their log-probabilities, on the device:
// what greedy drafting needs of a drafter's output rows (spec/tree_builder.h), without moving
// vocab-sized rows to the host and scanning them there (on the H200 that host work, a softmax and
// a sort over 32000 ids per frontier row, was most of a learned drafter's pass).
// The host reference is sampling/logprobs.h top_tokens: the same order (the larger logit, the
// lower id on ties, -0 equal to +0) and log p = logit - logsumexp over the first n_candidates
// logits (here summed in float: within a few ulps of the host's double sum).
#pragma once

#include <stdint.h>

#include "launch_common.cuh"

namespace specla {
namespace kern {

constexpr int32_t kMaxTopTokens = 64;  // SPECLA_LIMIT_DRAFT_TOP_K

// Row r of `rows` (row stride ld floats): ids[r * k + i], logp[r * k + i] for i < k, most probable
// first; i >= n_candidates, and logits of -inf (probability 0): id -1, logp -inf. 1 <= k <= kMaxTopTokens.
cudaError_t launch_top_tokens(const float *logits, int64_t ld, int32_t rows, int32_t n_candidates, int32_t k,
                              int32_t *ids, float *logp, cudaStream_t stream);

}  // namespace kern
}  // namespace specla
