// bench_step_floor: the persistent decoding-step skeleton. One CTA per SM: a producer warp streams
// every weight matrix of the step into a ring of shared-memory slots (bulk copies or 16-byte
// cp.async), consumer warps follow the step's dependencies with grid-wide barriers. Device code
// and its launcher; included by bench_step_floor.cu only.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "bulk_copy.cuh"
#include "device_common.cuh"
#include "gemv_rows.cuh"
#include "grid_barrier.cuh"
#include "step_params.cuh"

namespace step_floor {

using namespace specla::kern;

// ---- one weight matrix as the stream sees it -----------------------------------------------------
// L logical rows of `cols` bf16 (paired: L gate rows then L up rows), `rps` logical rows per slot.
// This CTA's slots: a contiguous share of the rows, or (interleaved) every gridDim.x-th slot of the
// matrix, so that the SMs together sweep one region of memory at a time.
struct Mat {
    const uint16_t *w;
    int L, cols, b, e, rps;
    bool paired, inter;
    __device__ Mat(const uint16_t *w_, int L_, int cols_, bool paired_, bool inter_)
        : w(w_), L(L_), cols(cols_), paired(paired_), inter(inter_) {
        b = int(int64_t(L) * blockIdx.x / gridDim.x);
        e = int(int64_t(L) * (blockIdx.x + 1) / gridDim.x);
        rps = kSlotBytes / (cols * 2 * (paired ? 2 : 1));
    }
    __device__ int slots() const {
        if (!inter) return (e - b + rps - 1) / rps;
        const int total = (L + rps - 1) / rps;
        return int(blockIdx.x) < total ? (total - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x) : 0;
    }
    __device__ int row0(int j) const { return inter ? (int(blockIdx.x) + j * int(gridDim.x)) * rps : b + j * rps; }
    __device__ int rows(int j) const { return min(rps, (inter ? L : e) - row0(j)); }
};

// A wait that lasts about a second is a bug, not a wait: the first one records where it was
// (host-mapped memory, readable after the kernel has failed) and traps.
__device__ int *g_watch;  // [0] set, [1] kind (1 consumer slot, 2 producer slot, 3 cap, 4 grid barrier), [2] CTA,
                          // [3] thread, [4] sequence number or target, [5] parity or value seen
__device__ __noinline__ void stuck(int kind, uint32_t a, uint32_t b) {
    int *w = g_watch;
    if (w && atomicCAS_system(w, 0, 1) == 0) {
        w[1] = kind, w[2] = int(blockIdx.x), w[3] = int(threadIdx.x), w[4] = int(a), w[5] = int(b);
        __threadfence_system();
    }
    __trap();
}
constexpr long long kStuckCycles = 1ll << 31;
__device__ __forceinline__ void wait_slot(uint64_t *bar, uint32_t parity, int kind, uint32_t q) {
    const long long t0 = clock64();
    while (!mbar_try_wait(bar, parity))
        if (clock64() - t0 > kStuckCycles) stuck(kind, q, parity);
}

struct Ring {
    unsigned char *base;
    uint64_t *full, *empty;
    int slots;
    uint32_t q = 0;
    __device__ unsigned char *ptr(uint32_t s) const { return base + size_t(s) * kSlotBytes; }
};

__device__ __forceinline__ void cp_async16(void *dst, const void *src, uint64_t policy) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src),
                 "l"(policy)
                 : "memory");
}

__device__ void produce(Ring &rg, const Mat &m, uint64_t policy, int cap, int kind) {
    const int ns = m.slots();
    for (int j = 0; j < ns; ++j, ++rg.q) {
        const int r0 = m.row0(j);
        const uint32_t s = rg.q % uint32_t(rg.slots), use = rg.q / uint32_t(rg.slots);
        if (use > 0) wait_slot(&rg.empty[s], (use - 1) & 1, 2, rg.q);
        if (cap > 0 && rg.q >= uint32_t(cap)) {
            const uint32_t prev = rg.q - uint32_t(cap);
            wait_slot(&rg.full[prev % uint32_t(rg.slots)], (prev / uint32_t(rg.slots)) & 1, 3, prev);
        }
        const int n = m.rows(j);
        const uint32_t bytes = uint32_t(n) * uint32_t(m.cols) * 2u;
        if (kind == 0) {
            mbar_arrive_expect_tx(&rg.full[s], m.paired ? 2 * bytes : bytes);
            bulk_load(rg.ptr(s), m.w + int64_t(r0) * m.cols, bytes, &rg.full[s], policy);
            if (m.paired) bulk_load(rg.ptr(s) + bytes, m.w + int64_t(m.L + r0) * m.cols, bytes, &rg.full[s], policy);
        } else {
            const int lane = threadIdx.x & 31, nch = int(bytes / 16);
            const uint4 *a = reinterpret_cast<const uint4 *>(m.w + int64_t(r0) * m.cols);
            const uint4 *b = reinterpret_cast<const uint4 *>(m.w + int64_t(m.L + r0) * m.cols);
            uint4 *d = reinterpret_cast<uint4 *>(rg.ptr(s));
            for (int c = lane; c < nch; c += 32) cp_async16(d + c, a + c, policy);
            if (m.paired)
                for (int c = lane; c < nch; c += 32) cp_async16(d + nch + c, b + c, policy);
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(&rg.full[s])) : "memory");
        }
    }
}

__device__ void producer(const StepParams &p, Ring &rg) {
    const uint64_t pol = l2_evict_first_policy();
    for (int l = 0; l < kLayers; ++l) {
        const Layer &y = p.layers[l];
        produce(rg, Mat(y.in_proj, kR, kD, false, p.interleave != 0), pol, p.in_flight, p.copy_kind);
        produce(rg, Mat(y.o_proj, kD, kVD, false, p.interleave != 0), pol, p.in_flight, p.copy_kind);
        produce(rg, Mat(y.gate_up, kI, kD, true, p.interleave != 0), pol, p.in_flight, p.copy_kind);
        produce(rg, Mat(y.down, kD, kI, false, p.interleave != 0), pol, p.in_flight, p.copy_kind);
    }
    produce(rg, Mat(p.lm_head, kVocab, kD, false, p.interleave != 0), pol, p.in_flight, p.copy_kind);
}

// ---- consumers ---------------------------------------------------------------------------------------
__device__ __forceinline__ void consumers_sync() { named_barrier_sync<kConsumers>(); }

struct GridBarrier {
    unsigned int *count;
    unsigned int target;
    bool on;  // off: the consumers only pass a CTA barrier (the no-barrier diagnostic)
    __device__ void sync() {
        if (!on) {
            consumers_sync();
            return;
        }
        cta_grid_sync<kConsumers>(count, target, kStuckCycles, [this](unsigned int v) { stuck(4, target, v); });
    }
};

// The 2048-column input vector in registers: lane l holds chunks l + 32 i, i < 8.
struct XReg {
    float r[8][8];
};
__device__ __forceinline__ void xreg_from(XReg &x, const float *xs) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const float4 a = reinterpret_cast<const float4 *>(xs)[2 * (lane + 32 * i)];
        const float4 b = reinterpret_cast<const float4 *>(xs)[2 * (lane + 32 * i) + 1];
        x.r[i][0] = a.x, x.r[i][1] = a.y, x.r[i][2] = a.z, x.r[i][3] = a.w;
        x.r[i][4] = b.x, x.r[i][5] = b.y, x.r[i][6] = b.z, x.r[i][7] = b.w;
    }
}

// This CTA's rows of a 2048-column matrix; warp w takes the slots q = w (mod kCW).
// epi(row, y, y_up).
template <typename Epi>
__device__ __forceinline__ void consume_d(Ring &rg, const Mat &m, const XReg &x, Epi &&epi) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int ns = m.slots();
    for (int j = int((uint32_t(warp) + uint32_t(kCW) - rg.q % kCW) % kCW); j < ns; j += kCW) {
        const uint32_t q = rg.q + uint32_t(j), s = q % uint32_t(rg.slots);
        wait_slot(&rg.full[s], (q / uint32_t(rg.slots)) & 1, 1, q);
        const int r0 = m.row0(j), n = m.rows(j), nr = m.paired ? 2 * n : n;
        const uint4 *w = reinterpret_cast<const uint4 *>(rg.ptr(s));
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                if (r < nr) acc[r] = fma8(w[r * (kD / 8) + lane + 32 * i], x.r[i], acc[r]);
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[r] = warp_sum(acc[r]);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncwarp();
        if (lane == 0) {
            mbar_arrive(&rg.empty[s]);
            if (m.paired) {  // n <= 2 pairs: gate rows 0..n-1, up rows n..2n-1
                epi(r0, acc[0], n == 2 ? acc[2] : acc[1]);
                if (n == 2) epi(r0 + 1, acc[1], acc[3]);
            } else {
#pragma unroll
                for (int r = 0; r < 4; ++r)
                    if (r < n) epi(r0 + r, acc[r], 0.f);
            }
        }
    }
    rg.q += uint32_t(ns);
}

// down: 5632 columns, one row per slot, the input vector in shared memory.
template <typename Epi>
__device__ __forceinline__ void consume_i(Ring &rg, const Mat &m, const float *xs, Epi &&epi) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int ns = m.slots();
    for (int j = int((uint32_t(warp) + uint32_t(kCW) - rg.q % kCW) % kCW); j < ns; j += kCW) {
        const uint32_t q = rg.q + uint32_t(j), s = q % uint32_t(rg.slots);
        wait_slot(&rg.full[s], (q / uint32_t(rg.slots)) & 1, 1, q);
        const int r0 = m.row0(j);
        const uint4 *w = reinterpret_cast<const uint4 *>(rg.ptr(s));
        float acc = 0.f;
#pragma unroll 2
        for (int c = lane; c < kI / 8; c += 32) {
            const float4 a = reinterpret_cast<const float4 *>(xs)[2 * c];
            const float4 b = reinterpret_cast<const float4 *>(xs)[2 * c + 1];
            const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
            acc = fma8(w[c], xv, acc);
        }
        acc = warp_sum(acc);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncwarp();
        if (lane == 0) {
            mbar_arrive(&rg.empty[s]);
            epi(r0, acc, 0.f);
        }
    }
    rg.q += uint32_t(ns);
}

// RMSNorm of a 2048 vector in xs (times norm weights) into registers. Every consumer thread.
__device__ void rmsnorm_to_reg(float *xs, const float *nw, float *red, XReg &x) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float ss = 0.f;
    for (int c = tid; c < kD; c += kConsumers) ss += xs[c] * xs[c];
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    consumers_sync();
    float t = lane < kCW ? red[lane] : 0.f;
    t = warp_sum(t);
    const float inv = rsqrtf(t / float(kD) + kEps);
    xreg_from(x, xs);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int c0 = (lane + 32 * i) * 8;
#pragma unroll
        for (int e = 0; e < 8; ++e) x.r[i][e] *= inv * __ldg(nw + c0 + e);
    }
}

// A vector of `n` floats from global memory (through L2: written by other CTAs this step) into xs.
__device__ __forceinline__ void load_vec(float *xs, const float *src, int n) {
    for (int c = threadIdx.x; c < n / 4; c += kConsumers)
        reinterpret_cast<float4 *>(xs)[c] = __ldcg(reinterpret_cast<const float4 *>(src) + c);
}

__device__ void consumers(const StepParams &p, Ring &rg, float *xs, float *red) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    GridBarrier gb{p.barrier, p.barrier_base, p.barriers > 0};
    const int hb = int(int64_t(kD) * blockIdx.x / gridDim.x), he = int(int64_t(kD) * (blockIdx.x + 1) / gridDim.x);
    const int cb = int(int64_t(kVD) * blockIdx.x / gridDim.x), ce = int(int64_t(kVD) * (blockIdx.x + 1) / gridDim.x);
    // The residual stream starts as the token's embedding (this CTA's rows; read by others only
    // after a barrier).
    for (int r = hb + tid; r < he; r += kConsumers) p.h[r] = bf16_to_float(p.emb[int64_t(p.token) * kD + r]);
    XReg x;
    for (int l = 0; l < kLayers; ++l) {
        const Layer &Ly = p.layers[l];
        float *S = p.state + int64_t(l) * kHeads * kDv * kDk;
        // in_proj
        if (l == 0) {
            for (int c = tid; c < kD; c += kConsumers) xs[c] = bf16_to_float(p.emb[int64_t(p.token) * kD + c]);
        } else {
            load_vec(xs, p.h, kD);
        }
        consumers_sync();
        rmsnorm_to_reg(xs, Ly.attn_norm, red, x);
        consume_d(rg, Mat(Ly.in_proj, kR, kD, false, p.interleave != 0), x, [&](int r, float y, float) { p.qkv[r] = y; });
        // The state columns of this CTA (kColsPerWarp per warp at most) before the barrier: only this CTA
        // writes them.
        float st[kColsPerWarp][8];
#pragma unroll
        for (int ncol = 0; ncol < kColsPerWarp; ++ncol) {
            const int c = cb + warp + ncol * kCW;
            if (c >= ce) break;
            const float4 *src = reinterpret_cast<const float4 *>(S + int64_t(c) * kDk) + 2 * lane;
            const float4 a = __ldcg(src), b = __ldcg(src + 1);
            st[ncol][0] = a.x, st[ncol][1] = a.y, st[ncol][2] = a.z, st[ncol][3] = a.w;
            st[ncol][4] = b.x, st[ncol][5] = b.y, st[ncol][6] = b.z, st[ncol][7] = b.w;
        }
        gb.sync();
        // recurrence: warp w, value columns cb + w, cb + w + kCW, ...
#pragma unroll
        for (int ncol = 0; ncol < kColsPerWarp; ++ncol) {
            const int c = cb + warp + ncol * kCW;
            if (c >= ce) break;
            const int hd = c / kDv;
            float q[8], k[8];
            const float4 *qs = reinterpret_cast<const float4 *>(p.qkv + kRowQ + hd * kDk) + 2 * lane;
            const float4 *ks = reinterpret_cast<const float4 *>(p.qkv + kRowK + hd * kDk) + 2 * lane;
            const float4 qa = __ldcg(qs), qb = __ldcg(qs + 1), ka = __ldcg(ks), kb = __ldcg(ks + 1);
            q[0] = qa.x, q[1] = qa.y, q[2] = qa.z, q[3] = qa.w, q[4] = qb.x, q[5] = qb.y, q[6] = qb.z, q[7] = qb.w;
            k[0] = ka.x, k[1] = ka.y, k[2] = ka.z, k[3] = ka.w, k[4] = kb.x, k[5] = kb.y, k[6] = kb.z, k[7] = kb.w;
            const float v = __ldcg(p.qkv + kRowV + c);
            const float beta = sigmoidf_(__ldcg(p.qkv + kRowBeta + hd));
            const float g = sigmoidf_(__ldcg(p.qkv + kRowDecay + hd) + 3.f);
            float qq = 0.f, kk = 0.f;
#pragma unroll
            for (int e = 0; e < 8; ++e) qq += q[e] * q[e], kk += k[e] * k[e];
            qq = warp_sum(qq), kk = warp_sum(kk);
            const float iq = rsqrtf(qq + kEps) * rsqrtf(float(kDk)), ik = rsqrtf(kk + kEps);
            float sk = 0.f;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                k[e] *= ik, q[e] *= iq;
                st[ncol][e] *= g;
                sk += st[ncol][e] * k[e];
            }
            sk = warp_sum(sk);
            const float u = beta * (v - sk);
            float oc = 0.f;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                st[ncol][e] += k[e] * u;
                oc += st[ncol][e] * q[e];
            }
            oc = warp_sum(oc);
            float4 *dst = reinterpret_cast<float4 *>(S + int64_t(c) * kDk) + 2 * lane;
            __stcg(dst, make_float4(st[ncol][0], st[ncol][1], st[ncol][2], st[ncol][3]));
            __stcg(dst + 1, make_float4(st[ncol][4], st[ncol][5], st[ncol][6], st[ncol][7]));
            if (lane == 0) p.o[c] = oc;
        }
        gb.sync();
        // o_proj: gated per-head norm of o, times silu(z); warp w forms head w's sum of squares.
        load_vec(xs, p.o, kVD);
        load_vec(xs + kVD, p.qkv + kRowZ, kVD);
        consumers_sync();
        for (int hd = warp; hd < kHeads; hd += kCW) {
            float ss = 0.f;
            for (int j = lane; j < kDv; j += 32) ss += xs[hd * kDv + j] * xs[hd * kDv + j];
            ss = warp_sum(ss);
            if (lane == 0) red[8 + hd] = rsqrtf(ss / float(kDv) + kEps);
        }
        consumers_sync();
        for (int c = tid; c < kVD; c += kConsumers)
            xs[c] = xs[c] * red[8 + c / kDv] * __ldg(Ly.head_norm + c % kDv) * siluf_(xs[kVD + c]);
        consumers_sync();
        xreg_from(x, xs);
        consume_d(rg, Mat(Ly.o_proj, kD, kVD, false, p.interleave != 0), x, [&](int r, float y, float) { p.h[r] = __ldcg(p.h + r) + y; });
        gb.sync();
        // gate_up
        load_vec(xs, p.h, kD);
        consumers_sync();
        rmsnorm_to_reg(xs, Ly.ffn_norm, red, x);
        consume_d(rg, Mat(Ly.gate_up, kI, kD, true, p.interleave != 0), x, [&](int r, float g, float u) { p.act[r] = siluf_(g) * u; });
        gb.sync();
        // down
        load_vec(xs, p.act, kI);
        consumers_sync();
        consume_i(rg, Mat(Ly.down, kD, kI, false, p.interleave != 0), xs, [&](int r, float y, float) { p.h[r] = __ldcg(p.h + r) + y; });
        gb.sync();
    }
    load_vec(xs, p.h, kD);
    consumers_sync();
    rmsnorm_to_reg(xs, p.final_norm, red, x);
    unsigned long long best = 0;
    consume_d(rg, Mat(p.lm_head, kVocab, kD, false, p.interleave != 0), x, [&](int r, float y, float) {
        p.logits[r] = y;
        best = u64_max(best, argmax_key(y, uint32_t(r)));
    });
    if (lane == 0 && best) atomicMax(p.argmax, best);
}

// Diagnostic (barriers < 0): the consumers take every slot in turn and do the rows' arithmetic with a
// zero input vector: no prologue, no recurrence, no barrier. What the ring streams by itself.
__device__ void consumers_stream_only(const StepParams &p, Ring &rg, float *xs) {
    XReg x;
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) x.r[i][e] = 0.f;
    for (int c = threadIdx.x; c < kI; c += kConsumers) xs[c] = 0.f;
    consumers_sync();
    const bool it = p.interleave != 0;
    for (int l = 0; l < kLayers; ++l) {
        const Layer &Ly = p.layers[l];
        consume_d(rg, Mat(Ly.in_proj, kR, kD, false, it), x, [&](int r, float y, float) { p.qkv[r] = y; });
        consume_d(rg, Mat(Ly.o_proj, kD, kVD, false, it), x, [&](int r, float y, float) { p.o[r] = y; });
        consume_d(rg, Mat(Ly.gate_up, kI, kD, true, it), x, [&](int r, float g, float u) { p.act[r] = g + u; });
        consume_i(rg, Mat(Ly.down, kD, kI, false, it), xs, [&](int r, float y, float) { p.o[r] = y; });
    }
    consume_d(rg, Mat(p.lm_head, kVocab, kD, false, it), x, [&](int r, float y, float) { p.logits[r] = y; });
}

__global__ void __launch_bounds__(kThreads, 1) step_kernel(const StepParams p) {
    extern __shared__ __align__(128) unsigned char smem[];
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + size_t(p.slots) * kSlotBytes);
    uint64_t *empty = full + kMaxSlots;
    float *red = reinterpret_cast<float *>(empty + kMaxSlots);
    float *xs = red + 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < p.slots; ++s) mbar_init(&full[s], p.copy_kind == 0 ? 1 : 32), mbar_init(&empty[s], 1);
        mbar_init_fence();
    }
    __syncthreads();
    Ring rg{smem, full, empty, p.slots};
    if (threadIdx.x >= kConsumers) {
        if (p.copy_kind != 0 || threadIdx.x == kConsumers) producer(p, rg);
        return;
    }
    if (p.barriers < 0) consumers_stream_only(p, rg, xs);
    else consumers(p, rg, xs, red);
}

// Ring, its barriers, the reduction scratch, and xs: the phase's input vector (down: I floats; o_proj: o and
// the gate input, 2 x VD).
constexpr int kXsFloats = kI > 2 * kVD ? kI : 2 * kVD;
size_t step_smem(int slots) { return size_t(slots) * kSlotBytes + 2 * kMaxSlots * 8 + 32 * 4 + size_t(kXsFloats) * 4; }

// Makes a stuck wait report where it was, at exit (host-mapped memory stays readable after the
// kernel has failed and the context is lost).
inline void install_watch() {
    static int *host = nullptr;
    int *dev = nullptr;
    CK(cudaHostAlloc(reinterpret_cast<void **>(&host), 64, cudaHostAllocMapped));
    for (int i = 0; i < 16; ++i) host[i] = 0;
    CK(cudaHostGetDevicePointer(reinterpret_cast<void **>(&dev), host, 0));
    CK(cudaMemcpyToSymbol(g_watch, &dev, sizeof(dev)));
    std::atexit([] {
        const volatile int *w = host;
        if (w[0])
            std::printf("stuck wait: kind %d (1 consumer slot, 2 producer slot, 3 cap, 4 grid barrier), CTA %d, "
                        "thread %d, sequence/target %u, parity/value %u\n",
                        w[1], w[2], w[3], unsigned(w[4]), unsigned(w[5]));
    });
}

// Launches one persistent step (cooperative: the grid barrier needs every CTA resident) and keeps
// the host's copy of the barrier counter, which grows by gridDim.x per barrier and is never reset.
struct Launcher {
    int sms = 0;
    unsigned int barrier_value = 0;  // host mirror of the barrier counter
    cudaError_t step(StepParams p, int slots, int in_flight, int barriers, cudaStream_t st, int copy_kind = 0,
                     int interleave = 0) {
        if (slots % kCW != 0 || slots > kMaxSlots) return cudaErrorInvalidValue;
        p.slots = slots, p.in_flight = in_flight, p.barriers = barriers, p.copy_kind = copy_kind;
        p.interleave = interleave;
        p.barrier_base = barrier_value;
        if (barriers > 0) barrier_value += unsigned(sms) * unsigned(5 * kLayers);
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(unsigned(sms));
        cfg.blockDim = dim3(kThreads);
        cfg.dynamicSmemBytes = step_smem(slots);
        cfg.stream = st;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeCooperative;
        attr[0].val.cooperative = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        return cudaLaunchKernelEx(&cfg, step_kernel, p);
    }
};

}  // namespace step_floor
