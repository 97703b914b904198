// The fused one-token decoding step (see decode_step.cuh).
//
// GEMV phases use the layout of gemv.cu's register-pipelined kernel with a fixed CTA of 256
// threads: thread t owns the 16-byte chunks t + s*256 (s < CPT) of every row, so its slice of the
// input vector is in registers; rows are split evenly over the grid; blocks of RB rows are double
// buffered in registers (wa, wb), and the next block of a buffer is requested as soon as its data
// has been multiplied. Before each barrier a CTA requests the first two blocks of its rows of the
// next GEMV phase into wa/wb.
#include <algorithm>

#include "decode_step.cuh"
#include "device_common.cuh"
#include "gdn_tile.cuh"
#include "gemv_rows.cuh"

namespace specla {
namespace kern {

namespace {

constexpr int kT = 256;             // threads per CTA
constexpr int kWarps = kT / 32;
constexpr int kBuf = 8;             // 16-byte registers per row-block buffer (RB * CPT <= kBuf)
constexpr int kMaxChunks = 4 * kT;  // chunk_ss capacity (CPT <= 4)
constexpr int kMaxHeads = 256;

__device__ __forceinline__ float ldcg(const float *p) { return __ldcg(p); }

// ---- grid-wide barrier -------------------------------------------------------------------------------
// Arrival counter + generation word. The last CTA to arrive resets the counter and publishes the
// next generation; the others spin on it. The counter is back at 0 after every barrier, so the
// words stay valid from one step (kernel launch) to the next. A spin of more than a few seconds
// traps instead of hanging (a bug or a grid that is not co-resident).
struct GridBarrier {
    unsigned int *count, *gen;
    unsigned int local;  // generation seen by thread 0

    __device__ void init(unsigned int *words) {
        count = words;
        gen = words + 1;
        if (threadIdx.x == 0) local = ld_acquire(gen);
    }
    __device__ static unsigned int ld_acquire(const unsigned int *p) {
        unsigned int v;
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
        return v;
    }
    __device__ void sync() {
        __syncthreads();
        if (threadIdx.x == 0) {
            const unsigned int target = local + 1;
            __threadfence();
            if (atomicAdd(count, 1u) == gridDim.x - 1) {
                atomicExch(count, 0u);
                __threadfence();
                atomicExch(gen, target);
            } else {
                const long long t0 = clock64();
                while (ld_acquire(gen) != target)
                    if (clock64() - t0 > (1ll << 34)) __trap();
            }
            __threadfence();
            local = target;
        }
        __syncthreads();
    }
};

// ---- GEMV phases ----------------------------------------------------------------------------------------
__device__ __forceinline__ void split_rows(int64_t L, int64_t &b, int64_t &e) {
    b = L * blockIdx.x / gridDim.x;
    e = L * (blockIdx.x + 1) / gridDim.x;
}

// Loads logical block [lr, lr + RL) of W (rows x cols, bf16) into buf[i * CPT + s].
template <int CPT, int RB, bool PAIRED>
__device__ __forceinline__ void load_block(uint4 (&buf)[kBuf], const uint16_t *w, int64_t cols, int64_t L, int64_t lr,
                                           int64_t r_end) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    const uint4 *W = reinterpret_cast<const uint4 *>(w);
    const int nch = int(cols >> 3), tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < RB; ++i) {
        const int li = PAIRED ? (i % RL) : i;
        const bool row_ok = lr + li < r_end;
        const int64_t pr = PAIRED ? (i < RL ? lr + i : L + lr + (i - RL)) : lr + i;
#pragma unroll
        for (int s = 0; s < CPT; ++s) {
            const int ch = tid + s * kT;
            buf[i * CPT + s] = (row_ok && ch < nch) ? ld_stream(W + pr * nch + ch) : make_uint4(0, 0, 0, 0);
        }
    }
}

// Requests the first two blocks of this CTA's rows of the next GEMV phase.
template <int CPT, int RB, bool PAIRED>
__device__ __forceinline__ void preload(uint4 (&wa)[kBuf], uint4 (&wb)[kBuf], const uint16_t *w, int64_t rows,
                                        int64_t cols) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    const int64_t L = PAIRED ? rows / 2 : rows;
    int64_t b, e;
    split_rows(L, b, e);
    if (b < e) load_block<CPT, RB, PAIRED>(wa, w, cols, L, b, e);
    if (b + RL < e) load_block<CPT, RB, PAIRED>(wb, w, cols, L, b + RL, e);
}

// One block: multiply, request the block two ahead into the same buffer, reduce over the CTA, and
// hand each of the RL logical rows to `epi(row, y, y_up)` (thread row < RL).
template <int CPT, int RB, bool PAIRED, typename Epi>
__device__ __forceinline__ void gemv_block(uint4 (&buf)[kBuf], const uint16_t *w, int64_t cols, int64_t L, int64_t lr,
                                           int64_t r_end, const float (&xr)[CPT][8], float (*red)[kWarps], Epi &epi) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float acc[RB];
#pragma unroll
    for (int i = 0; i < RB; ++i) {
        float a = 0.f;
#pragma unroll
        for (int s = 0; s < CPT; ++s) a = fma8(buf[i * CPT + s], xr[s], a);
        acc[i] = a;
    }
    if (lr + 2 * RL < r_end) load_block<CPT, RB, PAIRED>(buf, w, cols, L, lr + 2 * RL, r_end);
#pragma unroll
    for (int i = 0; i < RB; ++i) acc[i] = warp_sum(acc[i]);
    if (lane == 0)
#pragma unroll
        for (int i = 0; i < RB; ++i) red[i][warp] = acc[i];
    __syncthreads();
    if (tid < RL && lr + tid < r_end) {
        float y = 0.f, y_up = 0.f;
#pragma unroll
        for (int q = 0; q < kWarps; ++q) {
            y += red[tid][q];
            if (PAIRED) y_up += red[tid + RL][q];
        }
        epi(lr + tid, y, y_up);
    }
}

// All blocks of this CTA's rows; blocks 0 and 1 must have been requested by preload().
template <int CPT, int RB, bool PAIRED, typename Epi>
__device__ __forceinline__ void gemv_phase(uint4 (&wa)[kBuf], uint4 (&wb)[kBuf], const uint16_t *w, int64_t rows,
                                           int64_t cols, const float (&xr)[CPT][8], float (*red)[8][kWarps], Epi epi) {
    constexpr int RL = PAIRED ? RB / 2 : RB;
    const int64_t L = PAIRED ? rows / 2 : rows;
    int64_t b, e;
    split_rows(L, b, e);
    for (int64_t lr = b; lr < e;) {
        gemv_block<CPT, RB, PAIRED>(wa, w, cols, L, lr, e, xr, red[0], epi);
        lr += RL;
        if (lr >= e) break;
        gemv_block<CPT, RB, PAIRED>(wb, w, cols, L, lr, e, xr, red[1], epi);
        lr += RL;
    }
}

// ---- prologues (input vectors of the GEMV phases) --------------------------------------------------------
template <int CPT>
__device__ __forceinline__ void load_x(float (&xr)[CPT][8], const float *x, int64_t cols) {
    const int nch = int(cols >> 3);
#pragma unroll
    for (int s = 0; s < CPT; ++s) {
        const int ch = threadIdx.x + s * kT;
#pragma unroll
        for (int e = 0; e < 8; ++e) xr[s][e] = ch < nch ? ldcg(x + ch * 8 + e) : 0.f;
    }
}

template <int CPT>
__device__ __forceinline__ void prologue_rms(float (&xr)[CPT][8], const float *x, const float *w, int64_t cols, float eps,
                                             float *red32) {
    load_x<CPT>(xr, x, cols);
    float ss = 0.f;
#pragma unroll
    for (int s = 0; s < CPT; ++s)
#pragma unroll
        for (int e = 0; e < 8; ++e) ss += xr[s][e] * xr[s][e];
    ss = block_sum(ss, red32);
    const float inv = 1.f / sqrtf(ss / float(cols) + eps);
    const int nch = int(cols >> 3);
#pragma unroll
    for (int s = 0; s < CPT; ++s) {
        const int ch = threadIdx.x + s * kT;
        if (ch < nch)
#pragma unroll
            for (int e = 0; e < 8; ++e) xr[s][e] *= inv * w[ch * 8 + e];
    }
}

// Gated RMSNorm per head of hd values (hd a multiple of 8), deterministic per-head sums.
template <int CPT>
__device__ __forceinline__ void prologue_head(float (&xr)[CPT][8], const float *o, const float *z, const float *onorm,
                                              int64_t cols, int hd, int use_gate, float eps, float *chunk_ss,
                                              float *head_ss) {
    load_x<CPT>(xr, o, cols);
    const int nch = int(cols >> 3), n_heads = int(cols / hd), cph = hd / 8, tid = threadIdx.x;
#pragma unroll
    for (int s = 0; s < CPT; ++s) {
        const int ch = tid + s * kT;
        if (ch < nch) {
            float ss = 0.f;
#pragma unroll
            for (int e = 0; e < 8; ++e) ss += xr[s][e] * xr[s][e];
            chunk_ss[ch] = ss;
        }
    }
    __syncthreads();
    for (int i = tid; i < n_heads; i += kT) {
        float ss = 0.f;
        for (int q = 0; q < cph; ++q) ss += chunk_ss[i * cph + q];
        head_ss[i] = ss;
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < CPT; ++s) {
        const int ch = tid + s * kT;
        if (ch < nch) {
            const int c0 = ch * 8;
            const float inv = 1.f / sqrtf(head_ss[c0 / hd] / float(hd) + eps);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int c = c0 + e;
                const float gate = use_gate ? siluf_(ldcg(z + c)) : 1.f;
                xr[s][e] = xr[s][e] * inv * onorm[c % hd] * gate;
            }
        }
    }
}

// ---- the recurrent phase ----------------------------------------------------------------------------------
// Tiles of TPC-lane groups x (256 / TPC) value columns of one value head, dealt round-robin to the
// CTAs; the first tile's state may have been prefetched (S0) before the barrier.
template <int KPT, int TPC>
__device__ __forceinline__ void state_tile_load(float (&S)[KPT], const DecodeStepParams &p, const float *state, int tile) {
    constexpr int CPB = kT / TPC;
    const int tpt = (p.V + CPB - 1) / CPB;
    const int hv = tile / tpt, j = (tile % tpt) * CPB + threadIdx.x / TPC, l = threadIdx.x % TPC;
    const bool ok = j < p.V;
    const float *row = state + (int64_t(hv) * p.V + (ok ? j : 0)) * p.K;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        const int i = e * TPC + l;
        S[e] = (ok && i < p.K) ? ldcg(row + i) : 0.f;
    }
}

template <int KPT, int TPC>
__device__ __forceinline__ void recurrent_phase(const DecodeStepParams &p, float *state, float (&S0)[KPT]) {
    constexpr int CPB = kT / TPC;
    const int tpt = (p.V + CPB - 1) / CPB, ntiles = p.HV * tpt;
    const int KD = p.H * p.K, l = threadIdx.x % TPC;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        float S[KPT];
        if (tile == int(blockIdx.x)) {
#pragma unroll
            for (int e = 0; e < KPT; ++e) S[e] = S0[e];
        } else {
            state_tile_load<KPT, TPC>(S, p, state, tile);
        }
        const int hv = tile / tpt, j = (tile % tpt) * CPB + threadIdx.x / TPC, h = hv / (p.HV / p.H);
        const bool ok = j < p.V;
        float qr[KPT], kr[KPT];
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int i = e * TPC + l;
            qr[e] = i < p.K ? ldcg(p.proj + h * p.K + i) : 0.f;
            kr[e] = i < p.K ? ldcg(p.proj + KD + h * p.K + i) : 0.f;
        }
        const float vj = ok ? ldcg(p.proj + 2 * KD + hv * p.V + j) : 0.f;
        const float gl = ldcg(p.proj + p.row_a + hv), beta = ldcg(p.proj + p.row_b + hv);
        float u;
        const float ov = gdn_tile_token<KPT, TPC>(S, qr, kr, vj, gl, beta, true, p.q_scale, &u);
        if (l == 0 && ok) p.o[hv * p.V + j] = ov;
        float *row = state + (int64_t(hv) * p.V + (ok ? j : 0)) * p.K;
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int i = e * TPC + l;
            if (ok && i < p.K) row[i] = S[e];
        }
    }
}

// ---- the kernel ---------------------------------------------------------------------------------------------
template <int CD, int CV, int CI, int KPT, int TPC>
__global__ void __launch_bounds__(kT, 2) decode_step_kernel(const DecodeStepParams p) {
    constexpr int RBD = kBuf / CD, RBV = kBuf / CV, RBI = kBuf / CI;
    static_assert(RBD >= 2 && RBD % 2 == 0, "the paired gate_up phase needs an even block");
    __shared__ float red[2][8][kWarps];
    __shared__ float red32[32];
    __shared__ float chunk_ss[kMaxChunks];
    __shared__ float head_ss[kMaxHeads];
    __shared__ unsigned long long red64[kWarps];
    const int tid = threadIdx.x;
    const int64_t D = p.D, VD = int64_t(p.HV) * p.V, I = p.I;
    GridBarrier bar;
    bar.init(p.barrier);
    uint4 wa[kBuf], wb[kBuf];

    // Embedding gather and argmax reset; the first in_proj rows are already on their way.
    preload<CD, RBD, false>(wa, wb, p.layers[0].in_proj, p.R, D);
    {
        const int64_t tok = *p.token;
        for (int64_t c = int64_t(blockIdx.x) * kT + tid; c < D; c += int64_t(gridDim.x) * kT)
            p.h[c] = bf16_to_float(p.emb[tok * D + c]);
        if (blockIdx.x == 0 && tid == 0) *p.argmax = 0ull;
    }
    bar.sync();

    for (int layer = 0; layer < p.n_layers; ++layer) {
        const DecodeLayer &Ly = p.layers[layer];
        {  // in_proj
            float xr[CD][8];
            prologue_rms<CD>(xr, p.h, Ly.attn_norm, D, p.eps, red32);
            auto epi = [&](int64_t r, float y, float) {
                p.proj[r] = inproj_row(r, y, Ly.conv_cache, Ly.conv_w, p.conv_size, p.CC, p.use_conv, p.row_a, p.row_b,
                                       Ly.A_log, Ly.dt_bias, p.beta_scale);
            };
            gemv_phase<CD, RBD, false>(wa, wb, Ly.in_proj, p.R, D, xr, red, epi);
        }
        preload<CV, RBV, false>(wa, wb, Ly.o_proj, D, VD);
        float S0[KPT];
        if (int(blockIdx.x) < p.HV * ((p.V + kT / TPC - 1) / (kT / TPC))) state_tile_load<KPT, TPC>(S0, p, Ly.state, blockIdx.x);
        bar.sync();

        recurrent_phase<KPT, TPC>(p, Ly.state, S0);
        bar.sync();

        {  // o_proj + residual
            float xr[CV][8];
            prologue_head<CV>(xr, p.o, p.proj + p.row_g, Ly.o_norm, VD, p.V, p.use_gate, p.eps, chunk_ss, head_ss);
            auto epi = [&](int64_t r, float y, float) { p.h[r] = ldcg(p.h + r) + y; };
            gemv_phase<CV, RBV, false>(wa, wb, Ly.o_proj, D, VD, xr, red, epi);
        }
        preload<CD, RBD, true>(wa, wb, Ly.gate_up, 2 * I, D);
        bar.sync();

        {  // gate_up + SwiGLU
            float xr[CD][8];
            prologue_rms<CD>(xr, p.h, Ly.mlp_norm, D, p.eps, red32);
            auto epi = [&](int64_t r, float g, float u) { p.act[r] = siluf_(g) * u; };
            gemv_phase<CD, RBD, true>(wa, wb, Ly.gate_up, 2 * I, D, xr, red, epi);
        }
        preload<CI, RBI, false>(wa, wb, Ly.down, D, I);
        bar.sync();

        {  // down + residual
            float xr[CI][8];
            load_x<CI>(xr, p.act, I);
            auto epi = [&](int64_t r, float y, float) { p.h[r] = ldcg(p.h + r) + y; };
            gemv_phase<CI, RBI, false>(wa, wb, Ly.down, D, I, xr, red, epi);
        }
        if (layer + 1 < p.n_layers) preload<CD, RBD, false>(wa, wb, p.layers[layer + 1].in_proj, p.R, D);
        else preload<CD, RBD, false>(wa, wb, p.lm_head, p.vocab, D);
        bar.sync();
    }

    {  // lm_head: logits and the argmax
        float xr[CD][8];
        prologue_rms<CD>(xr, p.h, p.final_norm, D, p.eps, red32);
        unsigned long long best = 0;
        auto epi = [&](int64_t r, float y, float) {
            p.logits[r] = y;
            best = u64_max(best, argmax_key(y, uint32_t(r)));
        };
        gemv_phase<CD, RBD, false>(wa, wb, p.lm_head, p.vocab, D, xr, red, epi);
        best = warp_max_u64(best);
        if ((tid & 31) == 0) red64[tid >> 5] = best;
        __syncthreads();
        if (tid == 0) {
            unsigned long long b = 0;
            for (int i = 0; i < kWarps; ++i) b = u64_max(b, red64[i]);
            atomicMax(p.argmax, b);
        }
    }
}

using StepFn = void (*)(DecodeStepParams);

int cpt_of(int64_t cols) { return int((cols / 8 + kT - 1) / kT); }

template <int KPT, int TPC>
StepFn pick_cols(int cd, int cv, int ci) {
    if (cd == 1 && cv == 1 && ci == 1) return decode_step_kernel<1, 1, 1, KPT, TPC>;
    if (cd == 1 && cv == 1 && ci == 2) return decode_step_kernel<1, 1, 2, KPT, TPC>;
    if (cd == 1 && cv == 1 && ci == 3) return decode_step_kernel<1, 1, 3, KPT, TPC>;
    if (cd == 1 && cv == 1 && ci == 4) return decode_step_kernel<1, 1, 4, KPT, TPC>;
    return nullptr;
}

StepFn pick(int64_t D, int64_t VD, int64_t I, int K) {
    const int cd = cpt_of(D), cv = cpt_of(VD), ci = cpt_of(I);
    if (K <= 16) return pick_cols<8, 2>(cd, cv, ci);
    if (K <= 32) return pick_cols<8, 4>(cd, cv, ci);
    if (K <= 64) return pick_cols<8, 8>(cd, cv, ci);
    if (K <= 128) return pick_cols<8, 16>(cd, cv, ci);
    if (K <= 256) return pick_cols<8, 32>(cd, cv, ci);
    return nullptr;
}

}  // namespace

bool decode_step_supported(int32_t D, int32_t VD, int32_t I, int32_t K, int32_t V) {
    if (D % 8 || VD % 8 || I % 8 || V % 8) return false;
    if (VD / V > kMaxHeads) return false;
    return pick(D, VD, I, K) != nullptr;
}

cudaError_t launch_decode_step(const DecodeStepParams &p, const LaunchCtx &ctx) {
    StepFn fn = pick(p.D, int64_t(p.HV) * p.V, p.I, p.K);
    if (!fn) return cudaErrorInvalidValue;
    int per_sm = 0;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kT, 0);
    if (e != cudaSuccess) return e;
    per_sm = std::min(per_sm, 2);
    if (per_sm < 1) return cudaErrorLaunchOutOfResources;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(per_sm * ctx.sm_count));
    cfg.blockDim = dim3(kT);
    cfg.stream = ctx.stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;  // all CTAs co-resident: the grid barrier needs it
    attr[0].val.cooperative = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, fn, p);
}

}  // namespace kern
}  // namespace specla
