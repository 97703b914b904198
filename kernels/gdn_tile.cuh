// One token of the Gated DeltaNet recurrence on a register tile of the state, shared by the
// recurrent kernel (gdn_recurrent.cu) and the fused decoding step (decode_step.cu). A group of TPC
// lanes owns one value column j; lane l holds S[i][j] for i = e*TPC + l (e < KPT) and the matching
// entries of q and k. Device code only. CPU reference: cpu::gdn_step (backend/cpu/cpu_gdn.h).
#pragma once

#include "device_common.cuh"

namespace specla {
namespace kern {

// S <- exp(g) S;  u = beta (v_j - S^T k);  S <- S + k u;  o_j = S^T q.  With `normalize`, q and k
// are first l2-normalised over K (q also times q_scale). Returns o_j; u in *u_out.
template <int KPT, int TPC>
__device__ __forceinline__ float gdn_tile_token(float (&S)[KPT], float (&qr)[KPT], float (&kr)[KPT], float vj,
                                                float gl, float beta, bool normalize, float q_scale, float *u_out) {
    if (normalize) {
        float qs = 0.f, ks = 0.f;
#pragma unroll
        for (int e = 0; e < KPT; ++e) qs += qr[e] * qr[e], ks += kr[e] * kr[e];
        qs = group_sum<TPC>(qs);
        ks = group_sum<TPC>(ks);
        const float qi = q_scale / sqrtf(qs + 1e-6f), ki = 1.f / sqrtf(ks + 1e-6f);
#pragma unroll
        for (int e = 0; e < KPT; ++e) qr[e] *= qi, kr[e] *= ki;
    }
    const float decay = expf(gl);
    float kv = 0.f;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        S[e] *= decay;
        kv = fmaf(S[e], kr[e], kv);
    }
    kv = group_sum<TPC>(kv);
    const float u = beta * (vj - kv);
    float ov = 0.f;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        S[e] = fmaf(kr[e], u, S[e]);
        ov = fmaf(S[e], qr[e], ov);
    }
    *u_out = u;
    return group_sum<TPC>(ov);
}

}  // namespace kern
}  // namespace specla
