#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SPECLA_CPU_AVX2 1
#endif

namespace specla {
namespace cpu {
namespace {

#ifdef SPECLA_CPU_AVX2
inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}
inline __m256 load8(const float *p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t *p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

inline float to_f32(float v) { return v; }
inline float to_f32(uint16_t v) {
    uint32_t bits = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// A register tile: R rows of X against O consecutive weight rows, acc[r][o] = dot(W[o], X[r]).
// R and O are compile-time constants so the R*O accumulators stay in registers; each weight
// vector is loaded once for all R rows and each X vector once for all O outputs. Independent
// accumulators also hide the FMA latency when R == 1 (decoding).
template <int R, int O, typename T>
inline void dot_tile(const T *W, int64_t ldw, const float *X, int64_t ldx, int64_t len, float (&acc)[R][O]) {
    int64_t i = 0;
#ifdef SPECLA_CPU_AVX2
    __m256 s[R][O];
    for (int r = 0; r < R; ++r)
        for (int o = 0; o < O; ++o) s[r][o] = _mm256_setzero_ps();
    for (; i + 8 <= len; i += 8) {
        __m256 wv[O];
        for (int o = 0; o < O; ++o) wv[o] = load8(W + o * ldw + i);
        for (int r = 0; r < R; ++r) {
            const __m256 xv = load8(X + r * ldx + i);
            for (int o = 0; o < O; ++o) s[r][o] = _mm256_fmadd_ps(wv[o], xv, s[r][o]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int o = 0; o < O; ++o) acc[r][o] = hsum(s[r][o]);
#else
    for (int r = 0; r < R; ++r)
        for (int o = 0; o < O; ++o) acc[r][o] = 0.f;
#endif
    for (; i < len; ++i)
        for (int o = 0; o < O; ++o) {
            const float wv = to_f32(W[o * ldw + i]);
            for (int r = 0; r < R; ++r) acc[r][o] += wv * X[r * ldx + i];
        }
}

// Y rows [r0, r0+R) for outputs [o, o+O).
template <int R, int O, typename T>
inline void tile(const T *W, int64_t cols, int64_t o, int64_t o0, const float *X, int64_t r0, int64_t ldx, float *Y,
                 int64_t ldy) {
    float acc[R][O];
    dot_tile<R, O>(W + o * cols, cols, X + r0 * ldx, ldx, cols, acc);
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < O; ++q) Y[(r0 + r) * ldy + (o - o0) + q] = acc[r][q];
}

template <int O, typename T>
inline void rows_tail(const T *W, int64_t cols, int64_t o, int64_t o0, const float *X, int64_t r0, int64_t rows,
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

template <typename T>
void linear_typed(const T *W, int64_t cols, int64_t o0, int64_t o1, const float *X, int64_t n, int64_t ldx,
                  float *Y, int64_t ldy, ThreadPool &pool) {
    const int64_t outs = o1 - o0;
    // Small problems run on the calling thread: a fork-join costs more than it saves.
    const bool parallel = pool.size() > 1 && outs * cols * n >= (1 << 15);
    // Rows are taken in chunks so that a chunk of X stays in cache while the weights stream by.
    constexpr int64_t kRowChunk = 32;
    // Output groups: 4 per step when decoding one row, 2 per step under a 6-row tile.
    const int64_t group = n == 1 ? 4 : 2;
    const int64_t groups = outs / group;
    for (int64_t c0 = 0; c0 < n; c0 += kRowChunk) {
        const int64_t c1 = std::min(n, c0 + kRowChunk);
        auto body = [&](int64_t g_begin, int64_t g_end) {
          for (int64_t g = g_begin; g < g_end; ++g) {
            const int64_t o = o0 + g * group;
            const int64_t width = std::min(group, o1 - o);
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
        };
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

float dot(const float *a, const float *b, int64_t n) {
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
