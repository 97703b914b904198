// Host-side pieces of the standalone tensor-core GEMV benchmarks (tc_gemv/tc_gemv.cu,
// tc_ring/tc_ring.cu): error checks, the random bf16 weights, bf16 -> float on the host.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Every CUDA call and launch: a failure ends the program with a FAIL line (exit code 1).
#define CK(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            const char *f_ = strrchr(__FILE__, '/');                                                \
            printf("FAIL: %s:%d %s: %s\n", f_ ? f_ + 1 : __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            fflush(stdout);                                                                         \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

namespace specla {
namespace tcx {

// Uniform bf16 values in [-scale, scale), a hash of the index and the seed (one seed per layer copy).
__global__ void fill_bf16(uint16_t *w, int64_t n, uint32_t seed, float scale) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        uint32_t h = uint32_t(i) * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        const float v = (float(h & 0xffffff) / float(0x1000000) * 2.f - 1.f) * scale;
        w[i] = uint16_t(__float_as_uint(v) >> 16);
    }
}

inline float bf16f(uint16_t v) {
    uint32_t u = uint32_t(v) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

}  // namespace tcx
}  // namespace specla
