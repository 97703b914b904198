#include "backend/cpu/cpu_tree.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_gdn.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"

namespace specla {
namespace cpu {

void tree_recurrence_hybrid(const TreePlan &plan, const float *S, const HeadInputs &in, const HeadOutputs &out,
                            float *scratch) {
    const size_t KV = size_t(in.K) * size_t(in.V);
    float *work = scratch;
    float *snaps = scratch + KV;
    for (const TreePlan::Chain &c : plan.chains) {
        // Load the chain's starting state once; it stays resident while the chain advances.
        const float *start = c.start_parent < 0 ? S : snaps + size_t(plan.snapshot_slot[size_t(c.start_parent)]) * KV;
        std::memcpy(work, start, KV * sizeof(float));
        for (int32_t v : c.nodes) {
            gdn_step(work, in.K, in.V, in.q + v * in.q_stride, in.k + v * in.k_stride, in.v + v * in.v_stride,
                     in.beta[v * in.gate_stride], in.g[v * in.gate_stride], out.o + v * out.o_stride,
                     out.u + v * out.u_stride);
            const int32_t slot = plan.snapshot_slot[size_t(v)];
            if (slot >= 0) std::memcpy(snaps + size_t(slot) * KV, work, KV * sizeof(float));
        }
    }
}

size_t wy_scratch_floats(int32_t n, int32_t K, int32_t V) {
    // gam[n], the solved rows X[n][K+V], one V-wide temporary.
    return size_t(n) + size_t(n) * (size_t(K) + V) + size_t(V);
}

SPECLA_CPU_KERNEL void tree_recurrence_wy(const float *S, const HeadInputs &in, const HeadOutputs &out, float *scratch) {
    const int32_t n = in.n, K = in.K, V = in.V;
    // The ancestor mask is implicit: every sum below walks the parent links of its node.
    float *gam = scratch;                      // cumulative log decay along each node's path
    float *Wk = gam + n;                       // rows: W_v (K floats) then U_v (V floats)
    float *tmp = Wk + size_t(n) * (K + V);     // V floats
    const int32_t *par = in.parents;

    for (int32_t v = 0; v < n; ++v) gam[v] = in.g[v * in.gate_stride] + (par[v] >= 0 ? gam[par[v]] : 0.f);
    // Forward substitution of (I + A) X = B with A[v][u] = beta_v (k_v . k_u) exp(gam_v - gam_u)
    // for ancestors u; B_v = [beta_v exp(gam_v) k_v | beta_v v_v]. Topological order makes it
    // one pass: each row needs only rows of its ancestors.
    for (int32_t v = 0; v < n; ++v) {
        const float beta = in.beta[v * in.gate_stride];
        const float *kv = in.k + v * in.k_stride;
        float *Xw = Wk + size_t(v) * (K + V), *Xu = Xw + K;
        const float e = std::exp(gam[v]);
        for (int32_t i = 0; i < K; ++i) Xw[i] = beta * e * kv[i];
        const float *vv = in.v + v * in.v_stride;
        for (int32_t j = 0; j < V; ++j) Xu[j] = beta * vv[j];
        for (int32_t u = par[v]; u >= 0; u = par[u]) {
            const float a = beta * dot(kv, in.k + u * in.k_stride, K) * std::exp(gam[v] - gam[u]);
            const float *Yw = Wk + size_t(u) * (K + V);
            for (int32_t i = 0; i < K + V; ++i) Xw[i] -= a * Yw[i];
        }
    }
    // Vt_v = U_v - S^T W_v  (S is K x V, row i = key index): the residual of v's own path.
    for (int32_t v = 0; v < n; ++v) {
        const float *Xw = Wk + size_t(v) * (K + V), *Xu = Xw + K;
        float *uo = out.u + v * out.u_stride;
        std::memcpy(uo, Xu, size_t(V) * sizeof(float));
        for (int32_t i = 0; i < K; ++i) {
            const float w = Xw[i];
            const float *Srow = S + size_t(i) * V;
            for (int32_t j = 0; j < V; ++j) uo[j] -= w * Srow[j];
        }
    }
    // o_v = exp(gam_v) S^T q_v + sum over u in path(v) of (q_v . k_u) exp(gam_v - gam_u) Vt_u.
    for (int32_t v = 0; v < n; ++v) {
        const float *qv = in.q + v * in.q_stride;
        float *o = out.o + v * out.o_stride;
        std::fill(tmp, tmp + V, 0.f);
        for (int32_t i = 0; i < K; ++i) {
            const float qi = qv[i];
            const float *Srow = S + size_t(i) * V;
            for (int32_t j = 0; j < V; ++j) tmp[j] += qi * Srow[j];
        }
        const float e = std::exp(gam[v]);
        for (int32_t j = 0; j < V; ++j) o[j] = e * tmp[j];
        for (int32_t u = v; u >= 0; u = par[u]) {
            const float c = dot(qv, in.k + u * in.k_stride, K) * std::exp(gam[v] - gam[u]);
            const float *Vt = out.u + u * out.u_stride;
            for (int32_t j = 0; j < V; ++j) o[j] += c * Vt[j];
        }
    }
}

}  // namespace cpu
}  // namespace specla
