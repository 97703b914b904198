#include "backend/cpu/cpu_gdn.h"

#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"

namespace specla {
namespace cpu {

SPECLA_CPU_KERNEL void gdn_step(float *S, int K, int V, const float *q, const float *k, const float *v, float beta, float g,
              float *o, float *u_out) {
    const float decay = std::exp(g);
    // Pass 1: decay the state and form S^T k in the same sweep over its rows.
    float kv[1024];
    float *acc = V <= 1024 ? kv : new float[size_t(V)];
    for (int j = 0; j < V; ++j) acc[j] = 0.f;
    for (int i = 0; i < K; ++i) {
        float *row = S + size_t(i) * V;
        const float ki = k[i];
#pragma omp simd
        for (int j = 0; j < V; ++j) {
            row[j] *= decay;
            acc[j] += ki * row[j];
        }
    }
    // u = beta (v - S^T k), kept in acc.
    for (int j = 0; j < V; ++j) acc[j] = beta * (v[j] - acc[j]);
    if (u_out)
        for (int j = 0; j < V; ++j) u_out[j] = acc[j];
    // Pass 2: rank-1 update and the output from the updated state.
    for (int j = 0; j < V; ++j) o[j] = 0.f;
    for (int i = 0; i < K; ++i) {
        float *row = S + size_t(i) * V;
        const float ki = k[i], qi = q[i];
#pragma omp simd
        for (int j = 0; j < V; ++j) {
            row[j] += ki * acc[j];
            o[j] += qi * row[j];
        }
    }
    if (acc != kv) delete[] acc;
}

SPECLA_CPU_KERNEL void gdn_apply_factor(float *S, int K, int V, const float *k, const float *u, float g) {
    // The operations of gdn_step, in its order: the decayed row is rounded and stored first, then
    // k_i u is added to it. One expression `row * decay + ki * u` lets the compiler fuse the decay
    // into an FMA in the x86-64-v3 clone, which leaves other bits than the plain step (the commit
    // must leave exactly the state that step would have: test_cpu_gdn_commit.cpp).
    const float decay = std::exp(g);
    for (int i = 0; i < K; ++i) {
        float *row = S + size_t(i) * V;
        const float ki = k[i];
#pragma omp simd
        for (int j = 0; j < V; ++j) row[j] *= decay;
#pragma omp simd
        for (int j = 0; j < V; ++j) row[j] += ki * u[j];
    }
}

float gdn_beta(float b, bool allow_neg_eigval) {
    const float beta = sigmoid(b);
    return allow_neg_eigval ? 2.f * beta : beta;
}

void l2_normalize(float *x, int n, float scale) {
    float ss = 0.f;
    for (int i = 0; i < n; ++i) ss += x[i] * x[i];
    const float inv = scale / std::sqrt(ss + 1e-6f);
    for (int i = 0; i < n; ++i) x[i] *= inv;
}

void gated_rmsnorm(const float *o, const float *w, const float *z, int V, float eps, float *y) {
    float ss = 0.f;
    for (int j = 0; j < V; ++j) ss += o[j] * o[j];
    const float inv = 1.f / std::sqrt(ss / float(V) + eps);
    for (int j = 0; j < V; ++j) y[j] = o[j] * inv * w[j] * (z ? silu(z[j]) : 1.f);
}

}  // namespace cpu
}  // namespace specla
