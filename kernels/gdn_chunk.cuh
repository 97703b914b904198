// The chunk (WY) form of the Gated DeltaNet recurrence for a block of tokens (derived in
// lib/backend/cpu/gdn_math.md, section 3), chunks of kChunk tokens. The work is matrix products:
//   per key head and chunk (cuBLAS strided-batched, TF32 tensor cores, host side):
//       G = K K^T and QK = Q K^T;
//   chunk_prep (here): gam = within-chunk cumsum of g, A = strict_lower(beta_i G_ij e^{gam_i-gam_j}),
//       T = (I + A)^-1 (forward substitution), Tb = T diag(beta e^gam), Tu = T diag(beta),
//       Pm = QK o exp(gam_i - gam_j) o [i >= j];
//   per value head and chunk (cuBLAS, host side): W = Tb K, U = Tu V;
//   chunk_state_pass (here, WMMA TF32 tensor cores): one CTA per (value head, 16 value columns)
//       walks the chunks in order with its state slice in shared memory:
//       Vt = U - W S;  O = diag(e^gam) Q S + Pm Vt;  S = e^{gam_C} S + K^T diag(e^{gam_C - gam}) Vt.
// Inputs are the head-major outputs of launch_conv_prefill (q already normalised and scaled).
// CPU reference: the token loop cpu::gdn_step (backend/cpu/cpu_gdn.h).
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

constexpr int32_t kChunk = 64;

// Whether the tensor-core state pass supports a head shape (otherwise use the recurrent kernel).
inline bool chunk_form_supported(int32_t K, int32_t V) {
    return K % 16 == 0 && V % 16 == 0 && K <= 512 && K >= 16;
}

struct ChunkPrepParams {
    int32_t n_chunks = 0, H = 0, HV = 0;
    const float *G = nullptr, *QK = nullptr;  // [H][n_chunks][C][C], row-major
    const float *g = nullptr, *beta = nullptr;  // [HV][n_chunks*C]
    float *gam = nullptr;                       // [HV][n_chunks*C]
    float *Pm = nullptr, *Tb = nullptr, *Tu = nullptr;  // [HV][n_chunks][C][C]
};

struct ChunkPassParams {
    int32_t n_chunks = 0, H = 0, HV = 0, K = 0, V = 0;
    const float *q = nullptr, *k = nullptr;  // [H][n_chunks*C][K]
    const float *W = nullptr;                // [HV][n_chunks*C][K]
    const float *U = nullptr;                // [HV][n_chunks*C][V]
    const float *Pm = nullptr;               // [HV][n_chunks][C][C]
    const float *gam = nullptr;              // [HV][n_chunks*C]
    float *state = nullptr;                  // [HV][V][K], read and written
    float *o = nullptr;                      // [HV][n_chunks*C][V]
};

cudaError_t launch_chunk_prep(const ChunkPrepParams &p, const LaunchCtx &ctx);
cudaError_t launch_chunk_state_pass(const ChunkPassParams &p, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
