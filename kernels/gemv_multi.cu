// Multi-row bf16 GEMV (see gemv_multi.cuh).
//
// Layout: the one-token kernel's (gemv.cu): T threads, thread t owns the 16-byte chunks t + s*T
// (s < CPT) of every row. Each thread holds its input slices of NT tokens in registers, so one
// weight load feeds NT tokens. Weights stream through a per-thread ring of P blocks of RB rows in
// shared memory filled by cp.async (each thread copies exactly the chunks it will read, so the
// ring needs no barrier, only cp.async.wait_group): P-1 blocks stay in flight per thread whatever
// the registers the tokens take. The RB*NT partial sums of a
// thread are reduced across the warp by a transposed butterfly: at the stage of lane offset o, a
// lane keeps half of its values and swaps the other half with lane ^ o, adding the partner's copy
// of the values it keeps. Each value meets exactly the additions of the one-value butterfly
// (warp_sum) in the same order, so the sums are bitwise the same, with RB*NT - 1 shuffles instead
// of 5 per value.
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "cp_async.cuh"
#include "device_common.cuh"
#include "gemv_multi.cuh"
#include "gemv_rows.cuh"

namespace specla {
namespace kern {

namespace {

constexpr int kMaxWarps = kGemvMaxThreads / 32;

// Transposed warp reduction of NV values (NV a power of two <= 32): afterwards v[0] holds the full
// warp sum of value k, where k is accumulated here from the lane bits of the transposed stages.
template <int NV, int O>
__device__ __forceinline__ void xreduce(float (&v)[32], int lane, int &k) {
    if constexpr (O >= 1) {
        if constexpr (NV > 1) {
            constexpr int half = NV / 2;
            const bool up = (lane & O) != 0;
#pragma unroll
            for (int j = 0; j < half; ++j) {
                const float send = up ? v[j] : v[j + half];
                const float keep = up ? v[j + half] : v[j];
                v[j] = keep + __shfl_xor_sync(0xffffffffu, send, O);
            }
            if (up) k += half;
            xreduce<half, O / 2>(v, lane, k);
        } else {
            v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
            xreduce<1, O / 2>(v, lane, k);
        }
    }
}

// Ring slot layout: [slot][i][s][T] 16-byte chunks (a warp's chunks are contiguous).
template <int CPT, int RB, bool PAIRED>
__device__ __forceinline__ void multi_issue(uint4 *ring, int slot, const uint4 *W, int64_t lr, int64_t r_end, int64_t L,
                                            int nch) {
    const int T = blockDim.x, tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < RB; ++i)
#pragma unroll
        for (int s = 0; s < CPT; ++s) {
            bool ok;
            const uint4 *src = block_chunk<RB, PAIRED>(W, i, s, lr, r_end, L, nch, ok);
            cp_async16(ring + ((size_t(slot) * RB + i) * CPT + s) * T + tid, src, ok);
        }
}

template <int CPT, int RB>
__device__ __forceinline__ void multi_read(uint4 (&buf)[RB][CPT], const uint4 *ring, int slot) {
    const int T = blockDim.x, tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < RB; ++i)
#pragma unroll
        for (int s = 0; s < CPT; ++s) buf[i][s] = ring[((size_t(slot) * RB + i) * CPT + s) * T + tid];
}

// `prev`: out[r] read ahead of the step (Add), so that its latency hides under the step's work.
__device__ __forceinline__ void multi_epilogue(const GemvMultiParams &mp, int64_t r, int t, float y, float y_up,
                                               float prev, unsigned long long &best) {
    const GemvParams &p = mp.g;
    float *out = p.out + int64_t(t) * mp.out_ld;
    switch (p.epi) {
        case GemvEpilogue::Store: out[r] = y; break;
        case GemvEpilogue::Add: out[r] = prev + y; break;
        case GemvEpilogue::SwiGLU: out[r] = siluf_(y) * y_up; break;
        case GemvEpilogue::Logits:
            out[r] = y;
            best = u64_max(best, argmax_key(y, uint32_t(r)));
            break;
        default: break;
    }
}

template <int CPT, int RB, int NT, bool PAIRED>
__device__ __forceinline__ void multi_step(const GemvMultiParams &mp, const uint4 (&buf)[RB][CPT],
                                           const float (&xr)[NT][CPT][8], const float (&scale)[NT], int64_t lr,
                                           int64_t r_end, int t0, int nt, float (*red)[kMaxWarps],
                                           unsigned long long &best) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    constexpr int NV = RB * NT;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    // The residual this thread's epilogue adds to (read now, used after the barrier).
    float prev = 0.f;
    const bool epi_thread = tid < RL * NT && lr + tid / NT < r_end && tid % NT < nt;
    if (mp.g.epi == GemvEpilogue::Add && epi_thread)
        prev = mp.g.out[int64_t(t0 + tid % NT) * mp.out_ld + lr + tid / NT];
    float acc[32];
#pragma unroll
    for (int i = 0; i < RB; ++i)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[i * NT + t] = chunk_dot<CPT>(buf[i], xr[t]);
    int k = 0;
    xreduce<NV, 16>(acc, lane, k);
    if ((lane & (32 / NV - 1)) == 0) red[k][warp] = acc[0];
    __syncthreads();
    if (epi_thread) {
        const int i = tid / NT, t = tid % NT;
        float y = 0.f, y_up = 0.f;
        for (int w = 0; w < nw; ++w) {
            y += red[i * NT + t][w];
            if (PAIRED) y_up += red[(i + RL) * NT + t][w];
        }
        // scale[t] with a run-time t would put the array in local memory: select it.
        float sc = scale[0];
#pragma unroll
        for (int u = 1; u < NT; ++u) sc = t == u ? scale[u] : sc;
        multi_epilogue(mp, lr + i, t0 + t, y * sc, y_up * sc, prev, best);
    }
}

// The input slices of NT tokens with the prologue applied: per token exactly gemv_prologue_x's
// arithmetic (gemv_rows.cuh), but all tokens' loads are issued first and the block reductions of
// all tokens share their barriers. nw: the norm weights of this thread's columns
// (gemv_prologue_weights, read once for all tokens). x is loaded 16 bytes at a time where a
// token's row is aligned, and the gate input z is prefetched into L1 beside it, read after the head
// sums (registers for NT tokens' gates would spill), so that a latency-bound launch (few row blocks
// per CTA) pays about one round trip for its inputs. RmsNorm: scale[t] is token t's rms_scale for
// its row sums (1 otherwise). red32: [NT][32]; head_ss (HeadNorm): NT * (heads + chunks).
template <int CPT, int NT>
__device__ __forceinline__ void multi_prologue(const GemvParams &p, const GemvMultiParams &mp, int t0, int nt,
                                               const float (&nw)[CPT][8], float (&xr)[NT][CPT][8],
                                               float (&scale)[NT], float (*red32)[32], float *head_ss) {
    const int T = blockDim.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = T >> 5;
    const int nch = int(p.cols >> 3);
    const bool gated = p.pro == GemvPrologue::HeadNorm && p.use_gate;
#pragma unroll
    for (int t = 0; t < NT; ++t) scale[t] = 1.f;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float *x = p.x + int64_t(t0 + t) * mp.x_ld;
        const bool x_vec = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
#pragma unroll
        for (int s = 0; s < CPT; ++s) {
            const int ch = tid + s * T;
#pragma unroll
            for (int e = 0; e < 8; ++e) xr[t][s][e] = 0.f;
            if (t < nt && ch < nch) {
                load8(x + ch * 8, x_vec, xr[t][s]);
                if (gated) prefetch_l1(p.z + int64_t(t0 + t) * mp.z_ld + ch * 8);
            }
        }
    }
    if (p.pro == GemvPrologue::RmsNorm) {
        float ss[NT];
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            float a = 0.f;
#pragma unroll
            for (int s = 0; s < CPT; ++s)
#pragma unroll
                for (int e = 0; e < 8; ++e) a += xr[t][s][e] * xr[t][s][e];
            ss[t] = warp_sum(a);  // block_sum, one token after the other in the same barriers
        }
        __syncthreads();
        if (lane == 0)
#pragma unroll
            for (int t = 0; t < NT; ++t) red32[t][warp] = ss[t];
        __syncthreads();
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float r = lane < nwarps ? red32[t][lane] : 0.f;
            ss[t] = warp_sum(r);
        }
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            scale[t] = rms_scale(ss[t], p.cols, p.eps);
#pragma unroll
            for (int s = 0; s < CPT; ++s) {
                const int ch = tid + s * T;
                if (ch < nch)
#pragma unroll
                    for (int e = 0; e < 8; ++e) xr[t][s][e] *= nw[s][e];
            }
        }
    } else if (p.pro == GemvPrologue::HeadNorm) {
        const int hd = p.head_dim, n_heads = int(p.cols / hd), cph = hd / 8;
        const bool in_lanes = head_in_lanes(hd);  // the same for the whole block
        float *hs = head_ss, *chunk_ss = head_ss + NT * n_heads;  // [NT][heads], [NT][nch]
        float hsum[NT][CPT];
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int s = 0; s < CPT; ++s) {
                const int ch = tid + s * T;
                float a = 0.f;  // zero past the vector (xr is)
#pragma unroll
                for (int e = 0; e < 8; ++e) a += xr[t][s][e] * xr[t][s][e];
                if (in_lanes) hsum[t][s] = head_sum_in_lanes(a, cph);
                else if (ch < nch) chunk_ss[t * nch + ch] = a;
            }
        if (!in_lanes) {
            __syncthreads();
            for (int i = tid; i < NT * n_heads; i += T) {
                const int t = i / n_heads, hh = i % n_heads;
                float a = 0.f;
                for (int q = 0; q < cph; ++q) a += chunk_ss[t * nch + hh * cph + q];
                hs[i] = a;
            }
            __syncthreads();
        }
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float *z = gated ? p.z + int64_t(t0 + t) * mp.z_ld : nullptr;
            const bool z_vec = (reinterpret_cast<uintptr_t>(z) & 15) == 0;
#pragma unroll
            for (int s = 0; s < CPT; ++s) {
                const int ch = tid + s * T;
                if (ch < nch && t < nt) {
                    const int c0 = ch * 8;
                    const float inv = rms_scale(in_lanes ? hsum[t][s] : hs[t * n_heads + c0 / hd], hd, p.eps);
                    float zr[8];
                    if (gated) load8(z + c0, z_vec, zr);
#pragma unroll
                    for (int e = 0; e < 8; ++e) {
                        const float gate = gated ? head_norm_gate(p.use_gate, zr[e]) : 1.f;
                        xr[t][s][e] = xr[t][s][e] * inv * nw[s][e] * gate;
                    }
                }
            }
        }
    }
}

template <int CPT, int RB, int NT, bool PAIRED, int P>
__global__ void __launch_bounds__(kGemvMaxThreads) gemv_multi_kernel(const GemvMultiParams mp, int32_t tile) {
    static_assert(RB * NT <= 32 && ((RB * NT) & (RB * NT - 1)) == 0, "RB*NT must be a power of two <= 32");
    static_assert(P >= 2, "the ring needs two slots");
    constexpr int RL = PAIRED ? RB / 2 : RB;
    __shared__ float red[2][RB * NT][kMaxWarps];
    __shared__ float red32[NT][32];
    extern __shared__ uint4 dyn[];
    uint4 *ring = dyn;                                                          // [P][RB][CPT][T]
    float *head_ss = reinterpret_cast<float *>(dyn + size_t(P) * RB * CPT * blockDim.x);  // HeadNorm, NT sets
    const GemvParams &p = mp.g;
    const int nch = int(p.cols >> 3);
    const int64_t L = PAIRED ? p.rows / 2 : p.rows;
    const int64_t r_begin = L * blockIdx.x / gridDim.x, r_end = L * (blockIdx.x + 1) / gridDim.x;
    const int64_t nb = (r_end - r_begin + RL - 1) / RL;
    const int t0 = int(blockIdx.y) * tile;
    const int nt = min(tile, mp.n - t0);
    const uint4 *W = reinterpret_cast<const uint4 *>(p.w);

    // Weights: safe before the wait. One commit group per block, empty ones included, so that
    // "all but the newest P-2 groups complete" always means "block b has landed".
#pragma unroll
    for (int b = 0; b < P - 1; ++b) {
        if (b < nb) multi_issue<CPT, RB, PAIRED>(ring, b, W, r_begin + int64_t(b) * RL, r_end, L, nch);
        cp_async_commit();
    }
    float nw[CPT][8];
    gemv_prologue_weights<CPT>(p.pro, p.norm_w, p.head_dim, p.cols, nw);
    pdl_wait();
    pdl_trigger();
    float xr[NT][CPT][8], scale[NT];
    multi_prologue<CPT, NT>(p, mp, t0, nt, nw, xr, scale, red32, head_ss);

    unsigned long long best = 0;
    for (int64_t b = 0; b < nb; ++b) {
        cp_async_wait<P - 2>();
        uint4 buf[RB][CPT];
        multi_read<CPT, RB>(buf, ring, int(b % P));
        // The slot refilled now was read (into registers, already consumed) in the previous step.
        if (b + P - 1 < nb)
            multi_issue<CPT, RB, PAIRED>(ring, int((b + P - 1) % P), W, r_begin + (b + P - 1) * RL, r_end, L, nch);
        cp_async_commit();
        multi_step<CPT, RB, NT, PAIRED>(mp, buf, xr, scale, r_begin + b * RL, r_end, t0, nt, red[b & 1], best);
    }
    cp_async_wait<0>();
    if (p.epi == GemvEpilogue::Logits && best) atomicMax(p.argmax + t0 + (threadIdx.x % NT), best);
}

using MultiFn = void (*)(GemvMultiParams, int32_t);

// Ring depth: about 12 chunks (192 bytes) in flight per thread.
constexpr int ring_depth(int rb, int cpt) { return (12 + rb * cpt - 1) / (rb * cpt) + 1; }

struct MultiKernel {
    MultiFn fn;
    int rb, depth;
};

template <int CPT, int RB, int NT>
MultiKernel pick_multi(bool paired) {
    constexpr int P = ring_depth(RB, CPT);
    return {paired ? gemv_multi_kernel<CPT, RB, NT, true, P> : gemv_multi_kernel<CPT, RB, NT, false, P>, RB, P};
}

// Dynamic shared memory above 48 KB needs the kernel's limit raised (once per kernel, on the first
// launch, which runs eagerly: never inside a graph capture).
cudaError_t allow_smem(MultiFn fn, size_t smem) {
    static std::mutex mu;
    static std::map<void *, size_t> raised;
    std::lock_guard<std::mutex> lock(mu);
    size_t &r = raised[reinterpret_cast<void *>(fn)];
    // Static shared memory (a few KB) counts against the same 48 KB default.
    if (smem <= std::max<size_t>(r, 32 * 1024)) return cudaSuccess;
    const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e == cudaSuccess) r = smem;
    return e;
}

int multi_ctas_per_sm(MultiFn fn, int threads, size_t smem) {
    static std::mutex mu;
    static std::map<std::tuple<void *, int, size_t>, int> cache;
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_tuple(reinterpret_cast<void *>(fn), threads, smem);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    int n = 1;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, threads, smem) != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        n = 1;
    }
    cache.emplace(key, n);
    return n;
}

}  // namespace

cudaError_t launch_gemv_multi(const GemvMultiParams &mp, const LaunchCtx &ctx) {
    const GemvParams &p = mp.g;
    if (p.epi == GemvEpilogue::InProj) return cudaErrorInvalidValue;
    if (mp.n <= 0) return cudaSuccess;
    const bool paired = p.epi == GemvEpilogue::SwiGLU;
    const int64_t L = paired ? p.rows / 2 : p.rows;
    if (L <= 0) return cudaSuccess;
    if (!gemv_vectorised(p)) {
        // One one-token launch per row: the same kernel, hence the same arithmetic.
        LaunchCtx c = ctx;
        for (int32_t t = 0; t < mp.n; ++t) {
            GemvParams q = p;
            q.x = p.x + int64_t(t) * mp.x_ld;
            q.z = p.z ? p.z + int64_t(t) * mp.z_ld : nullptr;
            q.out = p.out + int64_t(t) * mp.out_ld;
            q.argmax = p.argmax ? p.argmax + t : nullptr;
            const cudaError_t e = launch_gemv(q, c);
            if (e != cudaSuccess) return e;
        }
        return cudaSuccess;
    }
    const int cpt = gemv_cpt(p.cols);
    const int threads = gemv_threads(p.cols);
    const int64_t nch = p.cols / 8;
    const size_t head_per_token = p.pro == GemvPrologue::HeadNorm ? size_t(p.cols / p.head_dim + nch) * 4 : 0;
    // Tokens per thread (NT) and rows per block (RB, even: the paired SwiGLU layout splits a block
    // into gate and up rows) within ~128 registers: the largest NT up to the token count, and more
    // rows per block when fewer tokens are held.
    const int nt_max = cpt == 1 ? 8 : cpt == 2 ? 4 : 1;
    int nt = 1;
    while (nt < mp.n && nt < nt_max) nt *= 2;
    MultiKernel k;
    if (cpt == 1) {
        if (nt == 8) k = pick_multi<1, 2, 8>(paired);
        else if (nt == 4) k = pick_multi<1, 4, 4>(paired);
        else if (nt == 2) k = pick_multi<1, 8, 2>(paired);
        else k = pick_multi<1, 8, 1>(paired);
    } else if (cpt == 2) {
        if (nt == 4) k = pick_multi<2, 2, 4>(paired);
        else if (nt == 2) k = pick_multi<2, 4, 2>(paired);
        else k = pick_multi<2, 4, 1>(paired);
    } else {
        k = pick_multi<4, 2, 1>(paired);
    }
    const MultiFn fn = k.fn;
    const int rl = paired ? k.rb / 2 : k.rb;
    const int tiles = (mp.n + nt - 1) / nt;
    const int tile = (mp.n + tiles - 1) / tiles;
    const size_t smem = size_t(k.depth) * size_t(k.rb) * size_t(cpt) * 16 * size_t(threads) + size_t(nt) * head_per_token;
    const cudaError_t ea = allow_smem(fn, smem);
    if (ea != cudaSuccess) return ea;
    const int per_sm = p.ctas_per_sm > 0 ? p.ctas_per_sm : multi_ctas_per_sm(fn, threads, smem);
    const int64_t wave = int64_t(per_sm) * ctx.sm_count;
    const int gx = int(std::max<int64_t>(1, std::min<int64_t>(ceil_div(L, rl), wave / tiles)));
    return launch_kernel(fn, dim3(gx, tiles), dim3(threads), smem, ctx, mp, int32_t(tile));
}

}  // namespace kern
}  // namespace specla
