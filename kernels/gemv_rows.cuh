// Row arithmetic shared by the GEMV kernels (gemv.cu, gemv_multi.cu) and the experimental persistent
// decoding step (bench/experiments/persistent_step/decode_step.cu): the per-thread partial dot
// product of 16-byte bf16 chunks with fp32 inputs, the input-vector prologues, and the in_proj row
// epilogue. Device code only. The multi-row GEMV of speculative verification reproduces the
// one-row kernel's arithmetic bit for bit by calling the same functions with the same thread layout.
#pragma once

#include "device_common.cuh"
#include "gemv.cuh"

namespace specla {
namespace kern {

// a + the 8 bf16 weights of q times x[0..8).
__device__ __forceinline__ float fma8(uint4 q, const float (&x)[8], float a) {
    a = fmaf(bf16_lo(q.x), x[0], a);
    a = fmaf(bf16_hi(q.x), x[1], a);
    a = fmaf(bf16_lo(q.y), x[2], a);
    a = fmaf(bf16_hi(q.y), x[3], a);
    a = fmaf(bf16_lo(q.z), x[4], a);
    a = fmaf(bf16_hi(q.z), x[5], a);
    a = fmaf(bf16_lo(q.w), x[6], a);
    a = fmaf(bf16_hi(q.w), x[7], a);
    return a;
}

// Sum over this thread's CPT chunks of 8 bf16 weights times the matching 8 fp32 inputs.
template <int CPT>
__device__ __forceinline__ float chunk_dot(const uint4 (&w)[CPT], const float (&xr)[CPT][8]) {
    float a = 0.f;
#pragma unroll
    for (int s = 0; s < CPT; ++s) a = fma8(w[s], xr[s], a);
    return a;
}

// The norm weights of this thread's columns c = (tid + s*T)*8 + e of a vectorised GEMV (RmsNorm:
// norm_w[c]; HeadNorm: norm_w[c % hd]; None: unused). Apart from the input vector because they are
// weights: a kernel reads them before its grid-dependency wait. A chunk's 8 weights are
// consecutive (head_dim is a multiple of 8): two 16-byte loads where the base is 16-byte aligned,
// through ld_keep since every step reads them again.
template <int CPT>
__device__ __forceinline__ void gemv_prologue_weights(GemvPrologue pro, const float *norm_w, int hd, int64_t cols,
                                                      float (&nw)[CPT][8]) {
    const int T = blockDim.x, tid = threadIdx.x;
    const int nch = int(cols >> 3);
    const bool vec = (reinterpret_cast<uintptr_t>(norm_w) & 15) == 0;
#pragma unroll
    for (int s = 0; s < CPT; ++s) {
        const int ch = tid + s * T;
        if (pro == GemvPrologue::None || ch >= nch) {
#pragma unroll
            for (int e = 0; e < 8; ++e) nw[s][e] = 0.f;
            continue;
        }
        const float *w = norm_w + (pro == GemvPrologue::HeadNorm ? (ch * 8) % hd : ch * 8);
        if (vec) {
            const float4 a = ld_keep4(reinterpret_cast<const float4 *>(w));
            const float4 b = ld_keep4(reinterpret_cast<const float4 *>(w) + 1);
            nw[s][0] = a.x, nw[s][1] = a.y, nw[s][2] = a.z, nw[s][3] = a.w;
            nw[s][4] = b.x, nw[s][5] = b.y, nw[s][6] = b.z, nw[s][7] = b.w;
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) nw[s][e] = ld_keep(w + e);
        }
    }
}

// The gate of a HeadNorm column from its gate input z (GemvParams::use_gate: 0 none, 1 silu(z),
// 2 z already through silu). One definition for the one-row, multi-row and fallback kernels.
__device__ __forceinline__ float head_norm_gate(int use_gate, float z) {
    return use_gate == 2 ? z : use_gate ? siluf_(z) : 1.f;
}

// HeadNorm where a head's chunks fill aligned groups of lanes (hd / 8 divides 32): every layout of
// the GEMVs and of the persistent step puts chunk ch on lane ch % 32, so a head's sum of squares is
// the butterfly of its chunks' sums over the head's lanes, formed in registers without a block
// barrier. The other head sizes add the chunk sums in order through shared memory.
__host__ __device__ __forceinline__ bool head_in_lanes(int hd) {
    const int cph = hd / 8;
    return hd % 8 == 0 && cph >= 1 && cph <= 32 && 32 % cph == 0;
}
// Every lane of the warp calls it; `cph` = hd / 8 lanes per head.
__device__ __forceinline__ float head_sum_in_lanes(float chunk_ss, int cph) {
    for (int o = cph / 2; o > 0; o >>= 1) chunk_ss += __shfl_xor_sync(0xffffffffu, chunk_ss, o);
    return chunk_ss;
}

// Shared floats of the HeadNorm prologue: the per-head sums, then the per-chunk sums with one pad
// float after each head's (cols/8 chunks, hd/8 per head), so that the threads summing different
// heads read different banks.
__host__ __device__ __forceinline__ int64_t head_norm_floats(int64_t cols, int hd) {
    const int64_t n_heads = cols / hd;
    return n_heads + n_heads * (hd / 8 + 1);
}

// The row of the weight matrix in slot i of a block of RB rows starting at block row lr (SwiGLU:
// the first RB/2 slots are gate rows, the rest the matching up rows, L rows further), and whether
// the slot holds a row below r_end.
template <int RB, bool PAIRED>
__device__ __forceinline__ int64_t block_row(int i, int64_t lr, int64_t L) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    return PAIRED ? (i < RL ? lr + i : L + lr + (i - RL)) : lr + i;
}
template <int RB, bool PAIRED>
__device__ __forceinline__ bool block_row_ok(int i, int64_t lr, int64_t r_end) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    return lr + (PAIRED ? i % RL : i) < r_end;
}

// This thread's weight chunk s of slot i of a row block from lr (chunk tid + s*T of the slot's row,
// 16-byte units of W, nch per row); `ok` false where the row or the chunk is past the end (the
// pointer is then W itself, never read). One address rule for the one-token and multi-row loads.
template <int RB, bool PAIRED>
__device__ __forceinline__ const uint4 *block_chunk(const uint4 *W, int i, int s, int64_t lr, int64_t r_end, int64_t L,
                                                    int nch, bool &ok) {
    const int ch = int(threadIdx.x) + s * int(blockDim.x);
    ok = block_row_ok<RB, PAIRED>(i, lr, r_end) && ch < nch;
    return ok ? W + block_row<RB, PAIRED>(i, lr, L) * nch + ch : W;
}

// Eight consecutive floats from p: two 16-byte loads where p is 16-byte aligned (`vec`), eight
// scalar ones otherwise; the same values either way.
__device__ __forceinline__ void load8(const float *p, bool vec, float (&v)[8]) {
    if (vec) {
        const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = p[e];
    }
}

// RMSNorm as the GEMVs apply it: the input times the norm weights enters the dot products and
// the row sums are scaled by rms_scale(sum of squares) (device_common.cuh), so that a kernel's dot
// products need not wait for the block's reduction of the sum of squares. The sum of squares is
// block_sum's: per thread over its chunks in order, the butterfly sum per warp, then the butterfly
// sum of the warps' sums. Every GPU implementation applies the scale this way (bitwise the same
// results); the CPU engine's x * inv * w differs in rounding only.
// The scale from the warps' sums in `red32` (nw warps, written before a block barrier). Call from a
// whole warp.
__device__ __forceinline__ float rms_scale_from(const float *red32, int nw, int64_t cols, float eps) {
    const int lane = threadIdx.x & 31;
    return rms_scale(warp_sum(lane < nw ? red32[lane] : 0.f), cols, eps);
}

// Builds this thread's slice of the input vector of a vectorised GEMV: column c = (tid + s*T)*8 + e
// of x, with the prologue applied (T = blockDim.x; nw from gemv_prologue_weights). x and the gate
// input z are loaded together, one round trip. `red32` holds 32 floats: RmsNorm leaves the warps'
// sums of squares there, for rms_scale_from after the next block barrier (the caller's first row
// block), and does not scale xr. `head_ss` (HeadNorm) holds head_norm_floats(cols, hd) floats; that
// prologue contains __syncthreads(): call uniformly across the block.
template <int CPT>
__device__ __forceinline__ void gemv_prologue_x(GemvPrologue pro, const float *x, const float (&nw)[CPT][8],
                                                float eps, const float *z, int hd, int use_gate, int64_t cols,
                                                float (&xr)[CPT][8], float *red32, float *head_ss) {
    const int T = blockDim.x, tid = threadIdx.x;
    const int nch = int(cols >> 3);
    const bool gated = pro == GemvPrologue::HeadNorm && use_gate;
    // 16-byte loads where the vectors allow them: the input vector is on every kernel's critical
    // path (GDN-1.3B step 1.1032 against 1.1205 ms with eight scalar loads per chunk,
    // bench/journal/2026-11-30-gemv-load-instructions.md). A chunk starts 32 bytes after the
    // previous one, so the base decides; z may sit at any float offset of the in_proj output
    // (after 2 H K q/k columns).
    const bool x_vec = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
    const bool z_vec = (reinterpret_cast<uintptr_t>(z) & 15) == 0;
    float zr[CPT][8];
#pragma unroll
    for (int s = 0; s < CPT; ++s) {
        const int ch = tid + s * T;
#pragma unroll
        for (int e = 0; e < 8; ++e) xr[s][e] = zr[s][e] = 0.f;
        if (ch < nch) {
            load8(x + ch * 8, x_vec, xr[s]);
            if (gated) load8(z + ch * 8, z_vec, zr[s]);
        }
    }
    if (pro == GemvPrologue::RmsNorm) {
        // The warps' sums of squares go to red32 and the norm's scale waits for the first row
        // block's barrier (rms_scale_from): the dot products start without a block reduction.
        float ss = 0.f;
#pragma unroll
        for (int s = 0; s < CPT; ++s)
#pragma unroll
            for (int e = 0; e < 8; ++e) ss += xr[s][e] * xr[s][e];
        ss = warp_sum(ss);
        if ((tid & 31) == 0) red32[tid >> 5] = ss;
#pragma unroll
        for (int s = 0; s < CPT; ++s) {
            const int ch = tid + s * T;
            if (ch < nch)
#pragma unroll
                for (int e = 0; e < 8; ++e) xr[s][e] *= nw[s][e];
        }
    } else if (pro == GemvPrologue::HeadNorm) {
        // head_dim is a multiple of 8 here, so a chunk lies inside one head. The head sums: in
        // lanes where the heads fill aligned lanes; otherwise per-chunk partial sums added in a fixed
        // order per head (deterministic, unlike shared-memory atomics).
        const int n_heads = int(cols / hd), cph = hd / 8;
        const bool in_lanes = head_in_lanes(hd);  // the same for the whole block
        float *chunk_ss = head_ss + n_heads;      // head i's chunk q at i * (cph + 1) + q
        float hsum[CPT];
#pragma unroll
        for (int s = 0; s < CPT; ++s) {
            const int ch = tid + s * T;
            float ss = 0.f;  // zero past the vector (xr is)
#pragma unroll
            for (int e = 0; e < 8; ++e) ss += xr[s][e] * xr[s][e];
            if (in_lanes) hsum[s] = head_sum_in_lanes(ss, cph);
            else if (ch < nch) chunk_ss[ch + ch / cph] = ss;
        }
        if (!in_lanes) {
            __syncthreads();
            for (int i = tid; i < n_heads; i += T) {
                float ss = 0.f;
                // In chunk order (the other implementations' order); eight loads ahead of the adds.
                const float *cs = chunk_ss + i * (cph + 1);
                int q = 0;
                for (; q + 8 <= cph; q += 8) {
                    float v[8];
#pragma unroll
                    for (int u = 0; u < 8; ++u) v[u] = cs[q + u];
#pragma unroll
                    for (int u = 0; u < 8; ++u) ss += v[u];
                }
                for (; q < cph; ++q) ss += cs[q];
                head_ss[i] = ss;
            }
            __syncthreads();
        }
#pragma unroll
        for (int s = 0; s < CPT; ++s) {
            const int ch = tid + s * T;
            if (ch < nch) {
                const float inv = rms_scale(in_lanes ? hsum[s] : head_ss[ch * 8 / hd], hd, eps);
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    xr[s][e] = xr[s][e] * inv * nw[s][e] * head_norm_gate(use_gate, zr[s][e]);
                }
            }
        }
    }
}

// The in_proj rows past the conv channels: z (through silu with silu_z: the gate of the head
// norm), the log decay of `a` rows (the head's A_log[i] and dt_bias[i], i = r - row_a), beta of
// `b` rows.
__device__ __forceinline__ float inproj_gate_row(int64_t r, float y, int64_t row_a, int64_t row_b, const float *A_log,
                                                 const float *dt_bias, int64_t i, float beta_scale, int silu_z) {
    if (r < row_a) return silu_z ? siluf_(y) : y;
    if (r < row_b) return gdn_decay_logf_(y, A_log[i], dt_bias[i]);
    return gdn_betaf_(y, beta_scale);
}

// The fused in_proj rows ([q|k|v|g|a|b]) of one token: rows < conv_channels go through the short
// causal conv (the cache [W-1][CC], oldest first, is shifted in place: one thread per channel) and
// SiLU; g rows pass through (through SiLU with silu_z); a rows become the log decay, b rows beta.
// Same formulas and tap order as the CPU engine (CpuPassOps::conv_gates, cpu::gdn_decay_log,
// cpu::gdn_beta).
__device__ __forceinline__ float inproj_row(int64_t r, float y, float *conv_cache, const float *conv_w, int W,
                                            int64_t CC, int use_conv, int64_t row_a, int64_t row_b,
                                            const float *A_log, const float *dt_bias, float beta_scale, int silu_z) {
    if (r < CC) {
        if (!use_conv) return siluf_(y);
        const float *w = conv_w + r * W;
        float *cache = conv_cache + r;
        float acc = 0.f;
        for (int j = 0; j < W - 1; ++j) acc += w[j] * cache[j * CC];
        acc += w[W - 1] * y;
        for (int j = 0; j + 1 < W - 1; ++j) cache[j * CC] = cache[(j + 1) * CC];
        if (W > 1) cache[(W - 2) * CC] = y;
        return siluf_(acc);
    }
    return inproj_gate_row(r, y, row_a, row_b, A_log, dt_bias, r - row_a, beta_scale, silu_z);
}

// One conv row from operands staged on chip: `cs` holds the W taps then the W-1 window values
// (oldest first); inproj_row's formula and tap order. Shifts the window into `cache` (the row's
// column of the [W-1][CC] cache) and appends y. WC > 0: W known at compile time.
template <int WC>
__device__ __forceinline__ float conv_row(const float *cs, float *cache, int64_t CC, int W, float y) {
    const int w = WC > 0 ? WC : W;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < w - 1; ++j) acc += cs[j] * cs[w + j];
    acc += cs[w - 1] * y;
#pragma unroll
    for (int j = 0; j + 1 < w - 1; ++j) cache[j * CC] = cs[w + j + 1];
    if (w > 1) cache[(w - 2) * CC] = y;
    return acc;
}

// inproj_row with the row's operands staged on chip in `rp`: conv rows in conv_row's layout, a rows
// (A_log, dt_bias). Bitwise the same results.
__device__ __forceinline__ float inproj_row_from(int64_t r, float y, const float *rp, float *conv_cache, int W,
                                                 int64_t CC, int use_conv, int64_t row_a, int64_t row_b,
                                                 float beta_scale, int silu_z) {
    if (r < CC) {
        if (!use_conv) return siluf_(y);
        return siluf_(W == 4 ? conv_row<4>(rp, conv_cache + r, CC, 4, y) : conv_row<0>(rp, conv_cache + r, CC, W, y));
    }
    return inproj_gate_row(r, y, row_a, row_b, rp, rp + 1, 0, beta_scale, silu_z);
}

}  // namespace kern
}  // namespace specla
