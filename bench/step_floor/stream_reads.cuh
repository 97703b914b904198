// bench_step_floor: streaming reads of the step's weights without arithmetic: one kernel over all
// of them, the GEMV's access pattern, and the kernel chain of a step (one kernel per matrix and one
// per layer's state, programmatic dependent launch). Included by bench_step_floor.cu only.
#pragma once

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
template <bool DEP>
__device__ __forceinline__ float dep_read(const float *in) {
    if (!DEP) return 0.f;
    __shared__ float red[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float4 a = __ldcg(reinterpret_cast<const float4 *>(in) + threadIdx.x);
    const float4 b = __ldcg(reinterpret_cast<const float4 *>(in) + threadIdx.x + 256);
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
template <int CH, int AHEAD, bool DEP, int WORK = 0>
__global__ void __launch_bounds__(256) stream_blocks(const uint4 *w, int64_t nblocks, int inter,
                                                     unsigned long long *sink, const float *in, float *out,
                                                     const float *norm) {
    __shared__ float red[2][CH][8];
    __shared__ float red32[32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t G = gridDim.x, bx = blockIdx.x;
    const int64_t b0 = inter ? bx : nblocks * bx / G, step = inter ? G : 1;
    const int64_t cnt = inter ? (nblocks - bx + G - 1) / G : nblocks * (bx + 1) / G - b0;
    uint4 a[CH], c[CH];
    uint32_t acc = 0;
    float xr[8], nw[8];
    int par = 0;
    auto load = [&](uint4(&d)[CH], int64_t i) {
        const uint4 *src = w + (b0 + i * step) * (CH * 256) + tid;
#pragma unroll
        for (int k = 0; k < CH; ++k) d[k] = ld_stream(src + k * 256);
    };
    auto use = [&](const uint4(&d)[CH], int64_t i) {
        if constexpr (WORK == 0) {
#pragma unroll
            for (int k = 0; k < CH; ++k) acc ^= d[k].x ^ d[k].y ^ d[k].z ^ d[k].w;
        } else {
            const int64_t row0 = (b0 + i * step) * CH;
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
    float ss = 0.f;
    if constexpr (WORK == 0) {
        ss = dep_read<DEP>(in);
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
}

template <bool DEP>
__global__ void __launch_bounds__(256) chain_state(float4 *s, int64_t n, const float *in, float *out) {
    const int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = i0 + k * stride < n ? __ldcg(s + i0 + k * stride) : make_float4(0, 0, 0, 0);
    pdl_wait();
    pdl_trigger();
    const float ss = dep_read<DEP>(in);
#pragma unroll
    for (int k = 0; k < 4; ++k)
        if (i0 + k * stride < n) __stcg(s + i0 + k * stride, make_float4(v[k].x * 0.5f + ss * 1e-30f, v[k].y, v[k].z, v[k].w));
    if (DEP && threadIdx.x == 0) out[blockIdx.x] = ss * 1e-30f;
}

}  // namespace step_floor
