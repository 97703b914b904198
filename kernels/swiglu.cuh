// SwiGLU of the MLP over a block of tokens, producing the bf16 input of the down projection.
// (The one-token step fuses it into the gate_up GEMV epilogue.) CPU reference: the ffn loop of
// CpuPassOps (backend/cpu/cpu_forward.cpp) with cpu::silu (backend/cpu/cpu_ops.h).
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

// out[t][j] = bf16( silu(gu[t][j]) * gu[t][I + j] ), gu rows 2I floats apart.
cudaError_t launch_swiglu_rows(const float *gu, int32_t n, int64_t I, uint16_t *out, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
