// Dense primitives of the CPU engine: the fp32 reference arithmetic every other backend is
// compared with, vectorised (baseline ISA, plus an x86-64-v3 clone of the hot kernels chosen at run
// time: cpu_simd.h) and threaded on the engine's thread pool.
#pragma once

#include <cstdint>

#include "model/weights.h"
#include "util/thread_pool.h"

namespace specla {
namespace cpu {

// BF16 matrices are read by linear() in a packed order (cpu_simd.h, load_block_half): the CPU
// backend packs its copy of the weights once; a packed row is read back with packed_row_to_f32.
// F32 matrices are left as they are; a matrix already packed (Matrix::packed) too.
void pack_bf16_blocks(Matrix &W);
void packed_row_to_f32(const Matrix &W, int64_t r, float *out);

// Y[r, o] = sum_i W[o, i] * X[r, i] for r < n rows and the output rows [o0, o1) of W (packed).
// X rows are `ldx` floats apart, Y rows `ldy` floats apart; Y[r, o] is written at Y + r*ldy + (o - o0).
void linear(const Matrix &W, int64_t o0, int64_t o1, const float *X, int64_t n, int64_t ldx, float *Y,
            int64_t ldy, ThreadPool &pool);

inline void linear(const Matrix &W, const float *X, int64_t n, float *Y, ThreadPool &pool) {
    linear(W, 0, W.rows, X, n, W.cols, Y, W.rows, pool);
}

float dot(const float *a, const float *b, int64_t n);

// out = x / sqrt(mean(x^2) + eps) * w   (out may alias x)
void rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out);

inline float sigmoid(float x) { return 1.f / (1.f + __builtin_expf(-x)); }
inline float silu(float x) { return x * sigmoid(x); }
inline float softplus(float x) { return x > 20.f ? x : __builtin_log1pf(__builtin_expf(x)); }

}  // namespace cpu
}  // namespace specla
