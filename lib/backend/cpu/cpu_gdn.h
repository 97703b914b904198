// The Gated DeltaNet token mixer on the CPU, in the exact order of gdn_math.md (beside this file,
// section 2). These are the reference arithmetic for the recurrent step that the CUDA kernels are
// tested against.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace specla {
namespace cpu {

// One value head's state S [K][V] (row i = key index) advanced by one token:
//   S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T q.
// Writes the residual u (the commit factor) when `u_out` is not null.
void gdn_step(float *S, int K, int V, const float *q, const float *k, const float *v, float beta, float g,
              float *o, float *u_out);

// Apply one stored factor to a state: S <- exp(g) S + k u^T (commit without replay).
void gdn_apply_factor(float *S, int K, int V, const float *k, const float *u, float g);

// Per-token gate values of one value head from the a/b projections.
inline float gdn_decay_log(float a, float A_log, float dt_bias);  // g = -exp(A_log) * softplus(a + dt_bias)
float gdn_beta(float b, bool allow_neg_eigval);

// q or k head vector: x / sqrt(sum x^2 + 1e-6), times `scale`.
void l2_normalize(float *x, int n, float scale);

// Gated RMSNorm of one head output: y = o / sqrt(mean(o^2) + eps) * w * silu(z)  (z null: no gate).
void gated_rmsnorm(const float *o, const float *w, const float *z, int V, float eps, float *y);

}  // namespace cpu
}  // namespace specla

#include "backend/cpu/cpu_ops.h"

namespace specla {
namespace cpu {
inline float gdn_decay_log(float a, float A_log, float dt_bias) {
    return -__builtin_expf(A_log) * softplus(a + dt_bias);
}
}  // namespace cpu
}  // namespace specla
