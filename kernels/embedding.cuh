// Embedding gather: h[t * h_ld + c] = fp32(embeddings[tokens[t]][c]), t < n, c < D (h_ld >= D: a
// drafter model gathers into the first half of its [n][2D] fc input rows). Token ids are read from
// device memory (so a captured decoding step reads the id written before each replay). Optionally
// resets an argmax slot for the pass's logits epilogue. CPU reference: Matrix::row_to_f32
// (model/weights.h).
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

cudaError_t launch_embedding(const uint16_t *emb, const int32_t *tokens, int32_t n, int64_t D, float *h, int64_t h_ld,
                             unsigned long long *argmax_reset, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
