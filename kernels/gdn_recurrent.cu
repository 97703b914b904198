// Gated DeltaNet recurrence with the state tile in registers (see gdn_recurrent.cuh).
//
// Thread layout: groups of TPC lanes own one value column j of one value head; lane l of a group
// holds the KPT state entries S[i][j] with i = e*TPC + l (e < KPT), so loads of a state row
// (layout [HV][V][K]: row j is K contiguous floats) and of q/k are coalesced, and the two
// reductions over K per token (S^T k and S^T q) are shuffles inside the group. A CTA of 256
// threads covers 256/TPC columns; the grid is (V / columns-per-CTA, HV).
#include <cmath>

#include "device_common.cuh"
#include "gdn_recurrent.cuh"
#include "gdn_tile.cuh"

namespace specla {
namespace kern {

namespace {

constexpr int kThreads = 256;

template <int KPT, int TPC>
__global__ void __launch_bounds__(kThreads) gdn_recurrent_kernel(const RecurrentParams p) {
    constexpr int CPB = kThreads / TPC;  // columns per CTA
    const int tid = threadIdx.x, grp = tid / TPC, l = tid % TPC;
    const int hv = blockIdx.y, j = blockIdx.x * CPB + grp;
    const int K = p.K, V = p.V;
    const int h = hv / (p.HV / p.H);
    const bool col_ok = j < V;

    SPECLA_OP_TRACE(p.trace, 0);
    // The tile is written only by this layer's kernel of an earlier pass: prefetch before the wait.
    float S[KPT];
    // One load / store form with the policy chosen here (a branch between an evict-last load and a
    // plain one measured no faster than plain loads; bench/journal/2026-11-30-recurrent-state-in-l2.md).
    const uint64_t state_policy = p.l2_keep_state ? l2_evict_last_policy() : l2_evict_normal_policy();
    float *Srow = p.state + (int64_t(hv) * V + (col_ok ? j : 0)) * K;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        const int i = e * TPC + l;
        S[e] = (col_ok && i < K) ? ld_policy(Srow + i, state_policy) : 0.f;
    }
    // Pending factors of an accepted path (deferred commit), in path order. They were written by
    // an earlier pass (and the descriptor by the host before this step), never by a kernel of the
    // current one: applied before the wait, under the tail of the previous kernel.
    gdn_tile_apply_pending<KPT, TPC>(S, p.pending, p.H, p.HV, K, V, h, hv, j, col_ok);
    pdl_wait();
    pdl_trigger();
    SPECLA_OP_TRACE(p.trace, 1);
    for (int t = 0; t < p.n_pending; ++t) {
        const float u = col_ok ? p.pu[(int64_t(t) * p.HV + hv) * V + j] : 0.f;
        gdn_tile_apply<KPT, TPC>(S, p.pk + (int64_t(t) * p.H + h) * K, K, u, p.pg[int64_t(t) * p.HV + hv]);
    }

    const bool write_k = p.k_out && blockIdx.x == 0 && grp == 0 && hv % (p.HV / p.H) == 0;
    for (int t = 0; t < p.n_tokens; ++t) {
        const float *qp = p.q + int64_t(t) * p.q_tstride + int64_t(h) * p.q_hstride;
        const float *kp = p.k + int64_t(t) * p.q_tstride + int64_t(h) * p.q_hstride;
        float qr[KPT], kr[KPT];
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int i = e * TPC + l;
            qr[e] = i < K ? qp[i] : 0.f;
            kr[e] = i < K ? kp[i] : 0.f;
        }
        const float gl = p.g[int64_t(t) * p.gb_tstride + int64_t(hv) * p.gb_hstride];
        const float beta = p.beta[int64_t(t) * p.gb_tstride + int64_t(hv) * p.gb_hstride];
        const float vj = col_ok ? p.v[int64_t(t) * p.v_tstride + int64_t(hv) * p.v_hstride + j] : 0.f;
        float u;
        if (t == 0) SPECLA_OP_TRACE(p.trace, 2);
        const float ov = gdn_tile_token<KPT, TPC>(S, qr, kr, vj, gl, beta, p.normalize != 0, p.q_scale, &u);
        if (l == 0 && col_ok) {
            p.o[int64_t(t) * p.o_tstride + int64_t(hv) * p.o_hstride + j] = ov;
            if (p.u_out) p.u_out[(int64_t(t) * p.HV + hv) * V + j] = u;
        }
        if (write_k) {
#pragma unroll
            for (int e = 0; e < KPT; ++e) {
                const int i = e * TPC + l;
                if (i < K) p.k_out[(int64_t(t) * p.H + h) * K + i] = kr[e];
            }
        }
    }

#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        const int i = e * TPC + l;
        if (col_ok && i < K) st_policy(Srow + i, S[e], state_policy);
    }
    SPECLA_OP_TRACE(p.trace, 3);
}

template <int KPT, int TPC>
cudaError_t launch_one(const RecurrentParams &p, const LaunchCtx &ctx) {
    constexpr int CPB = kThreads / TPC;
    const dim3 grid(ceil_div(p.V, CPB), p.HV);
    return launch_kernel(gdn_recurrent_kernel<KPT, TPC>, grid, dim3(kThreads), 0, ctx, p);
}

}  // namespace

cudaError_t launch_gdn_recurrent(const RecurrentParams &p, const LaunchCtx &ctx) {
    static_assert(kRecurrentMaxK == 512, "with_tile_shape covers K up to 512");
    return with_tile_shape(p.K, [&](auto shape) {
        return launch_one<decltype(shape)::KPT, decltype(shape)::TPC>(p, ctx);
    });
}

}  // namespace kern
}  // namespace specla
