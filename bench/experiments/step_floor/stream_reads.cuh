// bench_step_floor: streaming reads of the step's weights without arithmetic: one kernel over all
// of them, the GEMV's access pattern, and the kernel chain of a step (one kernel per matrix and one
// per layer's state, programmatic dependent launch). Included by bench_step_floor.cu only.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "device_common.cuh"
#include "gemv_rows.cuh"

namespace step_floor {

using namespace specla::kern;

__global__ void read_stream(const uint4 *w, int64_t n, unsigned long long *sink) {
    uint32_t acc = 0;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const uint4 v = ld_stream(w + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) atomicAdd(sink, 1ull);
}

// The step's kernel chain without arithmetic: one kernel per weight matrix (the GEMV's pattern,
// contiguous shares) and one per layer that reads and writes the layer's recurrent state, in the
// order of a decoding step; with programmatic dependent launch the first block (or two: AHEAD) is
// loaded before the grid-dependency wait, as the engine's GEMV does. With DEP, each kernel also has
// the step's data dependency: right after the wait it reads a 2048-float vector that the previous
// kernel wrote (through L2) and reduces it over the CTA (an RMSNorm prologue's sum), and it writes
// one value per CTA for the next kernel.
// With reps > 1 the vector comes as that many partial copies (a split-K kernel's replicas, 2048
// floats apart), added here.
template <bool DEP>
__device__ __forceinline__ float dep_read(const float *in, int reps = 1) {
    if (!DEP) return 0.f;
    __shared__ float red[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float4 a = __ldcg(reinterpret_cast<const float4 *>(in) + threadIdx.x);
    float4 b = __ldcg(reinterpret_cast<const float4 *>(in) + threadIdx.x + 256);
    for (int r = 1; r < reps; ++r) {
        const float4 p = __ldcg(reinterpret_cast<const float4 *>(in + r * 2048) + threadIdx.x);
        const float4 q = __ldcg(reinterpret_cast<const float4 *>(in + r * 2048) + threadIdx.x + 256);
        a.x += p.x, a.y += p.y, a.z += p.z, a.w += p.w, b.x += q.x, b.y += q.y, b.z += q.z, b.w += q.w;
    }
    float ss = a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    return warp_sum(lane < int(blockDim.x >> 5) ? red[lane] : 0.f);
}

// The GEMV's access pattern: blocks of CH x 4 KB (CH rows of 2048 bf16), one 16-byte chunk per
// thread and row, the next block loaded before the current one is used. A CTA takes a contiguous
// share of the blocks (as the GEMV's rows) or every gridDim.x-th block. AHEAD blocks (1 or 2) are
// loaded before the grid-dependency wait (a no-op without programmatic dependent launch). WORK adds
// the GEMV's work step by step, every matrix taken as rows of 2048 columns:
//   0  none (the loads only; with DEP the dependency read of dep_read);
//   1  the thread's 8 inputs read from `in` after the wait, per row the 8 FMAs and the warp's
//      butterfly sum (warp 0's partial sum stored);
//   2  and the CTA's sum of the warps' partial sums through shared memory, a CTA barrier per block,
//      every row stored (gemv.cu's gemv_step);
//   3  and an RMSNorm prologue: norm weights read before the wait, the CTA's sum of squares of the
//      input, the inputs scaled.
//
// RANKED (with AHEAD 1): blocks by arrival instead of by index. Every CTA takes one ticket (an
// atomic on `tickets`, issued at entry, before the wait) and owns block blockIdx.x (the one loaded
// before the wait) plus a share of the remaining blocks that depends on its ticket, i.e. on when it
// arrived: the k-th arrival's share is the slice [D(k/G), D((k+1)/G)) of the rest with
// D(x) = x + skew * x * (1 - x), so that early arrivals take more (skew 0: even shares). Each launch
// adds gridDim.x to the counter, so ticket mod gridDim.x is the arrival rank in every replay.
template <int CH, int AHEAD, bool DEP, int WORK = 0, bool RANKED = false>
__global__ void __launch_bounds__(256) stream_blocks(const uint4 *w, int64_t nblocks, int inter,
                                                     unsigned long long *sink, const float *in, float *out,
                                                     const float *norm, unsigned *tickets, float skew, int reps,
                                                     unsigned long long *trace) {
    __shared__ float red[2][CH][8];
    __shared__ float red32[32];
    __shared__ unsigned rank_sh;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t G = gridDim.x, bx = blockIdx.x;
    int64_t b0 = inter ? bx : nblocks * bx / G, step = inter ? G : 1;
    int64_t cnt = inter ? (nblocks - bx + G - 1) / G : nblocks * (bx + 1) / G - b0;
    op_trace(trace, 0);
    unsigned ticket = 0;
    if (RANKED) {
        if (tid == 0) ticket = atomicAdd(tickets, 1u);
        b0 = bx;  // block i > 0 is b0 + i - 1 once the rank is known (below)
        cnt = bx < nblocks ? 1 : 0;
        step = 1;
    }
    auto blk = [&](int64_t i) { return RANKED ? (i == 0 ? bx : b0 + i - 1) : b0 + i * step; };
    uint4 a[CH], c[CH];
    uint32_t acc = 0;
    float xr[8], nw[8];
    int par = 0;
    auto load = [&](uint4(&d)[CH], int64_t i) {
        const uint4 *src = w + blk(i) * (CH * 256) + tid;
#pragma unroll
        for (int k = 0; k < CH; ++k) d[k] = ld_stream(src + k * 256);
    };
    auto use = [&](const uint4(&d)[CH], int64_t i) {
        if constexpr (WORK == 0) {
#pragma unroll
            for (int k = 0; k < CH; ++k) acc ^= d[k].x ^ d[k].y ^ d[k].z ^ d[k].w;
        } else {
            const int64_t row0 = blk(i) * CH;
            float y[CH];
#pragma unroll
            for (int k = 0; k < CH; ++k) y[k] = warp_sum(fma8(d[k], xr, 0.f));
            if constexpr (WORK == 1) {
                if (tid == 0)
#pragma unroll
                    for (int k = 0; k < CH; ++k) out[row0 + k] = y[k];
            } else {
                if (lane == 0)
#pragma unroll
                    for (int k = 0; k < CH; ++k) red[par][k][warp] = y[k];
                __syncthreads();
                if (tid < CH) {
                    float t = 0.f;
                    for (int v = 0; v < 8; ++v) t += red[par][tid][v];
                    out[row0 + tid] = t;
                }
                par ^= 1;
            }
        }
    };
    if (WORK >= 3)
#pragma unroll
        for (int e = 0; e < 8; ++e) nw[e] = ld_keep(norm + tid * 8 + e);
    if (cnt > 0) load(a, 0);
    if (AHEAD > 1 && cnt > 1) load(c, 1);
    pdl_wait();
    pdl_trigger();
    op_trace(trace, 1);
    float ss = 0.f;
    if constexpr (WORK == 0) {
        ss = dep_read<DEP>(in, reps);
    } else {
        const float4 x0 = __ldcg(reinterpret_cast<const float4 *>(in) + 2 * tid);
        const float4 x1 = __ldcg(reinterpret_cast<const float4 *>(in) + 2 * tid + 1);
        xr[0] = x0.x, xr[1] = x0.y, xr[2] = x0.z, xr[3] = x0.w, xr[4] = x1.x, xr[5] = x1.y, xr[6] = x1.z, xr[7] = x1.w;
        if constexpr (WORK >= 3) {
            float q = 0.f;
#pragma unroll
            for (int e = 0; e < 8; ++e) q += xr[e] * xr[e];
            const float inv = rsqrtf(block_sum(q, red32) / 2048.f + 1e-6f);
#pragma unroll
            for (int e = 0; e < 8; ++e) xr[e] *= inv * nw[e];
        }
    }
    // Input ready: the stamp waits for thread 0's input values (it reads them).
    if (trace) {
        float probe = ss;
        if constexpr (WORK > 0) probe = xr[0] + xr[7];
        if (probe != 1.2345e-30f) op_trace(trace, 2);
    }
    if (RANKED) {
        if (tid == 0) rank_sh = ticket % unsigned(G);
        __syncthreads();
        const int64_t pool = nblocks > G ? nblocks - G : 0;
        auto edge = [&](int64_t k) {
            const float x = float(k) / float(G);
            return k >= G ? pool : int64_t(float(pool) * (x + skew * x * (1.f - x)));
        };
        const int64_t r = rank_sh;
        b0 = G + edge(r);
        cnt += edge(r + 1) - edge(r);
    }
    for (int64_t i = 0; i < cnt; i += 2) {
        if (AHEAD == 1 && i + 1 < cnt) load(c, i + 1);
        use(a, i);
        if (i + 1 >= cnt) break;
        if (i + 2 < cnt) load(a, i + 2);
        use(c, i + 1);
        if (AHEAD > 1 && i + 3 < cnt) load(c, i + 3);
    }
    if (acc == 0x12345678u) atomicAdd(sink, 1ull);
    if (WORK == 0 && DEP && tid == 0) out[bx] = ss * 1e-30f + float(acc & 1u);
    op_trace(trace, 3);
}

template <bool DEP>
__global__ void __launch_bounds__(256) chain_state(float4 *s, int64_t n, const float *in, float *out,
                                                   unsigned long long *trace) {
    op_trace(trace, 0);
    const int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = i0 + k * stride < n ? __ldcg(s + i0 + k * stride) : make_float4(0, 0, 0, 0);
    pdl_wait();
    pdl_trigger();
    op_trace(trace, 1);
    const float ss = dep_read<DEP>(in);
    if (trace && ss != 1.2345e-30f) op_trace(trace, 2);
#pragma unroll
    for (int k = 0; k < 4; ++k)
        if (i0 + k * stride < n) __stcg(s + i0 + k * stride, make_float4(v[k].x * 0.5f + ss * 1e-30f, v[k].y, v[k].z, v[k].w));
    if (DEP && threadIdx.x == 0) out[blockIdx.x] = ss * 1e-30f;
    op_trace(trace, 3);
}


// A split-K hand-off instead of a grid-wide one. A GEMV whose input is produced inside the same
// kernel (down after gate_up's SwiGLU, o_proj after the recurrence and head norm) can take its
// weights transposed: each CTA then multiplies its own share of the input (the h_j it computed)
// into every output row, accumulates the 2048 outputs as partial sums (8 per thread), and adds them
// into the output vector at the end; no CTA ever waits for another inside the kernel, and the
// layer loses the kernel boundary in front of that GEMV. This kernel streams one contiguous range
// of weights (the two fused matrices) with the GEMV's pattern, optionally reads and writes the
// layer's state first (the recurrence), does 8 FMAs per weight into the thread's partial sums, and
// ends with the reduction under test:
//   RED 0  none (one value per CTA stored: the structure alone);
//   RED 1  fp32 vector atomics, 2048 floats per CTA (order-dependent rounding), into out_reps copies
//          that the consumer adds (in_reps of the next kernel);
//   RED 2  int64 fixed-point atomics (2^-24 units), 2048 per CTA: order-independent, bitwise
//          reproducible;
//   RED 4  one bulk reduction (cp.reduce.async.bulk .add.f32) of the CTA's 8 KB of partial sums,
//          into out_reps copies as RED 1;
//   RED 3  the CTAs of a cluster (CLUSTER of them) add their partial sums through distributed
//          shared memory in rank order, then fp32 atomics, 2048 per cluster.
// FMA false: the loads only (XOR of the words, as stream_blocks' WORK 0), for a diagnostic row.
template <int RED, int CLUSTER = 1, bool FMA = true>
__global__ void __launch_bounds__(256) stream_splitk(const uint4 *w, int64_t nblocks, float4 *state, int64_t n4,
                                                     const float *in, float *out, int in_reps, int out_reps) {
    constexpr int CH = 8;
    __shared__ __align__(128) float part[RED >= 3 ? 2048 : 1];
    const int tid = threadIdx.x;
    const int64_t G = gridDim.x, bx = blockIdx.x;
    const int64_t b0 = nblocks * bx / G, cnt = nblocks * (bx + 1) / G - b0;
    const int64_t si0 = bx * 256 + tid, sstride = G * 256;
    uint4 a[CH], c[CH];
    float4 sv[4];
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    auto load = [&](uint4(&d)[CH], int64_t i) {
        const uint4 *src = w + (b0 + i) * (CH * 256) + tid;
#pragma unroll
        for (int k = 0; k < CH; ++k) d[k] = ld_stream(src + k * 256);
    };
    if (state)
#pragma unroll
        for (int k = 0; k < 4; ++k) sv[k] = si0 + k * sstride < n4 ? __ldcg(state + si0 + k * sstride) : make_float4(0, 0, 0, 0);
    if (cnt > 0) load(a, 0);
    pdl_wait();
    pdl_trigger();
    const float ss = dep_read<true>(in, in_reps);
    if (state)
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (si0 + k * sstride < n4)
                __stcg(state + si0 + k * sstride, make_float4(sv[k].x * 0.5f + ss * 1e-30f, sv[k].y, sv[k].z, sv[k].w));
    const float h = 1.f + ss * 1e-30f;
    uint32_t bits = 0;
    auto use = [&](const uint4(&d)[CH]) {
        if constexpr (!FMA) {
#pragma unroll
            for (int k = 0; k < CH; ++k) bits ^= d[k].x ^ d[k].y ^ d[k].z ^ d[k].w;
        } else {
#pragma unroll
            for (int k = 0; k < CH; ++k) {
                const float hk = h * float(k + 1);
                acc[0] = fmaf(bf16_lo(d[k].x), hk, acc[0]);
                acc[1] = fmaf(bf16_hi(d[k].x), hk, acc[1]);
                acc[2] = fmaf(bf16_lo(d[k].y), hk, acc[2]);
                acc[3] = fmaf(bf16_hi(d[k].y), hk, acc[3]);
                acc[4] = fmaf(bf16_lo(d[k].z), hk, acc[4]);
                acc[5] = fmaf(bf16_hi(d[k].z), hk, acc[5]);
                acc[6] = fmaf(bf16_lo(d[k].w), hk, acc[6]);
                acc[7] = fmaf(bf16_hi(d[k].w), hk, acc[7]);
            }
        }
    };
    for (int64_t i = 0; i < cnt; i += 2) {
        if (i + 1 < cnt) load(c, i + 1);
        use(a);
        if (i + 1 >= cnt) break;
        if (i + 2 < cnt) load(a, i + 2);
        use(c);
    }
    if constexpr (RED == 0) {
        // every partial sum feeds the stored value, or the compiler drops FMAs and the loads' overlap
        float t = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) t += acc[e];
        t = warp_sum(t);
        if (tid == 0) out[bx] = t * 1e-30f + float(bits & 1u);
    } else if constexpr (RED == 1) {
        // out_reps copies of the output, CTA b adding into copy b mod out_reps
        float4 *o = reinterpret_cast<float4 *>(out + (bx % out_reps) * 2048);
        atomicAdd(o + 2 * tid, make_float4(acc[0], acc[1], acc[2], acc[3]));
        atomicAdd(o + 2 * tid + 1, make_float4(acc[4], acc[5], acc[6], acc[7]));
    } else if constexpr (RED == 2) {
        unsigned long long *o = reinterpret_cast<unsigned long long *>(out) + 8 * tid;
#pragma unroll
        for (int e = 0; e < 8; ++e) atomicAdd(o + e, (unsigned long long)__float2ll_rn(acc[e] * 16777216.f));
    } else if constexpr (RED == 4) {
        // One bulk reduction of the CTA's 8 KB of partial sums, performed by the copy engine into
        // copy bx mod out_reps.
#pragma unroll
        for (int e = 0; e < 8; ++e) part[8 * tid + e] = acc[e];
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        if (tid == 0) {
            float *dst = out + (bx % out_reps) * 2048;
            const unsigned src = unsigned(__cvta_generic_to_shared(part));
            asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], 8192;"
                         ::"l"(dst), "r"(src) : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
        }
    } else {
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
#pragma unroll
        for (int e = 0; e < 8; ++e) part[8 * tid + e] = acc[e];
        cl.sync();
        constexpr int kSlice = 2048 / CLUSTER;
        const int r = int(cl.block_rank());
        for (int i = tid; i < kSlice; i += 256) {
            float t = 0.f;
#pragma unroll
            for (int q = 0; q < CLUSTER; ++q) t += cl.map_shared_rank(part, q)[r * kSlice + i];
            atomicAdd(out + r * kSlice + i, t);
        }
        cl.sync();  // the other CTAs' shared memory must outlive their reads
    }
}

}  // namespace step_floor
