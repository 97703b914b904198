// bf16 matrix x n fp32 vectors for speculative verification (n = the nodes of a draft tree), with
// the same prologues and epilogues as the one-token GEMV (gemv.cuh). Every output (row, token) is
// reduced in exactly the order the one-token kernel uses for that row (same thread layout, same
// per-thread chunk order, the warp butterfly reproduced as a transposed reduction, warps summed in
// order), so a verified node's values are bitwise those of a plain decoding step of its path.
// Weights are read once per pass: token tiles are a grid dimension, the CTAs of one row range run
// side by side and share the weight stream through L2.
// Shapes the vectorised one-token kernel does not cover (cols % 8 != 0, ...) fall back to one
// one-token launch per row (exact as well, weights re-read).
#pragma once

#include "gemv.cuh"

namespace specla {
namespace kern {

struct GemvMultiParams {
    GemvParams g;           // as for launch_gemv; epi: Store, Add, SwiGLU or Logits (InProj is refused)
    int32_t n = 1;          // token rows
    int64_t x_ld = 0;       // floats between consecutive tokens' x (and z: z_ld)
    int64_t z_ld = 0;
    int64_t out_ld = 0;     // floats between consecutive tokens' outputs
    // Logits: g.argmax points at n keys (one per token), zeroed before the pass.
};

cudaError_t launch_gemv_multi(const GemvMultiParams &p, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
