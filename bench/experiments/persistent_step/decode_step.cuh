// The whole one-token decoding step as one persistent kernel: one CTA per SM (cooperative launch)
// walks the phases [per layer: in_proj GEMV (RMSNorm prologue, conv/gates epilogue) | recurrent
// step | o_proj GEMV (gated-norm prologue, residual epilogue) | gate_up GEMV (RMSNorm prologue,
// SwiGLU epilogue) | down GEMV (residual epilogue)] -> lm_head GEMV (final norm, logits + argmax),
// with a grid-wide barrier between dependent phases.
//
// Why one kernel, and why a producer warp: a decoding step is ~120 dependent memory-bound
// operations of a few microseconds each. As separate kernels, every boundary (grid drain, launch,
// ramp-up) leaves the memory system idle. Here the weights, which do not depend on the
// activations, are streamed by one producer warp per CTA with bulk copies (cp.async.bulk) into a
// ring of shared-memory stages, phase after phase and layer after layer, without waiting for any
// barrier: it only waits for a free stage. The consumer warps do the prologues, the dot products
// out of shared memory, the epilogues, the recurrent phase and the grid barriers; while they wait
// at a barrier the ring keeps filling (~190 KB per SM, several microseconds of streaming).
//
// Arithmetic: every output row is computed with exactly the operations and reduction order of the
// per-op kernels (gemv.cu's vectorised kernel for its thread layout, see DecodeGemvShape;
// gdn_recurrent.cu's tile for the state), so that the two paths, and the multi-row verification
// GEMV that mirrors gemv.cu, agree bit for bit. CPU references as listed in gemv.cuh and
// gdn_recurrent.cuh.
//
// Status (H200, GDN-1.3B, measured with bench_decode --trace, whose rows for this step are now
// bench_persistent_step's): 1.72 ms per step against 1.09 ms for one kernel per op with PDL (1.26
// before that path's latency and load work), so it is an experiment outside the product
// (persistent_step.h runs it on a backend's state). A layer takes ~68 us against ~26 us of weight
// streaming, and the consumers, not the stream, set it: the producer is ahead at every phase, and limiting it to
// 1, 2 or 3 stages in flight changes nothing. Per layer: in_proj prologue ~4 us, rows ~10 us
// (~26 KB/us per SM), barrier ~3.5 us, recurrent phase ~5.5 us, barrier ~2.5 us, gated-norm
// prologue ~8 us, o_proj rows ~2.5 us, barrier ~2.3 us, gate_up prologue ~3 us, rows ~12 us,
// barrier ~2.5 us, down rows ~10.5 us (shared-memory input vector), barrier ~2.5 us. The finer
// trace shows each activation read through L2 taking 3-4 us in this kernel (recurrent inputs,
// gated-norm inputs), and ~3 us to build the gated-norm vector in registers. The per-op path's
// timeline (bench/journal/2026-11-30-per-op-operands-off-critical-path.md) shows the same effect
// there: an L2 round trip costs ~1.2 us while the weights stream, so every dependent read after a
// barrier is on the critical path. Next: the per-op path's fixes (parameters read before the
// barrier, the gate computed once), fewer barriers (o_proj split by head with a deterministic
// second-stage sum), the down rows from registers, and two rows per warp.
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
    PendingFactors pending;       // deferred commit of this layer (applied when desc[0] > 0)
};

// The thread layout of gemv.cu's vectorised kernel for a row length (gemv_cpt, gemv_threads):
// virtual thread t of `threads` reduces the 16-byte chunks t + s*threads (s < cpt) of a row.
struct DecodeGemvShape {
    int32_t cpt = 1, threads = 32;
};

struct DecodeStepParams {
    int32_t n_layers = 0, D = 0, H = 0, HV = 0, K = 0, V = 0, I = 0, vocab = 0, conv_size = 0;
    int32_t use_conv = 0, use_gate = 0;
    int64_t R = 0, CC = 0, row_g = 0, row_a = 0, row_b = 0;  // in_proj rows and row offsets
    float eps = 1e-6f, beta_scale = 1.f, q_scale = 1.f;
    DecodeGemvShape shape_d, shape_vd, shape_i;  // rows of D, H_V*V and I columns (set by the launcher)
    int32_t stages = 0;                          // ring depth (set by the launcher)
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
    int32_t *pending_desc = nullptr;  // the deferred-commit descriptor: count cleared once applied
    unsigned int *barrier = nullptr;  // 1 word, zero at launch (the step's memset)
    // Diagnostics (benchmarks only): when set, [grid][n_layers][kDecodeTraceEvents] global-timer
    // stamps of the phase boundaries seen by each CTA (see decode_step.cu).
    unsigned long long *trace = nullptr;
};
constexpr int kDecodeTraceEvents = 24;

// Whether the persistent step covers the model's shape on this device. Also prepares the kernel (shared-memory limit) for launch_decode_step.
// Reads the shape fields of `p` (D, H, HV, K, V, I, R, conv_size).
bool decode_step_supported(const DecodeStepParams &p, int32_t device);

cudaError_t launch_decode_step(const DecodeStepParams &p, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
