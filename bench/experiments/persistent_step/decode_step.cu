// The persistent one-token decoding step (see decode_step.cuh).
//
// CTA layout: 7 consumer warps and one producer warp. Shared memory holds the ring of weight
// stages, the input vector of the current GEMV phase (and the norm weights beside it), the gated
// norm's per-head sums, this CTA's rows of the residual stream and its conv taps and windows.
// Stage sequence numbers run over the whole step: the producer and every consumer warp walk the
// same list of stages (phase by phase, this CTA's rows of each weight matrix, as many whole rows
// per stage as fit, at most one per consumer warp), so stage q lives in slot q % stages and is the
// (q / stages)-th use of that slot (the mbarrier parity).
//
// Row i of this CTA's range belongs to consumer warp i % 7, which computes it alone: for each
// virtual warp of gemv.cu's layout its lanes form the same partial dot products and the same
// butterfly sum, and the row sum adds the virtual warps in order, as gemv.cu does through shared
// memory. Where the layout is one chunk per virtual thread and at most 8 virtual warps (rows of up
// to 2048 columns: in_proj, o_proj, gate_up, lm_head of GDN-1.3B), each lane keeps its slice of
// the input vector in registers and a row costs one 16-byte shared load per virtual warp; other
// shapes read the input vector from shared memory. Every consumer warp passes every stage (waits
// for it to be full, arrives on its "empty" barrier once), so a stage is released exactly when
// all consumer warps are done with it.
//
// The consumers never wait on global memory inside a phase: the residual rows a CTA updates (the
// same D-row share in o_proj and down) stay in shared memory across layers, and the conv taps and
// windows of its in_proj rows are loaded ahead, during the previous phase.
#include <algorithm>
#include <type_traits>

#include "bulk_copy.cuh"
#include "decode_step.cuh"
#include "device_common.cuh"
#include "gdn_tile.cuh"
#include "gemv.cuh"
#include "gemv_rows.cuh"
#include "grid_barrier.cuh"

namespace specla {
namespace kern {

namespace {

// 7 consumer warps + the producer: 8 warps, 2 per SM sub-partition, so that a thread may hold up
// to 255 registers (the register path keeps 64 floats of the input vector per lane).
constexpr int kConsumerWarps = 7;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;  // + the producer warp
constexpr int kStageBytes = 24 * 1024;
constexpr int kMaxStages = 8;
constexpr int kMinStages = 3;
constexpr int kInFlight = 3;  // stages requested by the producer and not yet landed, at most
constexpr int kRegWarps = 8;   // register path: up to this many virtual warps of one chunk per thread
constexpr int kTilesAhead = 3;  // recurrent tiles per CTA read before the phase's barrier

// Barrier of the consumer warps only (the producer never joins).
__device__ __forceinline__ void consumers_sync() { named_barrier_sync<kConsumers>(); }

__device__ __forceinline__ float ldcg(const float *p) { return __ldcg(p); }

// Trace events of a layer: consumer thread 0 stamps 0..13 (layer start, in_proj rows start/end,
// recurrent start/end, o_proj start/rows start/end, gate_up start/rows start/end, down start/end,
// layer end), 14/15 inside the gated-norm prologue (inputs loaded, head sums done) and 20/21 in
// the recurrent phase (first inputs arrived, first tile done); the producer stamps 16..19 when it
// has issued in_proj, o_proj, gate_up, down.
__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned long long *trace_slot(const DecodeStepParams &p, int layer, int ev) {
    return p.trace ? p.trace + (size_t(blockIdx.x) * p.n_layers + layer) * kDecodeTraceEvents + ev : nullptr;
}
__device__ __forceinline__ void trace(const DecodeStepParams &p, int layer, int ev) {
    if (p.trace) *trace_slot(p, layer, ev) = now_ns();
}
__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// ---- grid-wide barrier of the consumers ---------------------------------------------------------------
// One counter, zeroed before every step; barrier n waits until it reaches n * gridDim.x. The release
// add publishes this CTA's writes (ordered before it by the CTA barrier), the acquire load makes the
// others' visible; activations are read through L2 (ld.cg) afterwards. A spin of more than a few
// seconds traps instead of hanging (a bug, or a grid that is not co-resident).
struct GridBarrier {
    unsigned int *count;
    unsigned int target = 0;

    __device__ __forceinline__ void sync() {
        cta_grid_sync<kConsumers>(count, target, 1ll << 34, [](unsigned int) { __trap(); });
    }
};

// ---- shared-memory layout beyond the ring (floats), the same on host and device --------------------
// Floats a vector of `cols` takes in xs: the register layout rounds up to whole virtual warps.
template <bool REG>
__host__ __device__ __forceinline__ int64_t xs_span(int64_t cols) {
    return REG ? (cols + 255) / 256 * 256 : cols;
}

struct TailLayout {
    int64_t xs, chunk_ss, head_ss, hs, conv, total;
    __host__ __device__ TailLayout(int64_t D, int64_t VD, int64_t I, int64_t V, int64_t R, int64_t W, int64_t grid) {
        // xs: the phase's input vector and what its prologue needs beside it: norm weights
        // (RMSNorm, D + D), gate inputs and head norm weights (gated norm, VD + VD + V), or the
        // SwiGLU output (down, I).
        // Sized for the register layout's spans, the larger of the two layouts.
        const int64_t sI = xs_span<true>(I), sD = xs_span<true>(D), sVD = xs_span<true>(VD);
        int64_t x = sI > 2 * sD ? sI : 2 * sD;
        if (2 * sVD + V > x) x = 2 * sVD + V;
        xs = 0;
        chunk_ss = xs + x;
        head_ss = chunk_ss + VD / 8;
        hs = head_ss + VD / V;
        conv = hs + D / grid + 1;
        total = conv + (R / grid + 1) * (2 * W - 1);
    }
};

// ---- the weight stream ---------------------------------------------------------------------------------
struct Ring {
    unsigned char *base;
    uint64_t *full, *empty;
    int stages;
    uint32_t q = 0;  // next stage sequence number
    __device__ unsigned char *slot_ptr(uint32_t s) const { return base + size_t(s) * kStageBytes; }
};

// This CTA's share [b, e) of n rows (the same split for every matrix with n rows).
__device__ __forceinline__ void share_of(int64_t n, int64_t &b, int64_t &e) {
    b = n * blockIdx.x / gridDim.x;
    e = n * (blockIdx.x + 1) / gridDim.x;
}

// One weight matrix as the stream sees it: L logical rows of `cols` bf16 (paired: L gate rows then
// L up rows), this CTA's share [b, e) of the logical rows, and whole rows per stage.
struct Stream {
    const uint16_t *w;
    int64_t L, cols, b, e;
    int rows_per_stage;
    bool paired;
    __device__ Stream(const uint16_t *w_, int64_t L_, int64_t cols_, bool paired_)
        : w(w_), L(L_), cols(cols_), paired(paired_) {
        share_of(L, b, e);
        rows_per_stage = int(min64(kConsumerWarps, kStageBytes / (cols * 2 * (paired ? 2 : 1))));
    }
    __device__ uint32_t row_bytes() const { return uint32_t(cols * 2); }
};

__device__ __forceinline__ void produce(Ring &rg, const Stream &m, uint64_t policy) {
    for (int64_t r0 = m.b; r0 < m.e; r0 += m.rows_per_stage, ++rg.q) {
        const uint32_t slot = rg.q % uint32_t(rg.stages), use = rg.q / uint32_t(rg.stages);
        if (use > 0) mbar_wait(&rg.empty[slot], (use - 1) & 1);
        // At most kInFlight stages requested and not landed: more only queue in the memory system
        // (bytes in flight / bandwidth) ahead of the consumers' activation reads and barrier
        // atomics. Measured: 1, 2 or 3 stages give the same step time (the consumers set it).
        if (rg.q >= uint32_t(kInFlight)) {
            const uint32_t prev = rg.q - uint32_t(kInFlight);
            mbar_wait(&rg.full[prev % uint32_t(rg.stages)], (prev / uint32_t(rg.stages)) & 1);
        }
        const uint32_t n = uint32_t(min64(m.rows_per_stage, m.e - r0)), bytes = n * m.row_bytes();
        mbar_arrive_expect_tx(&rg.full[slot], m.paired ? 2 * bytes : bytes);
        unsigned char *dst = rg.slot_ptr(slot);
        bulk_load(dst, m.w + r0 * m.cols, bytes, &rg.full[slot], policy);
        if (m.paired) bulk_load(dst + bytes, m.w + (m.L + r0) * m.cols, bytes, &rg.full[slot], policy);
    }
}

// The producer warp's whole step (lane 0 only): the phases' weights in consumption order.
__device__ void producer(const DecodeStepParams &p, Ring &rg) {
    const uint64_t policy = l2_evict_first_policy();
    const int64_t D = p.D, VD = int64_t(p.HV) * p.V, I = p.I;
    for (int l = 0; l < p.n_layers; ++l) {
        const DecodeLayer &Ly = p.layers[l];
        produce(rg, Stream(Ly.in_proj, p.R, D, false), policy);
        trace(p, l, 16);
        produce(rg, Stream(Ly.o_proj, D, VD, false), policy);
        trace(p, l, 17);
        produce(rg, Stream(Ly.gate_up, I, D, true), policy);
        trace(p, l, 18);
        produce(rg, Stream(Ly.down, D, I, false), policy);
        trace(p, l, 19);
    }
    produce(rg, Stream(p.lm_head, p.vocab, D, false), policy);
}

// Butterfly sums of N independent values over the warp, level by level across the values: each
// value sees exactly warp_sum's operations (bitwise the same result), but the N shuffles of a level
// are independent, so their latencies overlap instead of adding up.
template <int N>
__device__ __forceinline__ void warp_sum_n(float (&v)[N]) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float t[N];
#pragma unroll
        for (int k = 0; k < N; ++k) t[k] = __shfl_xor_sync(0xffffffffu, v[k], o);
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] += t[k];
    }
}

// ---- the phase's input vector ------------------------------------------------------------------------------
// Layout L of a phase's input vector: kRegLayout keeps it in registers (each lane: chunks
// vw*32 + lane of gemv.cu's layout, vw < kRegWarps), for layouts of one chunk per virtual thread
// and at most kRegWarps virtual warps; otherwise L = chunks per virtual thread (1, 2 or 4) and the
// vector stays in xs. A template parameter, so that the register array and the loop bounds are
// compile-time where they are used.
constexpr int kRegLayout = 0;
template <int L>
struct XVec {
    float r[L == kRegLayout ? kRegWarps : 1][8];
    const float *xs;
};

template <typename Fn>
__device__ __forceinline__ void with_layout(const DecodeGemvShape &g, Fn &&fn) {
    if (g.cpt == 1 && g.threads <= 32 * kRegWarps) fn(std::integral_constant<int, kRegLayout>{});
    else if (g.cpt == 1) fn(std::integral_constant<int, 1>{});
    else if (g.cpt == 2) fn(std::integral_constant<int, 2>{});
    else fn(std::integral_constant<int, 4>{});
}

// gemv.cu's value of one row: for each virtual warp in order, the butterfly sum of its lanes'
// partial dot products (chunk_dot over chunks t + s*threads, zero past the row), added to y from 0.
// Straight-line code (selects, no branches) so that the independent virtual warps interleave.
template <int L>
__device__ __forceinline__ float row_dot(const uint4 *w, const XVec<L> &x, int nch, const DecodeGemvShape &g) {
    const int lane = threadIdx.x & 31, nw = g.threads >> 5;
    float y = 0.f;
    if constexpr (L == kRegLayout) {
        float part[kRegWarps];
#pragma unroll
        for (int vw = 0; vw < kRegWarps; ++vw) {
            const int ch = vw * 32 + lane;
            const uint4 q = (vw < nw && ch < nch) ? w[ch] : make_uint4(0, 0, 0, 0);
            part[vw] = fma8(q, x.r[vw], 0.f);
        }
        warp_sum_n(part);
#pragma unroll
        for (int vw = 0; vw < kRegWarps; ++vw) y = vw < nw ? y + part[vw] : y;
    } else {
        constexpr int G = 4;  // virtual warps in flight
        for (int vw0 = 0; vw0 < nw; vw0 += G) {
            float part[G];
#pragma unroll
            for (int k = 0; k < G; ++k) {
                const int t = (vw0 + k) * 32 + lane;
                const bool vw_ok = vw0 + k < nw;
                float a = 0.f;
#pragma unroll
                for (int s = 0; s < L; ++s) {
                    const int ch = t + s * g.threads;
                    const bool ok = vw_ok && ch < nch;
                    const uint4 q = ok ? w[ch] : make_uint4(0, 0, 0, 0);
                    float xv[8];
                    const float4 x0 = ok ? reinterpret_cast<const float4 *>(x.xs)[2 * ch] : make_float4(0, 0, 0, 0);
                    const float4 x1 =
                        ok ? reinterpret_cast<const float4 *>(x.xs)[2 * ch + 1] : make_float4(0, 0, 0, 0);
                    xv[0] = x0.x, xv[1] = x0.y, xv[2] = x0.z, xv[3] = x0.w;
                    xv[4] = x1.x, xv[5] = x1.y, xv[6] = x1.z, xv[7] = x1.w;
                    a = fma8(q, xv, a);
                }
                part[k] = a;
            }
            warp_sum_n(part);
#pragma unroll
            for (int k = 0; k < G; ++k) y = vw0 + k < nw ? y + part[k] : y;
        }
    }
    return y;
}

// This CTA's rows of one weight matrix: epi(row, y, y_up) on lane 0 of the row's warp, the row sums
// times `scale` (an RMSNorm prologue's rms_scale; 1 otherwise, exact).
template <int L, typename Epi>
__device__ __forceinline__ void consume(Ring &rg, const Stream &m, const XVec<L> &x, const DecodeGemvShape &g,
                                        float scale, Epi &&epi) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nch = int(m.cols >> 3);
    for (int64_t r0 = m.b; r0 < m.e; r0 += m.rows_per_stage, ++rg.q) {
        const uint32_t slot = rg.q % uint32_t(rg.stages), use = rg.q / uint32_t(rg.stages);
        mbar_wait(&rg.full[slot], use & 1);
        const int n = int(min64(m.rows_per_stage, m.e - r0));
        const uint4 *stage = reinterpret_cast<const uint4 *>(rg.slot_ptr(slot));
        const int first = int((r0 - m.b) % kConsumerWarps);
        const int j = (warp - first + kConsumerWarps) % kConsumerWarps;  // rows_per_stage <= warps
        if (j < n) {
            const float y = row_dot(stage + size_t(j) * nch, x, nch, g);
            const float y_up = m.paired ? row_dot(stage + size_t(n + j) * nch, x, nch, g) : 0.f;
            if (lane == 0) epi(r0 + j, y * scale, y_up * scale);
        }
        // The stage's next contents come through the async proxy (bulk copy): order this warp's
        // generic-proxy reads of it before the release.
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncwarp();
        if (lane == 0) mbar_arrive(&rg.empty[slot]);
    }
}

// ---- prologues ----------------------------------------------------------------------------------------------
// Where element c of a phase vector lives in xs. Register layout: chunk-transposed 16-byte groups,
// [virtual warp][half chunk][lane][4], so that each lane's loads of its chunks are conflict-free;
// otherwise natural order (row_dot's shared-memory path).
template <bool REG>
__device__ __forceinline__ void xs_store_chunk(float *xs, int ch, const float (&v)[8]) {
    float4 *q = reinterpret_cast<float4 *>(xs);
    const int i = REG ? (ch >> 5) * 64 + (ch & 31) : 2 * ch, step = REG ? 32 : 1;
    q[i] = make_float4(v[0], v[1], v[2], v[3]);
    q[i + step] = make_float4(v[4], v[5], v[6], v[7]);
}
template <bool REG>
__device__ __forceinline__ void xs_load_chunk(const float *xs, int ch, float (&v)[8]) {
    const float4 *q = reinterpret_cast<const float4 *>(xs);
    const int i = REG ? (ch >> 5) * 64 + (ch & 31) : 2 * ch, step = REG ? 32 : 1;
    const float4 a = q[i], b = q[i + step];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// Register layout: each lane's chunks vw*32 + lane (zero past the vector; the span keeps the
// loads in bounds).
template <int L>
__device__ __forceinline__ void xvec_from_xs(XVec<L> &x, float *xs, int64_t cols) {
    x.xs = xs;
    if constexpr (L == kRegLayout) {
        const int lane = threadIdx.x & 31, nch = int(cols >> 3);
#pragma unroll
        for (int vw = 0; vw < kRegWarps; ++vw) {
            const int ch = vw * 32 + lane;
            if (ch < nch) {
                xs_load_chunk<true>(xs, ch, x.r[vw]);
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) x.r[vw][e] = 0.f;
            }
        }
    }
}

// Phase inputs into xs: src(ch, v) gives chunk ch (8 values) of the vector; with norm weights,
// those go to the next span (xs + xs_span(cols)). Two chunks per thread are loaded before either
// is stored, so that their latencies overlap.
template <bool REG, typename Src>
__device__ __forceinline__ void load_inputs(float *xs, int64_t cols, const float *norm_w, Src &&src) {
    const int nch = int(cols >> 3);
    for (int c0 = threadIdx.x; c0 < nch; c0 += 2 * kConsumers) {
        const int c1 = c0 + kConsumers;
        float v0[8], v1[8], w0[8], w1[8];
        src(c0, v0);
        if (c1 < nch) src(c1, v1);
        if (norm_w) {
#pragma unroll
            for (int e = 0; e < 8; ++e) w0[e] = norm_w[c0 * 8 + e];
            if (c1 < nch)
#pragma unroll
                for (int e = 0; e < 8; ++e) w1[e] = norm_w[c1 * 8 + e];
        }
        xs_store_chunk<REG>(xs, c0, v0);
        if (c1 < nch) xs_store_chunk<REG>(xs, c1, v1);
        if (norm_w) {
            xs_store_chunk<REG>(xs + xs_span<REG>(cols), c0, w0);
            if (c1 < nch) xs_store_chunk<REG>(xs + xs_span<REG>(cols), c1, w1);
        }
    }
}

// RMSNorm prologue with gemv.cu's reduction (block_sum): per virtual thread the sum of squares of
// its chunks, per virtual warp the butterfly sum, then the butterfly sum of the virtual warps'
// sums; x * norm_w per element, and the returned rms_scale multiplies the row sums (gemv_rows.cuh).
// xs holds the vector and the next span the norm weights (after load_inputs and a barrier). Every
// warp forms the sums itself: no further barrier.
template <int L>
__device__ __forceinline__ float rmsnorm_prologue(XVec<L> &x, float *xs, int64_t cols, float eps,
                                                  const DecodeGemvShape &g) {
    const int lane = threadIdx.x & 31, nch = int(cols >> 3), nw = g.threads >> 5;
    if constexpr (L == kRegLayout) {
        xvec_from_xs(x, xs, cols);
        float ss[kRegWarps];
#pragma unroll
        for (int vw = 0; vw < kRegWarps; ++vw) {
            ss[vw] = 0.f;
#pragma unroll
            for (int e = 0; e < 8; ++e) ss[vw] += x.r[vw][e] * x.r[vw][e];
        }
        warp_sum_n(ss);
        float mine = 0.f;
#pragma unroll
        for (int vw = 0; vw < kRegWarps; ++vw) mine = lane == vw ? ss[vw] : mine;
        const float scale = rms_scale(warp_sum(lane < nw ? mine : 0.f), cols, eps);
#pragma unroll
        for (int vw = 0; vw < kRegWarps; ++vw) {
            const int ch = vw * 32 + lane;
            if (ch < nch) {
                float w[8];
                xs_load_chunk<true>(xs + xs_span<true>(cols), ch, w);
#pragma unroll
                for (int e = 0; e < 8; ++e) x.r[vw][e] *= w[e];
            }
        }
        return scale;
    } else {
        float mine = 0.f;
        for (int vw = 0; vw < nw; ++vw) {
            const int t = vw * 32 + lane;
            float ss = 0.f;
            for (int s = 0; s < g.cpt; ++s) {
                const int ch = t + s * g.threads;
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float v = ch < nch ? xs[ch * 8 + e] : 0.f;
                    ss += v * v;
                }
            }
            ss = warp_sum(ss);
            if (lane == vw) mine = ss;
        }
        const float scale = rms_scale(warp_sum(lane < nw ? mine : 0.f), cols, eps);
        consumers_sync();  // every warp has read xs
        for (int64_t c = threadIdx.x; c < cols; c += kConsumers) xs[c] *= xs[cols + c];
        consumers_sync();
        x.xs = xs;
        return scale;
    }
}

// The RMSNorm prologue of the residual stream h (through L2) or, for layer 0, of the embedding row
// of `token`: the vector and the norm weights into xs, a barrier, then rmsnorm_prologue.
template <int L>
__device__ __forceinline__ float residual_prologue(XVec<L> &x, float *xs, const DecodeStepParams &p,
                                                   const float *norm_w, int64_t token) {
    constexpr bool REG = L == kRegLayout;
    const int64_t D = p.D;
    if (token >= 0) {
        load_inputs<REG>(xs, D, norm_w, [&](int ch, float (&v)[8]) {
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] = bf16_to_float(p.emb[token * D + ch * 8 + e]);
        });
    } else {
        load_inputs<REG>(xs, D, norm_w, [&](int ch, float (&v)[8]) {
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] = ldcg(p.h + ch * 8 + e);
        });
    }
    consumers_sync();
    return rmsnorm_prologue(x, xs, D, p.eps, p.shape_d);
}

// Gated RMSNorm inputs: the mixer output o into xs, silu(z) (or 1 without gate) into the next span,
// the head norm weights after it, and the heads' sums of squares (gemv_prologue_x's order): where a
// head fills aligned lanes (head_in_lanes) the butterfly over them into head_ss, otherwise per
// chunk into chunk_ss for headnorm_prologue to add in order. A chunk ch lies on lane ch % 32 here
// as in the GEMVs (kConsumers is a multiple of 32), and whole warps run the loop together.
template <bool REG>
__device__ __forceinline__ void load_headnorm_inputs(float *xs, int64_t cols, const float *o, const float *z,
                                                     int use_gate, const float *norm_w, int hd, float *chunk_ss,
                                                     float *head_ss) {
    const int nch = int(cols >> 3), lane = threadIdx.x & 31, cph = hd / 8;
    const bool in_lanes = head_in_lanes(hd);
    // Two chunks per thread in flight, as in load_inputs.
    for (int c0 = threadIdx.x; c0 - lane < nch; c0 += 2 * kConsumers) {
        float v[2][8], zr[2][8];
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int ch = c0 + k * kConsumers;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                v[k][e] = ch < nch ? ldcg(o + ch * 8 + e) : 0.f;
                zr[k][e] = use_gate && ch < nch ? ldcg(z + ch * 8 + e) : 0.f;
            }
        }
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int ch = c0 + k * kConsumers;
            float ss = 0.f;
#pragma unroll
            for (int e = 0; e < 8; ++e) ss += v[k][e] * v[k][e];
            if (in_lanes) ss = head_sum_in_lanes(ss, cph);
            if (ch < nch) {
                float gate[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) gate[e] = use_gate ? siluf_(zr[k][e]) : 1.f;
                if (!in_lanes) chunk_ss[ch] = ss;
                else if (ch % cph == 0) head_ss[ch / cph] = ss;
                xs_store_chunk<REG>(xs, ch, v[k]);
                xs_store_chunk<REG>(xs + xs_span<REG>(cols), ch, gate);
            }
        }
    }
    for (int c = threadIdx.x; c < hd; c += kConsumers) xs[2 * xs_span<REG>(cols) + c] = norm_w[c];
}

// Gated RMSNorm per head of hd values: (heads not in lanes) head sums of the chunk sums in order,
// then per element x * inv * norm_w[c % hd] * gate (gemv_prologue_x's HeadNorm). Starts with a
// barrier after load_headnorm_inputs.
template <int L>
__device__ __forceinline__ void headnorm_prologue(XVec<L> &x, float *xs, int64_t cols, int hd, float eps,
                                                  const float *chunk_ss, float *head_ss,
                                                  unsigned long long *stamp) {
    constexpr bool REG = L == kRegLayout;
    const int tid = threadIdx.x, lane = tid & 31;
    const int nch = int(cols >> 3), n_heads = int(cols / hd), cph = hd / 8;
    consumers_sync();
    if (!head_in_lanes(hd)) {
        for (int i = tid; i < n_heads; i += kConsumers) {
            float ss = 0.f;
            for (int q = 0; q < cph; ++q) ss += chunk_ss[i * cph + q];
            head_ss[i] = ss;
        }
        consumers_sync();
    }
    if (stamp && tid == 0) *stamp = now_ns();
    const float *nw = xs + 2 * xs_span<REG>(cols);
    // Chunk ch of the normalised vector (a chunk lies inside one head: hd is a multiple of 8).
    auto chunk = [&](int ch, float (&v)[8]) {
        float gate[8];
        xs_load_chunk<REG>(xs, ch, v);
        xs_load_chunk<REG>(xs + xs_span<REG>(cols), ch, gate);
        const int c0 = ch * 8;
        const float inv = rms_scale(head_ss[c0 / hd], hd, eps);
        const int k0 = c0 % hd;
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = v[e] * inv * nw[k0 + e] * gate[e];
    };
    x.xs = xs;
    if constexpr (REG) {
#pragma unroll
        for (int vw = 0; vw < kRegWarps; ++vw) {
            const int ch = vw * 32 + lane;
            if (ch < nch) {
                chunk(ch, x.r[vw]);
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) x.r[vw][e] = 0.f;
            }
        }
    } else {
        // In place: each chunk is read and written by the same thread.
        for (int ch = tid; ch < nch; ch += kConsumers) {
            float v[8];
            chunk(ch, v);
            xs_store_chunk<false>(xs, ch, v);
        }
        consumers_sync();
    }
}

// ---- the recurrent phase ---------------------------------------------------------------------------------
// Tiles of kConsumers / TPC value columns of one value head, dealt round-robin to the CTAs; lanes
// as in gdn_recurrent.cu. A CTA's first kTilesAhead tiles are read (state, with the pending factors of a
// deferred commit applied) before the barrier that precedes the phase, and their inputs are
// loaded together after it.
template <int KPT, int TPC>
struct RecurrentTiles {
    static constexpr int kCols = kConsumers / TPC;
    struct Inputs {
        float q[KPT], k[KPT], v, g, beta;
    };
    int per_head, count;
    __device__ RecurrentTiles(int V, int HV) : per_head((V + kCols - 1) / kCols), count(HV * per_head) {}

    __device__ __forceinline__ int head(int tile) const { return tile / per_head; }
    __device__ __forceinline__ int column(int tile) const { return (tile % per_head) * kCols + int(threadIdx.x) / TPC; }

    __device__ __forceinline__ void load_state(float (&S)[KPT], const DecodeStepParams &p, const DecodeLayer &Ly, int tile) const {
        const int hv = head(tile), j = column(tile), l = threadIdx.x % TPC, h = hv / (p.HV / p.H);
        const bool ok = j < p.V;
        const float *row = Ly.state + (int64_t(hv) * p.V + (ok ? j : 0)) * p.K;
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int i = e * TPC + l;
            S[e] = (ok && i < p.K) ? ldcg(row + i) : 0.f;
        }
        gdn_tile_apply_pending<KPT, TPC>(S, Ly.pending, p.H, p.HV, p.K, p.V, h, hv, j, ok);
    }

    __device__ __forceinline__ void load_inputs(Inputs &in, const DecodeStepParams &p, int tile) const {
        const int hv = head(tile), j = column(tile), l = threadIdx.x % TPC, h = hv / (p.HV / p.H);
        const int64_t KD = int64_t(p.H) * p.K;
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int i = e * TPC + l;
            in.q[e] = i < p.K ? ldcg(p.proj + h * p.K + i) : 0.f;
            in.k[e] = i < p.K ? ldcg(p.proj + KD + h * p.K + i) : 0.f;
        }
        in.g = ldcg(p.proj + p.row_a + hv);
        in.beta = ldcg(p.proj + p.row_b + hv);
        in.v = j < p.V ? ldcg(p.proj + 2 * KD + int64_t(hv) * p.V + j) : 0.f;
    }

    __device__ __forceinline__ void run(float (&S)[KPT], Inputs &in, const DecodeStepParams &p, const DecodeLayer &Ly,
                        int tile) const {
        const int hv = head(tile), j = column(tile), l = threadIdx.x % TPC;
        const bool ok = j < p.V;
        float u;
        const float ov = gdn_tile_token<KPT, TPC>(S, in.q, in.k, in.v, in.g, in.beta, true, p.q_scale, &u);
        if (l == 0 && ok) p.o[int64_t(hv) * p.V + j] = ov;
        float *row = Ly.state + (int64_t(hv) * p.V + (ok ? j : 0)) * p.K;
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int i = e * TPC + l;
            if (ok && i < p.K) row[i] = S[e];
        }
    }
};

// Prefetch, the barrier after the in_proj phase, and the step for this CTA's tiles.
template <int KPT, int TPC>
__device__ __forceinline__ void recurrent_phase(const DecodeStepParams &p, const DecodeLayer &Ly, GridBarrier &bar,
                                                int layer) {
    using Tiles = RecurrentTiles<KPT, TPC>;
    const Tiles tiles(p.V, p.HV);
    float S[kTilesAhead][KPT];
#pragma unroll
    for (int a = 0; a < kTilesAhead; ++a) {
        const int t = blockIdx.x + a * gridDim.x;
        if (t < tiles.count) tiles.load_state(S[a], p, Ly, t);
    }
    bar.sync();
    if (threadIdx.x == 0) trace(p, layer, 3);
    typename Tiles::Inputs in[kTilesAhead];
#pragma unroll
    for (int a = 0; a < kTilesAhead; ++a) {
        const int t = blockIdx.x + a * gridDim.x;
        if (t < tiles.count) tiles.load_inputs(in[a], p, t);
    }
    if (p.trace && threadIdx.x == 0 && int(blockIdx.x) < tiles.count) {
        asm volatile("" ::"f"(in[0].v), "f"(in[0].q[0]));  // stamp once the first inputs have arrived
        trace(p, layer, 20);
    }
#pragma unroll
    for (int a = 0; a < kTilesAhead; ++a) {
        const int t = blockIdx.x + a * gridDim.x;
        if (t < tiles.count) tiles.run(S[a], in[a], p, Ly, t);
        if (a == 0 && threadIdx.x == 0) trace(p, layer, 21);
    }
    for (int t = blockIdx.x + kTilesAhead * gridDim.x; t < tiles.count; t += gridDim.x) {
        tiles.load_state(S[0], p, Ly, t);
        tiles.load_inputs(in[0], p, t);
        tiles.run(S[0], in[0], p, Ly, t);
    }
}


// ---- the kernel -------------------------------------------------------------------------------------------
template <int KPT, int TPC>
__global__ void __launch_bounds__(kThreads, 1) decode_step_kernel(const __grid_constant__ DecodeStepParams p) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
    __shared__ unsigned long long red64[kConsumerWarps];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t D = p.D, VD = int64_t(p.HV) * p.V, I = p.I, W = p.conv_size;
    const TailLayout tl(D, VD, I, p.V, p.R, W, gridDim.x);
    float *tail = reinterpret_cast<float *>(smem + size_t(p.stages) * kStageBytes);
    float *xs = tail + tl.xs, *chunk_ss = tail + tl.chunk_ss, *head_ss = tail + tl.head_ss;
    float *hs = tail + tl.hs, *conv_s = tail + tl.conv;

    Ring rg{smem, full, empty, p.stages};
    if (tid == 0) {
        for (int s = 0; s < p.stages; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], kConsumerWarps);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (warp == kConsumerWarps) {
        if (lane == 0) producer(p, rg);
        return;
    }

    GridBarrier bar{p.barrier};
    const int64_t tok = *p.token;
    if (blockIdx.x == 0 && tid == 0) *p.argmax = 0ull;
    int64_t hb, he, ib, ie;  // this CTA's residual rows (o_proj and down) and in_proj rows
    share_of(D, hb, he);
    share_of(p.R, ib, ie);
    const int64_t conv_rows = p.use_conv ? max64(0, min64(ie, p.CC) - ib) : 0;
    for (int64_t i = tid; i < he - hb; i += kConsumers) hs[i] = bf16_to_float(p.emb[tok * D + hb + i]);
    // The residual epilogue of o_proj and down: this CTA's rows [hb, he) of h, kept in hs.
    const auto add_residual = [&](int64_t r, float y, float) {
        const float v = hs[r - hb] + y;
        hs[r - hb] = v;
        p.h[r] = v;
    };

    for (int l = 0; l < p.n_layers; ++l) {
        const DecodeLayer &Ly = p.layers[l];
        if (tid == 0) trace(p, l, 0);
        // in_proj: RMSNorm of the residual (layer 0: the embedding row), conv/gates epilogue. The
        // conv taps and windows of this CTA's rows come in with the input vector.
        for (int i = tid; i < conv_rows * W; i += kConsumers) {
            const int r = int(ib) + i / int(W), j = i % int(W);
            float *cs = conv_s + (r - ib) * (2 * W - 1);
            cs[j] = Ly.conv_w[int64_t(r) * W + j];
            if (j < W - 1) cs[W + j] = Ly.conv_cache[j * p.CC + r];
        }
        with_layout(p.shape_d, [&](auto reg) {
            XVec<decltype(reg)::value> x;
            const float scale = residual_prologue(x, xs, p, Ly.attn_norm, l == 0 ? tok : -1);
            if (tid == 0) trace(p, l, 1);
            consume(rg, Stream(Ly.in_proj, p.R, D, false), x, p.shape_d, scale, [&](int64_t r, float y, float) {
                float out;
                if (r < conv_rows + ib) {
                    // Same formula and tap order as inproj_row (gemv_rows.cuh), taps and window from
                    // shared memory; the shifted window goes back to the cache.
                    const float *cs = conv_s + (r - ib) * (2 * W - 1);
                    const float acc = W == 4 ? conv_row<4>(cs, Ly.conv_cache + r, p.CC, 4, y)
                                             : conv_row<0>(cs, Ly.conv_cache + r, p.CC, int(W), y);
                    out = siluf_(acc);
                } else {
                    out = inproj_row(r, y, Ly.conv_cache, Ly.conv_w, p.conv_size, p.CC, p.use_conv, p.row_a, p.row_b,
                                     Ly.A_log, Ly.dt_bias, p.beta_scale, 0);
                }
                p.proj[r] = out;
            });
        });
        if (tid == 0) trace(p, l, 2);
        // The recurrent step (its tile shape is the model's; see recurrent_phase).
        recurrent_phase<KPT, TPC>(p, Ly, bar, l);
        if (tid == 0) trace(p, l, 4);
        bar.sync();

        // o_proj + residual (this CTA's residual rows stay in shared memory).
        if (tid == 0) trace(p, l, 5);
        with_layout(p.shape_vd, [&](auto reg) {
            constexpr int L = decltype(reg)::value;
            constexpr bool R = L == kRegLayout;
            load_headnorm_inputs<R>(xs, VD, p.o, p.proj + p.row_g, p.use_gate, Ly.o_norm, p.V, chunk_ss, head_ss);
            if (tid == 0) trace(p, l, 14);
            XVec<L> x;
            headnorm_prologue(x, xs, VD, p.V, p.eps, chunk_ss, head_ss, trace_slot(p, l, 15));
            if (tid == 0) trace(p, l, 6);
            consume(rg, Stream(Ly.o_proj, D, VD, false), x, p.shape_vd, 1.f, add_residual);
        });
        if (tid == 0) trace(p, l, 7);
        bar.sync();

        // gate_up + SwiGLU.
        if (tid == 0) trace(p, l, 8);
        with_layout(p.shape_d, [&](auto reg) {
            XVec<decltype(reg)::value> x;
            const float scale = residual_prologue(x, xs, p, Ly.mlp_norm, -1);
            if (tid == 0) trace(p, l, 9);
            consume(rg, Stream(Ly.gate_up, I, D, true), x, p.shape_d, scale,
                    [&](int64_t r, float g, float u) { p.act[r] = siluf_(g) * u; });
        });
        if (tid == 0) trace(p, l, 10);
        bar.sync();
        if (tid == 0) trace(p, l, 11);

        // down + residual.
        with_layout(p.shape_i, [&](auto reg) {
            constexpr int L = decltype(reg)::value;
            constexpr bool R = L == kRegLayout;
            load_inputs<R>(xs, I, nullptr, [&](int ch, float (&v)[8]) {
#pragma unroll
                for (int e = 0; e < 8; ++e) v[e] = ldcg(p.act + ch * 8 + e);
            });
            consumers_sync();
            XVec<L> x;
            xvec_from_xs(x, xs, I);
            consume(rg, Stream(Ly.down, D, I, false), x, p.shape_i, 1.f, add_residual);
        });
        if (tid == 0) trace(p, l, 12);
        bar.sync();
        if (tid == 0) trace(p, l, 13);
    }

    // Every layer has applied the pending factors of a deferred commit by now.
    if (blockIdx.x == 0 && tid == 0 && p.pending_desc) *p.pending_desc = 0;

    // lm_head: logits and the argmax.
    unsigned long long best = 0;
    with_layout(p.shape_d, [&](auto reg) {
        XVec<decltype(reg)::value> x;
        const float scale = residual_prologue(x, xs, p, p.final_norm, -1);
        consume(rg, Stream(p.lm_head, p.vocab, D, false), x, p.shape_d, scale, [&](int64_t r, float y, float) {
            p.logits[r] = y;
            best = u64_max(best, argmax_key(y, uint32_t(r)));
        });
    });
    if (lane == 0) red64[warp] = best;
    consumers_sync();
    if (tid == 0) {
        unsigned long long b = 0;
        for (int i = 0; i < kConsumerWarps; ++i) b = u64_max(b, red64[i]);
        atomicMax(p.argmax, b);
    }
}

using StepFn = void (*)(DecodeStepParams);

StepFn pick(int K) {
    StepFn fn = nullptr;
    (void)with_tile_shape(K, [&](auto shape) {
        fn = decode_step_kernel<decltype(shape)::KPT, decltype(shape)::TPC>;
        return cudaSuccess;
    });
    return fn;
}

DecodeGemvShape shape_of(int64_t cols) {
    DecodeGemvShape g;
    g.cpt = gemv_cpt(cols);
    g.threads = gemv_threads(cols);
    return g;
}

struct DeviceLimits {
    int smem_optin = 0, sms = 0;
};

DeviceLimits limits_of(int device) {
    DeviceLimits d;
    if (cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return DeviceLimits{};
    }
    return d;
}

size_t tail_bytes(const DecodeStepParams &p, int grid) {
    const TailLayout tl(p.D, int64_t(p.HV) * p.V, p.I, p.V, p.R, p.conv_size, grid);
    return size_t(tl.total) * 4;
}

// Ring depth: as many stages as fit next to the tail, at most kMaxStages.
int stages_for(const DeviceLimits &d, size_t tail) {
    const size_t static_bytes = 1024;  // barriers and reduction words, generously
    if (size_t(d.smem_optin) < tail + static_bytes) return 0;
    return int(std::min<size_t>(kMaxStages, (size_t(d.smem_optin) - tail - static_bytes) / kStageBytes));
}

}  // namespace

bool decode_step_supported(const DecodeStepParams &p, int32_t device) {
    const int64_t D = p.D, VD = int64_t(p.HV) * p.V, I = p.I;
    if (D <= 0 || VD <= 0 || I <= 0 || p.V <= 0 || p.HV <= 0 || p.R <= 0) return false;
    if (D % 8 || VD % 8 || I % 8 || p.V % 8) return false;
    // Rows must fit a stage (a [gate|up] pair for D columns) and gemv.cu's vectorised layout.
    if (D * 4 > kStageBytes || VD * 2 > kStageBytes || I * 2 > kStageBytes) return false;
    if (D / 8 > 4 * kGemvMaxThreads || VD / 8 > 4 * kGemvMaxThreads || I / 8 > 4 * kGemvMaxThreads) return false;
    StepFn fn = pick(p.K);
    if (!fn) return false;
    const DeviceLimits d = limits_of(device);
    if (d.sms <= 0) return false;
    const size_t tail = tail_bytes(p, d.sms);
    const int stages = stages_for(d, tail);
    if (stages < kMinStages) return false;
    const size_t smem = size_t(stages) * kStageBytes + tail;
    // Raising the limit is per kernel and device; done here, outside any stream capture.
    if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, smem) != cudaSuccess || per_sm < 1) {
        (void)cudaGetLastError();
        return false;
    }
    return true;
}

cudaError_t launch_decode_step(const DecodeStepParams &params, const LaunchCtx &ctx) {
    StepFn fn = pick(params.K);
    if (!fn) return cudaErrorInvalidValue;
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) return e;
    const DeviceLimits d = limits_of(device);
    DecodeStepParams p = params;
    const size_t tail = tail_bytes(p, ctx.sm_count);
    p.stages = stages_for(d, tail);
    if (p.stages < kMinStages) return cudaErrorInvalidConfiguration;
    p.shape_d = shape_of(p.D), p.shape_vd = shape_of(int64_t(p.HV) * p.V), p.shape_i = shape_of(p.I);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(ctx.sm_count));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = size_t(p.stages) * kStageBytes + tail;
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
