#include "backend/cpu/cpu_ops.h"

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

// R rows of X against one weight row w: acc[r] = dot(w, X[r]). R is a compile-time constant so
// the accumulators stay in registers and each weight vector is loaded once for all R rows.
template <int R, typename T>
inline void dot_rows(const T *w, const float *X, int64_t ldx, int64_t len, float *acc) {
    int64_t i = 0;
#ifdef SPECLA_CPU_AVX2
    __m256 s[R];
    for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_ps();
    for (; i + 8 <= len; i += 8) {
        const __m256 wv = load8(w + i);
        for (int r = 0; r < R; ++r) s[r] = _mm256_fmadd_ps(wv, load8(X + r * ldx + i), s[r]);
    }
    for (int r = 0; r < R; ++r) acc[r] = hsum(s[r]);
#else
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
#endif
    for (; i < len; ++i) {
        const float wv = to_f32(w[i]);
        for (int r = 0; r < R; ++r) acc[r] += wv * X[r * ldx + i];
    }
}

template <typename T>
void linear_typed(const T *W, int64_t cols, int64_t o0, int64_t o1, const float *X, int64_t n, int64_t ldx,
                  float *Y, int64_t ldy, int n_threads) {
    const int64_t outs = o1 - o0;
    // Small problems run on the calling thread: a parallel region costs more than it saves.
    const bool parallel = n_threads > 1 && outs * cols * n >= (1 << 15);
#pragma omp parallel for schedule(static) num_threads(n_threads) if (parallel)
    for (int64_t o = o0; o < o1; ++o) {
        const T *w = W + o * cols;
        float acc[4];
        int64_t r = 0;
        for (; r + 4 <= n; r += 4) {
            dot_rows<4>(w, X + r * ldx, ldx, cols, acc);
            for (int k = 0; k < 4; ++k) Y[(r + k) * ldy + (o - o0)] = acc[k];
        }
        for (; r < n; ++r) {
            dot_rows<1>(w, X + r * ldx, ldx, cols, acc);
            Y[r * ldy + (o - o0)] = acc[0];
        }
    }
}

}  // namespace

void linear(const Matrix &W, int64_t o0, int64_t o1, const float *X, int64_t n, int64_t ldx, float *Y,
            int64_t ldy, int n_threads) {
    if (W.type == WeightType::F32)
        linear_typed(W.f32.data(), W.cols, o0, o1, X, n, ldx, Y, ldy, n_threads);
    else
        linear_typed(W.bf16.data(), W.cols, o0, o1, X, n, ldx, Y, ldy, n_threads);
}

float dot(const float *a, const float *b, int64_t n) {
    float acc;
    dot_rows<1>(a, b, 0, n, &acc);
    return acc;
}

void rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
    const float inv = 1.f / std::sqrt(float(ss / double(n)) + eps);
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
}

}  // namespace cpu
}  // namespace specla
