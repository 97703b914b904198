// Row-wise norms of a block of tokens, producing the bf16 inputs of the prefill matrix products.
// CPU references: cpu::rmsnorm (backend/cpu/cpu_ops.h), cpu::gated_rmsnorm (backend/cpu/cpu_gdn.h).
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

// out[t][c] = bf16( x[t][c] / sqrt(mean(x[t]^2) + eps) * w[c] ), x rows `ldx` floats apart.
cudaError_t launch_rmsnorm_rows(const float *x, int64_t ldx, const float *w, int32_t n, int64_t D, float eps,
                                uint16_t *out, const LaunchCtx &ctx);

// Gated RMSNorm of the mixer output, per token t and value head hv (V values each):
//   out[t][hv*V + j] = bf16( o / sqrt(mean(o_head^2) + eps) * o_norm[j] * (silu(z) if z) )
// with o(t, hv, j) = o[t*o_tstride + hv*o_hstride + j] and z(t, hv, j) = z[t*z_tstride + hv*V + j].
cudaError_t launch_gated_norm_rows(const float *o, int64_t o_tstride, int64_t o_hstride, const float *z,
                                   int64_t z_tstride, const float *o_norm, int32_t n, int32_t HV, int32_t V,
                                   float eps, uint16_t *out, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
