// What every kernel launcher takes: the stream, whether to use programmatic dependent launch, and
// the device's multiprocessor count (grid sizing). Host-visible: plain C++, no device code.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace specla {
namespace kern {

struct LaunchCtx {
    cudaStream_t stream = nullptr;
    bool pdl = false;      // launch with cudaLaunchAttributeProgrammaticStreamSerialization
    int32_t sm_count = 1;  // multiprocessors of the device
};

// Where the pending (accepted, not yet applied) factors of a deferred commit are, for one layer.
// The descriptor lives in device memory so that a captured decoding step reads the current count:
// desc[0] = count (0: nothing pending), desc[1] = factor set of k and g (0/1), desc[2 + i] = node
// of the i-th path token. All pointers are device memory.
struct PendingFactors {
    const int32_t *desc = nullptr;           // null: none
    const float *k[2] = {nullptr, nullptr};  // [nodes][H*K] normalised keys, per set
    const float *g[2] = {nullptr, nullptr};  // [nodes][HV] log decays, per set
    const float *u = nullptr;                // [nodes][HV*V] residuals
};

// Diagnostics (bench_decode --trace), only in a build with SPECLA_KERNEL_TRACE (CMake option
// SPECLA_KERNEL_TRACE, off by default; kOpTraceBuilt says which): a kernel given a trace slot of
// kOpTraceSlots words stamps the global timer at kOpTracePhases points (entry, past the
// grid-dependency wait, input vector ready, exit) as the earliest and the latest CTA:
// slot[2*phase] = min, slot[2*phase + 1] = max. The host fills the minima with all ones and the
// maxima with zero before the step. Without the option the product kernels have no trace slots.
constexpr int32_t kOpTracePhases = 4;
constexpr int32_t kOpTraceSlots = 2 * kOpTracePhases;
#ifdef SPECLA_KERNEL_TRACE
constexpr bool kOpTraceBuilt = true;
#else
constexpr bool kOpTraceBuilt = false;
#endif

}  // namespace kern
}  // namespace specla
