// bf16 matrix x fp32 vector for one-token steps, with the step's neighbouring element-wise work
// fused in: a prologue that builds the input vector (RMSNorm of the residual, or the gated head
// norm of the mixer output) and an epilogue per output row (store, residual add, SwiGLU of a
// [gate|up] row pair, the in_proj row types, logits with a running argmax).
// Host-visible declarations; device code in gemv.cu. CPU references: backend/cpu/cpu_ops.h
// (linear, rmsnorm, silu, softplus) and backend/cpu/cpu_gdn.h (gated_rmsnorm, gate values).
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

enum class GemvPrologue : int32_t {
    None = 0,     // x as given
    RmsNorm = 1,  // x / sqrt(mean(x^2) + eps) * norm_w
    HeadNorm = 2  // per head of head_dim: x / sqrt(mean(x_head^2) + eps) * norm_w[c % head_dim] * gate
                  // (gate: silu(z) if use_gate == 1, z if use_gate == 2 (already silu'd), else 1)
};

enum class GemvEpilogue : int32_t {
    Store = 0,   // out[r] = y
    Add = 1,     // out[r] += y (residual)
    SwiGLU = 2,  // rows = 2I ([gate | up]); out[j] = silu(y_j) * y_{I+j}, j < I
    InProj = 3,  // fused in_proj rows: conv+SiLU (q|k|v), raw z, log decay (a), beta (b)
    Logits = 4   // out[r] = y, and *argmax = max(*argmax, key(y, r)) (see device_common.cuh)
};

struct GemvParams {
    const uint16_t *w = nullptr;  // bf16 [rows][cols], row-major, 16-byte aligned
    int64_t rows = 0, cols = 0;

    GemvPrologue pro = GemvPrologue::None;
    const float *x = nullptr;       // [cols]
    const float *norm_w = nullptr;  // RmsNorm: [cols]; HeadNorm: [head_dim]
    float eps = 1e-6f;
    const float *z = nullptr;  // HeadNorm gate input [cols]
    int32_t head_dim = 0;
    int32_t use_gate = 0;  // HeadNorm: 0 none, 1 silu(z), 2 z holds silu(z) (see silu_z)

    GemvEpilogue epi = GemvEpilogue::Store;
    float *out = nullptr;

    // InProj epilogue.
    float *conv_cache = nullptr;  // [conv_size-1][conv_channels], oldest first (updated in place)
    const float *conv_w = nullptr;  // [conv_channels][conv_size]
    int32_t conv_size = 0, conv_channels = 0, use_short_conv = 0;
    int64_t row_a = 0, row_b = 0;  // first rows of a and b (z rows are [conv_channels, row_a))
    const float *A_log = nullptr, *dt_bias = nullptr;
    float beta_scale = 1.f;  // 2 with allow_neg_eigval
    // 1: the z rows store silu(z), so that the next HeadNorm (use_gate = 2) does not compute the
    // gate of every column again in every CTA (the same function of the same value: same bits).
    int32_t silu_z = 0;

    unsigned long long *argmax = nullptr;  // Logits epilogue; reset to 0 before the pass
    // Optional word set to 0 by one thread after the grid-dependency wait, i.e. once every earlier
    // kernel of the stream is complete (the decoding step clears its pending-commit count here).
    int32_t *clear_after_wait = nullptr;

#ifdef SPECLA_KERNEL_TRACE
    unsigned long long *trace = nullptr;  // diagnostics: kOpTraceSlots words (launch_common.cuh)
#endif
    int32_t ctas_per_sm = 0;  // 0: as many as fit (occupancy); tuning knob for benchmarks
    int32_t force_generic = 0;  // use the scalar fallback kernel (tests)
};

cudaError_t launch_gemv(const GemvParams &p, const LaunchCtx &ctx);

// The thread layout launch_gemv picks (host rule, shared with the multi-row GEMV so that both
// reduce every row in the same order): whether the vectorised kernel runs, the 16-byte chunks per
// thread and row (CPT), and the threads per CTA.
constexpr int32_t kGemvMaxThreads = 512;
inline bool gemv_vectorised(const GemvParams &p) {
    const int64_t nch = p.cols / 8;
    return !p.force_generic && p.cols % 8 == 0 && nch <= 4 * kGemvMaxThreads &&
           (p.pro != GemvPrologue::HeadNorm || p.head_dim % 8 == 0) && (reinterpret_cast<uintptr_t>(p.w) & 15) == 0;
}
inline int32_t gemv_cpt(int64_t cols) {
    const int64_t nch = cols / 8;
    return nch <= kGemvMaxThreads ? 1 : nch <= 2 * kGemvMaxThreads ? 2 : 4;
}
inline int32_t gemv_threads(int64_t cols) {
    const int64_t per = (cols / 8 + gemv_cpt(cols) - 1) / gemv_cpt(cols);
    return int32_t((per + 31) / 32 * 32);
}

}  // namespace kern
}  // namespace specla
