// Token selection from logits: the target distribution. The definition here is the one plain
// sampling follows on every backend and the one speculative acceptance judges drafts by, so that
// speculative output is distributed exactly as plain sampling with the same settings. In order:
//   1. logit bias: l[t] += bias for every (t, bias) of cfg.logit_bias (duplicates add up);
//   2. penalties over the window, the last cfg.penalty_last_n tokens of the history (the
//      context, prompt included, then in a draft tree the path from the context to the node;
//      -1: all of it, 0: none): a token seen c > 0 times in the window gets
//      l <- (l > 0 ? l / repetition_penalty : l * repetition_penalty), then
//      l <- l - c * frequency_penalty - presence_penalty (llama.cpp's and HF's rules);
//      a transformed logit that overflows is clamped to +-FLT_MAX (never inf or NaN);
//   3. candidates: only the first cfg.candidates(vocab) ids are candidates (the others, padding
//      beyond a tokenizer's vocabulary, get probability 0 as if their logits were -inf);
//   4. greedy (SamplingConfig::greedy(): temperature below SPECLA_LIMIT_MIN_TEMPERATURE, or
//      top_k == 1): the largest candidate logit after 1-2, lowest id on ties; min-p is moot;
//   5. otherwise p = softmax(l / T) over the candidates, restricted to the top_k largest (ties:
//      lower id first), then to the smallest prefix of the descending order whose mass reaches
//      top_p, then to the tokens whose probability is >= min_p x the top probability (the top
//      token always stays), renormalised;
//   6. the token is the first in id order whose cumulative mass exceeds u * total.
// Steps 1-2 need the history; the backends' own samplers (temperature, top-k, top-p over the
// whole vocabulary) are used only when SamplingConfig::needs_host_sampler() is false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/backend.h"

namespace specla {

// The tokens before the sampled position: the context, then (a draft node's position) the draft
// path from the context to the node. Borrowed pointers.
struct History {
    const int32_t *context = nullptr;
    size_t n_context = 0;
    const int32_t *path = nullptr;
    size_t n_path = 0;
    static History of(const std::vector<int32_t> &context) { return {context.data(), context.size(), nullptr, 0}; }
};

int32_t argmax(const float *logits, int32_t n);

// Steps 1-2: the logits the selection reads. `logits` itself when cfg.transforms() is false,
// otherwise the transformed copy written into `scratch` (resized to vocab).
const float *transformed_logits(const float *logits, int32_t vocab, const SamplingConfig &cfg, const History &history,
                                std::vector<float> &scratch);

// The distribution the sampler draws from, written densely over the vocabulary (zeros for
// tokens removed by top-k/top-p/min-p and for ids that are not candidates). Used by lossless
// speculative acceptance and by tests. Without `history`, the penalties see no tokens (a
// drafter's proposal rows, tests of the context-free steps). `probs` (vocab floats) is also the
// function's scratch: it must not overlap `logits`.
void sampling_distribution(const float *logits, int32_t vocab, const SamplingConfig &cfg, const History &history,
                           float *probs);
void sampling_distribution(const float *logits, int32_t vocab, const SamplingConfig &cfg, float *probs);

// Step 4 alone: the greedy choice after the transformations.
int32_t greedy_token(const float *logits, int32_t vocab, const SamplingConfig &cfg, const History &history);

// Draw from a dense distribution (need not be normalised) with u in [0, 1).
int32_t sample_from_distribution(const float *probs, int32_t vocab, double u);
// The same with the row's total (its sum in double, in any fixed order) already known: one pass
// over the row instead of two.
int32_t sample_from_distribution(const float *probs, int32_t vocab, double u, double total);

int32_t sample_token(const float *logits, int32_t vocab, const SamplingConfig &cfg, const History &history, double u);
int32_t sample_token(const float *logits, int32_t vocab, const SamplingConfig &cfg, double u);

}  // namespace specla
