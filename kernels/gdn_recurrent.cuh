// The Gated DeltaNet recurrence over n consecutive tokens of one sequence, with each CTA keeping a
// tile of the fp32 state on chip for all n tokens: the state of a value head is split over its V
// columns (one tile = whole K x a slice of V), read once and written once per call. A plain
// decoding step is n = 1; a chain of draft tokens is n > 1 (the verification kernel of the
// speculative path builds on this). Before the tokens, `n_pending` stored factors of an earlier
// accepted path may be applied to the tile (deferred commit), and the factors of these tokens
// (normalised k, delta residual u) can be written out for a later commit.
// CPU reference: backend/cpu/cpu_gdn.h (gdn_step, gdn_apply_factor, l2_normalize).
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

struct RecurrentParams {
    int32_t n_tokens = 1;
    int32_t H = 0, HV = 0, K = 0, V = 0;
    // Element (t, head, i) of q / k is at q[t*q_tstride + head*q_hstride + i]; v, o likewise;
    // g (log decay) and beta at g[t*gb_tstride + hv*gb_hstride].
    const float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
    int64_t q_tstride = 0, q_hstride = 0, v_tstride = 0, v_hstride = 0, gb_tstride = 0, gb_hstride = 0;
    float *state = nullptr;  // [HV][V][K] fp32 (fla's layout: row j of a head = value index j)
    float *o = nullptr;      // head outputs before the gated norm
    int64_t o_tstride = 0, o_hstride = 0;
    int32_t normalize = 0;   // 1: q, k are post-SiLU and not yet normalised (l2 norm, q * K^-1/2 here)
    float q_scale = 1.f;     // K^-1/2 when normalize

    float *k_out = nullptr;  // optional [n][H][K]: normalised k of each token
    float *u_out = nullptr;  // optional [n][HV][V]: delta residual u of each token

    int32_t n_pending = 0;   // factors applied first: S <- exp(g) S + k u^T
    const float *pk = nullptr;  // [n_pending][H][K]
    const float *pu = nullptr;  // [n_pending][HV][V]
    const float *pg = nullptr;  // [n_pending][HV]

    // Pending factors of a deferred commit described in device memory (read by the kernel, so a
    // captured decoding step stays valid; see launch_common.cuh). Applied before n_pending's.
    PendingFactors pending;

    // 1: the tile is read and written through an L2 evict-last policy (device_common.cuh), so that
    // it stays in L2 for the next step where the sequence's state fits (CudaBackend).
    int32_t l2_keep_state = 0;
#ifdef SPECLA_KERNEL_TRACE
    unsigned long long *trace = nullptr;  // diagnostics: kOpTraceSlots words (launch_common.cuh)
#endif
};

// Largest head_dim K the kernel instantiations cover.
constexpr int32_t kRecurrentMaxK = 512;

cudaError_t launch_gdn_recurrent(const RecurrentParams &p, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
