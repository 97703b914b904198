// Token selection from logits. The definition here is the one every backend follows:
//   only the first cfg.candidates(vocab) ids are candidates (the others, padding beyond a
//   tokenizer's vocabulary, get probability 0 as if their logits were -inf);
//   greedy (SamplingConfig::greedy(): temperature below SPECLA_LIMIT_MIN_TEMPERATURE, or
//   top_k == 1): the largest candidate logit, lowest id on ties;
//   otherwise p = softmax(logits / T) over the candidates restricted to the top_k largest (ties:
//   lower id first), then to the smallest prefix of the descending order whose mass reaches
//   top_p, renormalised; the token is the first in id order whose cumulative mass exceeds
//   u * total.
#pragma once

#include <cstdint>

#include "engine/backend.h"

namespace specla {

int32_t argmax(const float *logits, int32_t n);

// The distribution the sampler draws from, written densely over the vocabulary (zeros for
// tokens removed by top-k/top-p and for ids that are not candidates). Used by lossless speculative acceptance and by tests.
void sampling_distribution(const float *logits, int32_t vocab, const SamplingConfig &cfg, float *probs);

// Draw from a dense distribution (need not be normalised) with u in [0, 1).
int32_t sample_from_distribution(const float *probs, int32_t vocab, double u);

int32_t sample_token(const float *logits, int32_t vocab, const SamplingConfig &cfg, double u);

}  // namespace specla
