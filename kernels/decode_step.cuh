// The whole one-token decoding step as one persistent kernel: every CTA of a co-resident grid
// (2 per SM, cooperative launch) walks the phases embedding -> per layer [in_proj GEMV (RMSNorm
// prologue, conv/gates epilogue) | recurrent step | o_proj GEMV (gated-norm prologue, residual
// epilogue) | gate_up GEMV (RMSNorm prologue, SwiGLU epilogue) | down GEMV (residual epilogue)] ->
// lm_head GEMV (final norm, logits + argmax), with a grid-wide barrier between phases.
//
// Why one kernel: a decoding step is ~120 dependent memory-bound operations of a few microseconds
// each; kernel boundaries (launch, ramp-up, tail) cost as much as the work. Here each CTA loads
// the weight rows of its share of the NEXT phase into registers before it waits at the barrier, so
// the memory system keeps streaming through every barrier and through the latency-bound
// recurrent phase. Activations written by other CTAs are read through L2 (ld.cg), never L1.
// Measured (H200, GDN-1.3B): 1.62 ms per step against 1.25 ms for one kernel per op with PDL, so
// the backend leaves it off by default (CudaBackendOptions::fused_decode). Two register blocks per
// CTA (~17 MB in flight over the grid) do not cover the ~121 barriers plus the latency-bound
// recurrent and o_proj phases; the next step is a deeper prefetch of the gate_up/down rows into the
// unused shared memory during those phases.
// The arithmetic and its order per row are those of the per-op kernels (gemv.cu,
// gdn_recurrent.cu); CPU references as listed there.
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

// Per-layer pointers, in device memory (one array per sequence state).
struct DecodeLayer {
    const uint16_t *in_proj = nullptr, *o_proj = nullptr, *gate_up = nullptr, *down = nullptr;
    const float *attn_norm = nullptr, *conv_w = nullptr, *A_log = nullptr, *dt_bias = nullptr, *o_norm = nullptr,
                *mlp_norm = nullptr;
    float *state = nullptr;       // [HV][V][K]
    float *conv_cache = nullptr;  // [W-1][CC], null without short conv
};

struct DecodeStepParams {
    int32_t n_layers = 0, D = 0, H = 0, HV = 0, K = 0, V = 0, I = 0, vocab = 0, conv_size = 0;
    int32_t use_conv = 0, use_gate = 0;
    int64_t R = 0, CC = 0, row_g = 0, row_a = 0, row_b = 0;  // in_proj rows and row offsets
    float eps = 1e-6f, beta_scale = 1.f, q_scale = 1.f;
    const DecodeLayer *layers = nullptr;
    const uint16_t *emb = nullptr, *lm_head = nullptr;
    const float *final_norm = nullptr;
    const int32_t *token = nullptr;  // device
    float *h = nullptr;              // [D] residual
    float *proj = nullptr;           // [R] in_proj outputs after the epilogue
    float *o = nullptr;              // [HV*V] mixer output
    float *act = nullptr;            // [I] SwiGLU output
    float *logits = nullptr;         // [vocab]
    unsigned long long *argmax = nullptr;
    unsigned int *barrier = nullptr;  // 2 words, zero at launch (the kernel leaves them consistent too)
};

// Whether an instantiation covers the shape (otherwise the backend runs one kernel per op).
bool decode_step_supported(int32_t D, int32_t VD, int32_t I, int32_t K, int32_t V);

cudaError_t launch_decode_step(const DecodeStepParams &p, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
