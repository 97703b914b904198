// One token of the Gated DeltaNet recurrence on a register tile of the state, shared by the
// recurrent kernel (gdn_recurrent.cu) and the persistent step (bench/experiments/). A group of TPC
// lanes owns one value column j; lane l holds S[i][j] for i = e*TPC + l (e < KPT) and the matching
// entries of q and k. Device code only. CPU reference: cpu::gdn_step (backend/cpu/cpu_gdn.h).
#pragma once

#include "device_common.cuh"
#include "launch_common.cuh"

namespace specla {
namespace kern {

// q and k l2-normalised over K as the recurrence reads them (q also times q_scale): per lane the
// sum of its squares in e order, then the group's butterfly sum (the same value in every lane), one
// factor each. Apart from the update so that a chain can normalise its nodes ahead of the state's
// critical path (tree_chain_kernel) with the very operations of the decoding step.
template <int KPT, int TPC>
__device__ __forceinline__ void gdn_tile_normalize(float (&qr)[KPT], float (&kr)[KPT], float q_scale) {
    float qs = 0.f, ks = 0.f;
#pragma unroll
    for (int e = 0; e < KPT; ++e) qs += qr[e] * qr[e], ks += kr[e] * kr[e];
    qs = group_sum<TPC>(qs);
    ks = group_sum<TPC>(ks);
    const float qi = q_scale / sqrtf(qs + 1e-6f), ki = 1.f / sqrtf(ks + 1e-6f);
#pragma unroll
    for (int e = 0; e < KPT; ++e) qr[e] *= qi, kr[e] *= ki;
}

// The two halves of a token's state update, so that a chain can overlap one token's output
// reduction with the next token's S^T k (tree_chain_kernel); gdn_tile_update composes them.
// First half: S <- decay S; returns this lane's share of S^T k (e order).
template <int KPT>
__device__ __forceinline__ float gdn_tile_decay_kv(float (&S)[KPT], const float (&kr)[KPT], float decay) {
    float kv = 0.f;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        S[e] *= decay;
        kv = fmaf(S[e], kr[e], kv);
    }
    return kv;
}
// Second half, given the residual u: S <- S + k u; returns this lane's share of S^T q (e order).
template <int KPT>
__device__ __forceinline__ float gdn_tile_add_ku(float (&S)[KPT], const float (&qr)[KPT], const float (&kr)[KPT],
                                                 float u) {
    float ov = 0.f;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        S[e] = fmaf(kr[e], u, S[e]);
        ov = fmaf(S[e], qr[e], ov);
    }
    return ov;
}
// The residual of column j from the group's S^T k.
__device__ __forceinline__ float gdn_residual(float beta, float vj, float kv) { return beta * (vj - kv); }

// The state part of a token, q and k as the recurrence reads them, decay = exp(g):
// S <- decay S;  u = beta (v_j - S^T k);  S <- S + k u;  returns o_j = S^T q, u in *u_out.
// Only S^T k and the update are on the path to the next token; S^T q is not.
template <int KPT, int TPC>
__device__ __forceinline__ float gdn_tile_update(float (&S)[KPT], const float (&qr)[KPT], const float (&kr)[KPT],
                                                 float vj, float decay, float beta, float *u_out) {
    const float kv = group_sum<TPC>(gdn_tile_decay_kv<KPT>(S, kr, decay));
    const float u = gdn_residual(beta, vj, kv);
    *u_out = u;
    return group_sum<TPC>(gdn_tile_add_ku<KPT>(S, qr, kr, u));
}

// One token: S <- exp(g) S;  u = beta (v_j - S^T k);  S <- S + k u;  o_j = S^T q.  With
// `normalize`, q and k are first l2-normalised over K (q also times q_scale). Returns o_j; u in
// *u_out.
template <int KPT, int TPC>
__device__ __forceinline__ float gdn_tile_token(float (&S)[KPT], float (&qr)[KPT], float (&kr)[KPT], float vj,
                                                float gl, float beta, bool normalize, float q_scale, float *u_out) {
    if (normalize) gdn_tile_normalize<KPT, TPC>(qr, kr, q_scale);
    return gdn_tile_update<KPT, TPC>(S, qr, kr, vj, expf(gl), beta, u_out);
}

// One factor with this lane's entries of the normalised key already in registers (zero past K):
// the operations of gdn_tile_apply below.
template <int KPT>
__device__ __forceinline__ void gdn_tile_apply_k(float (&S)[KPT], const float (&kr)[KPT], float u, float decay) {
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        S[e] *= decay;
        S[e] = fmaf(kr[e], u, S[e]);
    }
}
// One stored factor applied to the tile (commit without replay): S <- exp(g) S + k u, with the
// exact operations and order of gdn_tile_token's state update (decay, then one fma with the
// normalised key), so that a committed path leaves the state bitwise equal to decoding it.
// `kp` points at the normalised key of the head (K floats), u is this column's residual.
template <int KPT, int TPC>
__device__ __forceinline__ void gdn_tile_apply(float (&S)[KPT], const float *kp, int K, float u, float gl) {
    const int l = threadIdx.x % TPC;
    float kr[KPT];
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        const int i = e * TPC + l;
        kr[e] = i < K ? kp[i] : 0.f;
    }
    gdn_tile_apply_k<KPT>(S, kr, u, expf(gl));
}

// The tile shape of every state-tile kernel (recurrent step, verification chains, WY, commit) for
// head dim K: KPT state entries per lane, TPC lanes per value column. One table, so that the
// reductions over K, and hence the results, are the same in all of them.
template <int KPT_, int TPC_>
struct TileShape {
    static constexpr int KPT = KPT_, TPC = TPC_;
};
template <typename Fn>
inline cudaError_t with_tile_shape(int K, Fn &&fn) {
    if (K <= 16) return fn(TileShape<8, 2>{});
    if (K <= 32) return fn(TileShape<8, 4>{});
    if (K <= 64) return fn(TileShape<8, 8>{});
    if (K <= 128) return fn(TileShape<8, 16>{});
    if (K <= 256) return fn(TileShape<8, 32>{});
    if (K <= 512) return fn(TileShape<16, 32>{});
    return cudaErrorInvalidValue;
}

// Applies the pending factors of value head hv, column j (lanes of the group) to the tile.
template <int KPT, int TPC>
__device__ __forceinline__ int gdn_tile_apply_pending(float (&S)[KPT], const PendingFactors &pf, int H, int HV, int K,
                                                      int V, int h, int hv, int j, bool col_ok) {
    if (!pf.desc) return 0;
    const int np = pf.desc[0];
    if (np <= 0) return 0;
    const int set = pf.desc[1];
    const float *ks = set ? pf.k[1] : pf.k[0];
    const float *gs = set ? pf.g[1] : pf.g[0];
    for (int t = 0; t < np; ++t) {
        const int64_t node = pf.desc[2 + t];
        const float u = col_ok ? pf.u[(node * HV + hv) * V + j] : 0.f;
        gdn_tile_apply<KPT, TPC>(S, ks + (node * H + h) * K, K, u, gs[node * HV + hv]);
    }
    return np;
}

}  // namespace kern
}  // namespace specla
