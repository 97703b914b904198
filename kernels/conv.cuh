// The token-mixer front end for a block of tokens: short causal depthwise conv (window spilling
// into the conv cache) + SiLU on the q|k|v channels, l2 normalisation of q and k per head (q also
// times K^-1/2), and the per-value-head gates (log decay g, beta). Outputs are head-major with
// `n_padded` rows per head so that chunks of the WY form are contiguous; rows n..n_padded-1 are
// zeros (tokens that leave the state unchanged). The one-token step does the conv in the in_proj
// GEMV epilogue and the normalisation in the recurrent kernel instead.
// CPU reference: CpuPassOps::conv_gates (backend/cpu/cpu_forward.cpp) with cpu::l2_normalize,
// cpu::gdn_decay_log, cpu::gdn_beta (backend/cpu/cpu_gdn.h).
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

struct ConvPrefillParams {
    int32_t n = 0, n_padded = 0;
    const float *proj = nullptr;  // [n][proj_ld] in_proj output rows ([q|k|v|g|a|b])
    int64_t proj_ld = 0;
    const float *conv_cache = nullptr;  // [W-1][CC], oldest first (read only here)
    const float *conv_w = nullptr;      // [CC][W]
    int32_t W = 0, use_short_conv = 0;
    int32_t H = 0, HV = 0, K = 0, V = 0;
    int64_t row_a = 0, row_b = 0;
    const float *A_log = nullptr, *dt_bias = nullptr;
    float beta_scale = 1.f, q_scale = 1.f;
    float *q = nullptr, *k = nullptr;  // [H][n_padded][K]
    float *v = nullptr;                // [HV][n_padded][V]
    float *g = nullptr, *beta = nullptr;  // [HV][n_padded]
};

cudaError_t launch_conv_prefill(const ConvPrefillParams &p, const LaunchCtx &ctx);

// New conv cache after the block: the last W-1 pre-conv inputs of (old cache ++ the n rows).
// Must run after launch_conv_prefill (which reads the old cache).
cudaError_t launch_conv_cache_update(float *conv_cache, const float *proj, int64_t proj_ld, int32_t n, int32_t W,
                                     int64_t CC, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
