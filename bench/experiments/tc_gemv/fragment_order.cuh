// The weight layout and register fragments of the tensor-core GEMVs over fragment-ordered weights
// (tc_gemv/tc_gemv.cu, tc_ring/tc_ring.cu): mma.sync.m16n8k16 with the weights as A (16 rows x 16 k)
// and the tokens as B (16 k x 8 columns), bf16 operands, fp32 accumulators. Device code only.
//
// Inside a 16x16 tile the k order is permuted, the same way for W and x (so a sum runs over the same
// products): MMA k (2t, 2t+1, 2t+8, 2t+9) of lane group t = lane % 4 is physical k 4t..4t+3. A lane's
// A fragment of one tile is then one uint4 of the permuted weights, and its B fragment of one token
// one float4 of x read straight from the fp32 inputs.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

namespace specla {
namespace tcx {

// Once, at load: Wp[rt][kt][lane] = uint4 {W[r0+g][k0+4t..+1], W[r0+g+8][k0+4t..+1],
// W[r0+g][k0+4t+2..+3], W[r0+g+8][k0+4t+2..+3]} (g = lane/4, t = lane%4, r0 = 16 rt, k0 = 16 kt),
// rows past `rows` zero. One tile is 512 contiguous bytes, and the k-tiles of one row tile follow
// each other, so any run of them is one contiguous block (one bulk copy). K must be a multiple of 16.
__global__ void permute_weights(const uint16_t *W, int64_t rows, int64_t K, uint4 *Wp) {
    const int64_t KT = K / 16, RT = (rows + 15) / 16;
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= RT * KT * 32) return;
    const int lane = int(i & 31), g = lane >> 2, t = lane & 3;
    const int64_t kt = (i >> 5) % KT, rt = (i >> 5) / KT;
    const int64_t r0 = rt * 16 + g, r1 = r0 + 8, k = kt * 16 + 4 * t;
    auto pair = [&](int64_t r, int64_t c) -> uint32_t {
        if (r >= rows) return 0u;
        return uint32_t(W[r * K + c]) | (uint32_t(W[r * K + c + 1]) << 16);
    };
    Wp[i] = make_uint4(pair(r0, k), pair(r1, k), pair(r0, k + 2), pair(r1, k + 2));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo_elem, float hi_elem) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi_elem), "f"(lo_elem));
    return r;
}
__device__ __forceinline__ float bf16lo_f(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16hi_f(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// The B fragments of one token's 4 inputs (k 4t..4t+3): each fp32 input split into a bf16 pair,
// hi = bf16(x) and lo = bf16(x - hi) (x - hi is exact), so that W*hi + W*lo is W*x to about 2^-16.
__device__ __forceinline__ void split_x(float4 v, uint32_t (&hi)[2], uint32_t (&lo)[2]) {
    hi[0] = pack_bf16x2(v.x, v.y);
    hi[1] = pack_bf16x2(v.z, v.w);
    lo[0] = pack_bf16x2(v.x - bf16lo_f(hi[0]), v.y - bf16hi_f(hi[0]));
    lo[1] = pack_bf16x2(v.z - bf16lo_f(hi[1]), v.w - bf16hi_f(hi[1]));
}

// c += A * B, A = one permuted weight tile (this lane's uint4), B = this lane's two bf16x2 words.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint4 a, const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b[0]), "r"(b[1]));
}

}  // namespace tcx
}  // namespace specla
