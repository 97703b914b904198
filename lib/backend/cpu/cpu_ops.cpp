#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_simd.h"

namespace specla {
namespace cpu {
namespace {

using simd::f32x8;
using simd::kLanes;

SPECLA_CPU_INLINE float to_f32(float v) { return v; }
SPECLA_CPU_INLINE float to_f32(uint16_t v) {
    uint32_t bits = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// One half (8 values) of a block of 16 at column i, into the tile's accumulators.
template <int Half, int R, int O, typename T>
SPECLA_CPU_INLINE void fma_half(const T *W, int64_t ldw, const float *X, int64_t ldx, int64_t i, f32x8 (&s)[R][O]) {
    f32x8 wv[O];
    for (int o = 0; o < O; ++o) wv[o] = simd::load_block_half<Half>(W + o * ldw + i);
    for (int r = 0; r < R; ++r) {
        const f32x8 xv = simd::load8(X + r * ldx + i + Half * kLanes);
        for (int o = 0; o < O; ++o) s[r][o] += wv[o] * xv;
    }
}

// A register tile: R rows of X against O consecutive weight rows, acc[r][o] = dot(W[o], X[r]).
// R and O are compile-time constants so the R*O accumulators stay in registers; each weight
// vector is loaded once for all R rows and each X vector once for all O outputs. Independent
// accumulators also hide the FMA latency when R == 1 (decoding). The columns past the last full
// block (not packed) are summed one by one.
template <int R, int O, typename T>
SPECLA_CPU_INLINE void dot_tile(const T *W, int64_t ldw, const float *X, int64_t ldx, int64_t len,
                                float (&acc)[R][O]) {
    int64_t i = 0;
    f32x8 s[R][O];
    for (int r = 0; r < R; ++r)
        for (int o = 0; o < O; ++o) s[r][o] = f32x8{};
    for (; i + simd::kBlock <= len; i += simd::kBlock) {
        fma_half<0>(W, ldw, X, ldx, i, s);
        fma_half<1>(W, ldw, X, ldx, i, s);
    }
    for (int r = 0; r < R; ++r)
        for (int o = 0; o < O; ++o) acc[r][o] = simd::hsum(s[r][o]);
    for (; i < len; ++i)
        for (int o = 0; o < O; ++o) {
            const float wv = to_f32(W[o * ldw + i]);
            for (int r = 0; r < R; ++r) acc[r][o] += wv * X[r * ldx + i];
        }
}

// Y rows [r0, r0+R) for outputs [o, o+O).
template <int R, int O, typename T>
SPECLA_CPU_INLINE void tile(const T *W, int64_t cols, int64_t o, int64_t o0, const float *X, int64_t r0, int64_t ldx, float *Y,
                 int64_t ldy) {
    float acc[R][O];
    dot_tile<R, O>(W + o * cols, cols, X + r0 * ldx, ldx, cols, acc);
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < O; ++q) Y[(r0 + r) * ldy + (o - o0) + q] = acc[r][q];
}

template <int O, typename T>
SPECLA_CPU_INLINE void rows_tail(const T *W, int64_t cols, int64_t o, int64_t o0, const float *X, int64_t r0, int64_t rows,
                      int64_t ldx, float *Y, int64_t ldy) {
    switch (rows) {
        case 5: tile<5, O>(W, cols, o, o0, X, r0, ldx, Y, ldy); break;
        case 4: tile<4, O>(W, cols, o, o0, X, r0, ldx, Y, ldy); break;
        case 3: tile<3, O>(W, cols, o, o0, X, r0, ldx, Y, ldy); break;
        case 2: tile<2, O>(W, cols, o, o0, X, r0, ldx, Y, ldy); break;
        case 1: tile<1, O>(W, cols, o, o0, X, r0, ldx, Y, ldy); break;
        default: break;
    }
}

// The work one thread takes: output groups [g_begin, g_end) of the rows [c0, c1).
struct LinearJob {
    int64_t cols, o0, o1;
    const float *X;
    int64_t ldx;
    float *Y;
    int64_t ldy;
    int64_t c0, c1;
    int64_t group;  // outputs per group: 4 when decoding one row, 2 under a 6-row tile
};

template <typename T>
SPECLA_CPU_INLINE void linear_groups(const T *W, const LinearJob &j, int64_t g_begin, int64_t g_end) {
    const int64_t cols = j.cols, o0 = j.o0, ldx = j.ldx, ldy = j.ldy, c0 = j.c0, c1 = j.c1;
    const float *X = j.X;
    float *Y = j.Y;
    for (int64_t g = g_begin; g < g_end; ++g) {
        const int64_t o = o0 + g * j.group;
        const int64_t width = std::min(j.group, j.o1 - o);
        if (width <= 0) continue;
        if (width == 4) {
            tile<1, 4>(W, cols, o, o0, X, c0, ldx, Y, ldy);  // n == 1
        } else if (width == 2) {
            int64_t r = c0;
            for (; r + 6 <= c1; r += 6) tile<6, 2>(W, cols, o, o0, X, r, ldx, Y, ldy);
            rows_tail<2>(W, cols, o, o0, X, r, c1 - r, ldx, Y, ldy);
        } else {  // the last 1..3 outputs, one at a time
            for (int64_t q = o; q < o + width; ++q) {
                int64_t r = c0;
                for (; r + 6 <= c1; r += 6) tile<6, 1>(W, cols, q, o0, X, r, ldx, Y, ldy);
                rows_tail<1>(W, cols, q, o0, X, r, c1 - r, ldx, Y, ldy);
            }
        }
    }
}

// The dispatched kernels: one per weight type (target_clones takes no templates).
SPECLA_CPU_KERNEL void linear_groups_f32(const float *W, const LinearJob &j, int64_t g_begin, int64_t g_end) {
    linear_groups(W, j, g_begin, g_end);
}
SPECLA_CPU_KERNEL void linear_groups_bf16(const uint16_t *W, const LinearJob &j, int64_t g_begin, int64_t g_end) {
    linear_groups(W, j, g_begin, g_end);
}
void linear_groups_of(const float *W, const LinearJob &j, int64_t g0, int64_t g1) { linear_groups_f32(W, j, g0, g1); }
void linear_groups_of(const uint16_t *W, const LinearJob &j, int64_t g0, int64_t g1) { linear_groups_bf16(W, j, g0, g1); }

template <typename T>
void linear_typed(const T *W, int64_t cols, int64_t o0, int64_t o1, const float *X, int64_t n, int64_t ldx,
                  float *Y, int64_t ldy, ThreadPool &pool) {
    const int64_t outs = o1 - o0;
    // Small problems run on the calling thread: a fork-join costs more than it saves.
    const bool parallel = pool.size() > 1 && outs * cols * n >= (1 << 15);
    // Rows are taken in chunks so that a chunk of X stays in cache while the weights stream by.
    constexpr int64_t kRowChunk = 32;
    const int64_t group = n == 1 ? 4 : 2;
    const int64_t groups = outs / group;
    for (int64_t c0 = 0; c0 < n; c0 += kRowChunk) {
        const LinearJob job{cols, o0, o1, X, ldx, Y, ldy, c0, std::min(n, c0 + kRowChunk), group};
        auto body = [&](int64_t g_begin, int64_t g_end) { linear_groups_of(W, job, g_begin, g_end); };
        if (parallel) pool.parallel_for(groups + 1, body);
        else body(0, groups + 1);
    }
}

}  // namespace

void linear(const Matrix &W, int64_t o0, int64_t o1, const float *X, int64_t n, int64_t ldx, float *Y,
            int64_t ldy, ThreadPool &pool) {
    if (W.type == WeightType::F32)
        linear_typed(W.f32.data(), W.cols, o0, o1, X, n, ldx, Y, ldy, pool);
    else
        linear_typed(W.bf16.data(), W.cols, o0, o1, X, n, ldx, Y, ldy, pool);
}

void pack_bf16_blocks(Matrix &W) {
    if (W.type != WeightType::BF16 || W.packed) return;
    W.packed = true;
    uint16_t block[simd::kBlock];
    for (int64_t r = 0; r < W.rows; ++r) {
        uint16_t *row = W.bf16.data() + r * W.cols;
        for (int64_t b = 0; b + simd::kBlock <= W.cols; b += simd::kBlock) {
            for (int k = 0; k < kLanes; ++k) {
                block[2 * k] = row[b + k];
                block[2 * k + 1] = row[b + kLanes + k];
            }
            std::memcpy(row + b, block, sizeof block);
        }
    }
}

void packed_row_to_f32(const Matrix &W, int64_t r, float *out) {
    if (W.type != WeightType::BF16 || !W.packed) return W.row_to_f32(r, out);
    const uint16_t *row = W.bf16.data() + r * W.cols;
    int64_t b = 0;
    for (; b + simd::kBlock <= W.cols; b += simd::kBlock)
        for (int k = 0; k < kLanes; ++k) {
            out[b + k] = to_f32(row[b + 2 * k]);
            out[b + kLanes + k] = to_f32(row[b + 2 * k + 1]);
        }
    for (; b < W.cols; ++b) out[b] = to_f32(row[b]);
}

SPECLA_CPU_KERNEL float dot(const float *a, const float *b, int64_t n) {
    float acc[1][1];
    dot_tile<1, 1>(a, 0, b, 0, n, acc);
    return acc[0][0];
}

void rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
    const float inv = 1.f / std::sqrt(float(ss / double(n)) + eps);
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
}

}  // namespace cpu
}  // namespace specla
