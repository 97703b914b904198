// bench_step_floor: streaming reads of the step's weights without arithmetic: one kernel over all
// of them, the GEMV's access pattern, and the kernel chain of a step (one kernel per matrix and one
// per layer's state, programmatic dependent launch). Included by bench_step_floor.cu only.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "device_common.cuh"

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

// The GEMV's access pattern without its arithmetic: blocks of CH x 4 KB (CH rows of 2048 bf16), one
// 16-byte chunk per thread and row, the next block loaded before the current one is used. A CTA
// takes a contiguous share of the blocks (as the GEMV's rows) or every gridDim.x-th block.
template <int CH>
__global__ void __launch_bounds__(256) read_blocks(const uint4 *w, int64_t nblocks, int inter, unsigned long long *sink) {
    const int64_t G = gridDim.x, bx = blockIdx.x;
    const int64_t b0 = inter ? bx : nblocks * bx / G, step = inter ? G : 1;
    const int64_t cnt = inter ? (nblocks - bx + G - 1) / G : nblocks * (bx + 1) / G - b0;
    uint4 a[CH], c[CH];
    uint32_t acc = 0;
    auto load = [&](uint4(&d)[CH], int64_t blk) {
        const uint4 *src = w + blk * (CH * 256) + threadIdx.x;
#pragma unroll
        for (int i = 0; i < CH; ++i) d[i] = ld_stream(src + i * 256);
    };
    auto use = [&](const uint4(&d)[CH]) {
#pragma unroll
        for (int i = 0; i < CH; ++i) acc ^= d[i].x ^ d[i].y ^ d[i].z ^ d[i].w;
    };
    if (cnt > 0) load(a, b0);
    for (int64_t i = 0; i < cnt; i += 2) {
        if (i + 1 < cnt) load(c, b0 + (i + 1) * step);
        use(a);
        if (i + 1 >= cnt) break;
        if (i + 2 < cnt) load(a, b0 + (i + 2) * step);
        use(c);
    }
    if (acc == 0x12345678u) atomicAdd(sink, 1ull);
}

// The step's kernel chain without arithmetic or data: one kernel per weight matrix (the GEMV's
// pattern, 32 KB blocks, contiguous shares, 2 CTAs per SM) and one per layer that reads and writes
// the layer's recurrent state, in the order of a decoding step; with programmatic dependent launch
// the first block is loaded before the grid-dependency wait, as the engine's GEMV does.
template <int CH, int AHEAD>
__global__ void __launch_bounds__(256) chain_read(const uint4 *w, int64_t nblocks, unsigned long long *sink) {
    const int64_t G = gridDim.x, bx = blockIdx.x;
    const int64_t b0 = nblocks * bx / G, cnt = nblocks * (bx + 1) / G - b0;
    uint4 a[CH], c[CH];
    uint32_t acc = 0;
    auto load = [&](uint4(&d)[CH], int64_t blk) {
        const uint4 *src = w + blk * (CH * 256) + threadIdx.x;
#pragma unroll
        for (int i = 0; i < CH; ++i) d[i] = ld_stream(src + i * 256);
    };
    auto use = [&](const uint4(&d)[CH]) {
#pragma unroll
        for (int i = 0; i < CH; ++i) acc ^= d[i].x ^ d[i].y ^ d[i].z ^ d[i].w;
    };
    // AHEAD blocks (1 or 2) before the grid-dependency wait.
    if (cnt > 0) load(a, b0);
    if (AHEAD > 1 && cnt > 1) load(c, b0 + 1);
    pdl_wait();
    pdl_trigger();
    for (int64_t i = 0; i < cnt; i += 2) {
        if (AHEAD == 1 && i + 1 < cnt) load(c, b0 + i + 1);
        use(a);
        if (i + 1 >= cnt) break;
        if (i + 2 < cnt) load(a, b0 + i + 2);
        use(c);
        if (AHEAD > 1 && i + 3 < cnt) load(c, b0 + i + 3);
    }
    if (acc == 0x12345678u) atomicAdd(sink, 1ull);
}
__global__ void __launch_bounds__(256) chain_state(float4 *s, int64_t n) {
    const int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = i0 + k * stride < n ? __ldcg(s + i0 + k * stride) : make_float4(0, 0, 0, 0);
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int k = 0; k < 4; ++k)
        if (i0 + k * stride < n) __stcg(s + i0 + k * stride, make_float4(v[k].x * 0.5f, v[k].y, v[k].z, v[k].w));
}

}  // namespace step_floor
