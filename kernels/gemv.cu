// bf16 GEMV with fused prologue/epilogue (see gemv.cuh).
//
// Layout of the fast kernel: a CTA of T threads owns a contiguous range of output rows; every
// thread always reads the same CPT 16-byte chunks (8 bf16 each) of a row, so its slice of the input
// vector lives in registers for the whole kernel and the inner loop is loads + FMAs only. RB rows
// are loaded per iteration (RB*CPT 16-byte loads in flight per thread) and the next RB rows are
// loaded before the current ones are reduced (register double buffering). The first rows are
// loaded before the grid-dependency wait, so with programmatic dependent launch the weight stream
// of this kernel overlaps the tail of the previous one. The grid is one wave (CTAs per SM x SMs),
// rows split evenly, so the memory system sees one uninterrupted stream.
//
// Latency, not bandwidth, sets the cost of a kernel's start and end in a decoding step: an L2 round
// trip takes about a microsecond while the weight stream saturates the memory (measured with
// bench_decode --trace), and every dependent round trip before the first row or inside a row
// block's epilogue is paid on the step's critical path. So everything that no kernel of the pass
// writes is read before the grid-dependency wait (the norm weights into registers, the conv taps
// and windows and gate constants of the CTA's rows into shared memory), and what the previous
// kernel wrote is read in one round trip right after it (the input vector, the gate of the head
// norm and the residual rows of an Add epilogue, together).
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "device_common.cuh"
#include "gemv.cuh"
#include "gemv_rows.cuh"

namespace specla {
namespace kern {

namespace {

constexpr int kMaxThreads = kGemvMaxThreads;
constexpr int kMaxWarps = kMaxThreads / 32;
// Shared memory of a vectorised CTA after the head-norm sums: the per-row epilogue operands of its
// rows (at most rows_max = ceil(L / grid) rows), `row_stride` floats per row.
__host__ __device__ __forceinline__ int row_stride(const GemvParams &p) {
    if (p.epi == GemvEpilogue::Add) return 1;  // the residual
    if (p.epi == GemvEpilogue::InProj) {        // conv taps then window; or A_log, dt_bias
        const int w = 2 * p.conv_size - 1;
        return w > 2 ? w : 2;
    }
    return 0;
}

__device__ __forceinline__ void gemv_epilogue(const GemvParams &p, int64_t r, float y, float y_up,
                                              unsigned long long &best, const float *rp) {
    switch (p.epi) {
        case GemvEpilogue::Store: p.out[r] = y; break;
        case GemvEpilogue::Add: p.out[r] = (rp ? rp[0] : p.out[r]) + y; break;
        case GemvEpilogue::SwiGLU: p.out[r] = siluf_(y) * y_up; break;
        case GemvEpilogue::Logits:
            p.out[r] = y;
            best = u64_max(best, argmax_key(y, uint32_t(r)));
            break;
        case GemvEpilogue::InProj:
            p.out[r] = rp ? inproj_row_from(r, y, rp, p.conv_cache, p.conv_size, p.conv_channels, p.use_short_conv,
                                            p.row_a, p.row_b, p.beta_scale, p.silu_z)
                          : inproj_row(r, y, p.conv_cache, p.conv_w, p.conv_size, p.conv_channels, p.use_short_conv,
                                       p.row_a, p.row_b, p.A_log, p.dt_bias, p.beta_scale, p.silu_z);
            break;
    }
}

// Before the grid-dependency wait (no kernel of the pass writes them; the conv cache only this
// kernel; the model's constants through ld_keep): the in_proj epilogue operands of rows
// [r_begin, r_end) into `rp` (inproj_row_from's layout). No barrier: they are read after
// gemv_step's.
__device__ __forceinline__ void gemv_load_row_params(const GemvParams &p, int64_t r_begin, int64_t r_end, float *rp) {
    if (p.epi != GemvEpilogue::InProj) return;
    const int st = row_stride(p), W = p.conv_size;
    const int64_t CC = p.conv_channels;
    for (int64_t i = threadIdx.x; i < (r_end - r_begin) * st; i += blockDim.x) {
        const int64_t r = r_begin + i / st;
        const int j = int(i % st);
        float v = 0.f;
        if (r < CC) {
            if (p.use_short_conv)
                v = j < W ? ld_keep(p.conv_w + r * W + j) : j < 2 * W - 1 ? p.conv_cache[(j - W) * CC + r] : 0.f;
        } else if (r >= p.row_a && r < p.row_b) {
            v = j == 0 ? ld_keep(p.A_log + (r - p.row_a)) : j == 1 ? ld_keep(p.dt_bias + (r - p.row_a)) : 0.f;
        }
        rp[i] = v;
    }
}

// Right after the wait, with the input vector: the residual rows of an Add epilogue.
__device__ __forceinline__ void gemv_load_residual(const GemvParams &p, int64_t r_begin, int64_t r_end, float *rp) {
    if (p.epi != GemvEpilogue::Add) return;
    for (int64_t i = threadIdx.x; i < r_end - r_begin; i += blockDim.x) rp[i] = p.out[r_begin + i];
}

// Reduces the per-thread argmax keys of a CTA and merges them into *p.argmax.
__device__ __forceinline__ void gemv_argmax_merge(const GemvParams &p, unsigned long long best) {
    __shared__ unsigned long long red[kMaxWarps];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    best = warp_max_u64(best);
    if (lane == 0) red[warp] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long b = 0;
        for (int i = 0; i < nw; ++i) b = u64_max(b, red[i]);
        atomicMax(p.argmax, b);
    }
}

template <int CPT, int RB, bool PAIRED>
__device__ __forceinline__ void gemv_load(uint4 (&buf)[RB][CPT], const uint4 *W, int64_t lr, int64_t r_end,
                                          int64_t L, int nch) {
#pragma unroll
    for (int i = 0; i < RB; ++i)
#pragma unroll
        for (int s = 0; s < CPT; ++s) {
            bool ok;
            const uint4 *src = block_chunk<RB, PAIRED>(W, i, s, lr, r_end, L, nch, ok);
            buf[i][s] = ok ? ld_stream(src) : make_uint4(0, 0, 0, 0);
        }
}

// Reduces RB rows (RL rows or row pairs from lr) and runs their epilogues; `rp` holds the
// epilogue operands of the CTA's rows from `r_begin` (row_stride floats per row).
template <int CPT, int RB, bool PAIRED>
__device__ __forceinline__ void gemv_step(const GemvParams &p, const uint4 (&buf)[RB][CPT], const float (&xr)[CPT][8],
                                          int64_t lr, int64_t r_end, float (*red)[kMaxWarps],
                                          unsigned long long &best, const float *rp, int64_t r_begin, int st,
                                          float &scale, const float *red32) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    float acc[RB];
#pragma unroll
    for (int i = 0; i < RB; ++i) acc[i] = warp_sum(chunk_dot<CPT>(buf[i], xr));
    if (lane == 0)
#pragma unroll
        for (int i = 0; i < RB; ++i) red[i][warp] = acc[i];
    __syncthreads();
    // The RMSNorm scale, once, by the warp that runs the epilogues (scale < 0: not formed yet).
    if (warp == 0 && scale < 0.f) scale = rms_scale_from(red32, nw, p.cols, p.eps);
    if (tid < RL && lr + tid < r_end) {
        float y = 0.f, y_up = 0.f;
        for (int w = 0; w < nw; ++w) {
            y += red[tid][w];
            if (PAIRED) y_up += red[tid + RL][w];
        }
        gemv_epilogue(p, lr + tid, y * scale, y_up * scale, best, st ? rp + (lr + tid - r_begin) * st : nullptr);
    }
}

template <int CPT, int RB, bool PAIRED>
__global__ void __launch_bounds__(kMaxThreads) gemv_kernel(const GemvParams p) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    __shared__ float red[2][RB][kMaxWarps];
    __shared__ float red32[32];
    extern __shared__ float dyn[];  // head-norm sums, then the epilogue operands of the CTA's rows
    const int nch = int(p.cols >> 3);
    const int64_t L = PAIRED ? p.rows / 2 : p.rows;
    const int64_t r_begin = L * blockIdx.x / gridDim.x, r_end = L * (blockIdx.x + 1) / gridDim.x;
    const uint4 *W = reinterpret_cast<const uint4 *>(p.w);
    float *head_ss = dyn;
    float *rp = dyn + (p.pro == GemvPrologue::HeadNorm ? head_norm_floats(p.cols, p.head_dim) : 0);
    const int st = row_stride(p);

    SPECLA_OP_TRACE(p.trace, 0);
    // Before the wait: what no kernel of the pass writes. The weight rows go last, so that the
    // small operands are not queued behind them.
    float nw[CPT][8];
    gemv_prologue_weights<CPT>(p.pro, p.norm_w, p.head_dim, p.cols, nw);
    gemv_load_row_params(p, r_begin, r_end, rp);
    uint4 wa[RB][CPT], wb[RB][CPT];
    gemv_load<CPT, RB, PAIRED>(wa, W, r_begin, r_end, L, nch);
    pdl_wait();
    pdl_trigger();
    SPECLA_OP_TRACE(p.trace, 1);
    if (p.clear_after_wait && blockIdx.x == 0 && threadIdx.x == 0) *p.clear_after_wait = 0;
    gemv_load_residual(p, r_begin, r_end, rp);
    float xr[CPT][8];
    gemv_prologue_x<CPT>(p.pro, p.x, nw, p.eps, p.z, p.head_dim, p.use_gate, p.cols, xr, red32, head_ss);
    SPECLA_OP_TRACE(p.trace, 2);

    unsigned long long best = 0;
    float scale = p.pro == GemvPrologue::RmsNorm ? -1.f : 1.f;  // the row sums' factor (rms_scale)
    int par = 0;
    for (int64_t lr = r_begin; lr < r_end;) {
        if (lr + RL < r_end) gemv_load<CPT, RB, PAIRED>(wb, W, lr + RL, r_end, L, nch);
        gemv_step<CPT, RB, PAIRED>(p, wa, xr, lr, r_end, red[par], best, rp, r_begin, st, scale, red32);
        par ^= 1;
        lr += RL;
        if (lr >= r_end) break;
        if (lr + RL < r_end) gemv_load<CPT, RB, PAIRED>(wa, W, lr + RL, r_end, L, nch);
        gemv_step<CPT, RB, PAIRED>(p, wb, xr, lr, r_end, red[par], best, rp, r_begin, st, scale, red32);
        par ^= 1;
        lr += RL;
    }
    if (p.epi == GemvEpilogue::Logits) gemv_argmax_merge(p, best);
    SPECLA_OP_TRACE(p.trace, 3);
}

// Fallback for any shape (cols not a multiple of 8, very long rows): x in shared memory, one warp
// per output row, scalar loads.
__global__ void __launch_bounds__(256) gemv_generic_kernel(const GemvParams p) {
    extern __shared__ float sm[];
    __shared__ float red32[32];
    float *x = sm;
    float *head_ss = sm + p.cols;
    const int tid = threadIdx.x, T = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = T >> 5;
    const int64_t cols = p.cols;
    pdl_wait();
    pdl_trigger();
    if (p.clear_after_wait && blockIdx.x == 0 && threadIdx.x == 0) *p.clear_after_wait = 0;
    for (int64_t c = tid; c < cols; c += T) x[c] = p.x[c];
    float scale = 1.f;  // RMSNorm: rms_scale, applied to the row sums
    if (p.pro == GemvPrologue::RmsNorm) {
        float ss = 0.f;
        for (int64_t c = tid; c < cols; c += T) ss += x[c] * x[c];
        scale = rms_scale(block_sum(ss, red32), cols, p.eps);
        for (int64_t c = tid; c < cols; c += T) x[c] *= p.norm_w[c];
    } else if (p.pro == GemvPrologue::HeadNorm) {
        const int hd = p.head_dim, n_heads = int(cols / hd);
        __syncthreads();
        for (int i = tid; i < n_heads; i += T) {
            float ss = 0.f;
            for (int j = 0; j < hd; ++j) ss += x[int64_t(i) * hd + j] * x[int64_t(i) * hd + j];
            head_ss[i] = ss;
        }
        __syncthreads();
        for (int64_t c = tid; c < cols; c += T) {
            const float inv = rms_scale(head_ss[c / hd], hd, p.eps);
            const float gate = p.use_gate ? head_norm_gate(p.use_gate, p.z[c]) : 1.f;
            x[c] = x[c] * inv * p.norm_w[c % hd] * gate;
        }
    }
    __syncthreads();
    const bool paired = p.epi == GemvEpilogue::SwiGLU;
    const int64_t L = paired ? p.rows / 2 : p.rows;
    unsigned long long best = 0;
    for (int64_t r = int64_t(blockIdx.x) * nw + warp; r < L; r += int64_t(gridDim.x) * nw) {
        const uint16_t *w0 = p.w + r * cols;
        const uint16_t *w1 = paired ? p.w + (L + r) * cols : w0;
        float y = 0.f, y_up = 0.f;
        for (int64_t c = lane; c < cols; c += 32) {
            y = fmaf(bf16_to_float(w0[c]), x[c], y);
            if (paired) y_up = fmaf(bf16_to_float(w1[c]), x[c], y_up);
        }
        y = warp_sum(y);
        y_up = warp_sum(y_up);
        if (lane == 0) gemv_epilogue(p, r, y * scale, y_up * scale, best, nullptr);
    }
    if (p.epi == GemvEpilogue::Logits) gemv_argmax_merge(p, best);
}

using KernelFn = void (*)(GemvParams);

int ctas_per_sm(KernelFn fn, int threads, size_t smem) {
    static std::mutex mu;
    static std::map<std::tuple<void *, int, size_t>, int> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple(reinterpret_cast<void *>(fn), threads, smem);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    int n = 1;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, threads, smem) != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        n = 1;
    }
    cache.emplace(key, n);
    return n;
}

template <int CPT, int RB>
KernelFn pick(bool paired) {
    return paired ? gemv_kernel<CPT, RB, true> : gemv_kernel<CPT, RB, false>;
}

// Raises a kernel's dynamic shared-memory limit to `smem` once (the first decoding step runs
// eagerly, outside any capture).
cudaError_t allow_smem(KernelFn fn, size_t smem) {
    if (smem <= 48 * 1024) return cudaSuccess;
    static std::mutex mu;
    static std::map<void *, size_t> raised;
    std::lock_guard<std::mutex> lock(mu);
    size_t &r = raised[reinterpret_cast<void *>(fn)];
    if (smem <= r) return cudaSuccess;
    const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e == cudaSuccess) r = smem;
    return e;
}

}  // namespace

cudaError_t launch_gemv(const GemvParams &p, const LaunchCtx &ctx) {
    const bool paired = p.epi == GemvEpilogue::SwiGLU;
    const int64_t L = paired ? p.rows / 2 : p.rows;
    if (L <= 0) return cudaSuccess;
    const bool vec = gemv_vectorised(p);
    if (!vec) {
        const int threads = 256;
        size_t smem = size_t(p.cols) * 4;
        if (p.pro == GemvPrologue::HeadNorm) smem += size_t(p.cols / p.head_dim) * 4;
        const cudaError_t e = allow_smem(gemv_generic_kernel, smem);
        if (e != cudaSuccess) return e;
        const int per_sm = p.ctas_per_sm > 0 ? p.ctas_per_sm : ctas_per_sm(gemv_generic_kernel, threads, smem);
        const int grid = int(std::min<int64_t>(ceil_div(L, threads / 32), int64_t(per_sm) * ctx.sm_count));
        return launch_kernel(gemv_generic_kernel, dim3(grid), dim3(threads), smem, ctx, p);
    }
    const int cpt = gemv_cpt(p.cols);
    const int threads = gemv_threads(p.cols);
    const size_t head_smem = p.pro == GemvPrologue::HeadNorm ? size_t(head_norm_floats(p.cols, p.head_dim)) * 4 : 0;
    KernelFn fn;
    int rb;
    if (cpt == 1) fn = pick<1, 8>(paired), rb = 8;
    else if (cpt == 2) fn = pick<2, 4>(paired), rb = 4;
    else fn = pick<4, 2>(paired), rb = 2;
    const int rl = paired ? rb / 2 : rb;
    // The grid is sized before the epilogue operands (their size depends on the rows per CTA); the
    // occupancy query sees the head-norm part only, which the operands (a few KB) do not change.
    const int per_sm = p.ctas_per_sm > 0 ? p.ctas_per_sm : ctas_per_sm(fn, threads, head_smem);
    const int grid = int(std::min<int64_t>(ceil_div(L, rl), int64_t(per_sm) * ctx.sm_count));
    const size_t smem = head_smem + size_t(ceil_div(L, grid)) * size_t(row_stride(p)) * 4;
    const cudaError_t e = allow_smem(fn, smem);
    if (e != cudaSuccess) return e;
    return launch_kernel(fn, dim3(grid), dim3(threads), smem, ctx, p);
}

}  // namespace kern
}  // namespace specla
