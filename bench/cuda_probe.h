// Timing hooks over a CUDA backend's internals, for the engine-level benchmark drivers only
// (bench_decode, bench_verify): compiled into them, not into the library or its CUDA module.
#pragma once

#include <cstdint>
#include <functional>

#include "backend/cuda/cuda_backend.h"

namespace specla {
namespace cuda {

// Milliseconds between CUDA events recorded on `stream` before and after what `enqueue` puts on
// it, with no host synchronisation in between.
inline float stream_elapsed_ms(cudaStream_t stream, const std::function<void()> &enqueue) {
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "cudaEventCreate");
    check(cudaEventCreate(&e1), "cudaEventCreate");
    check(cudaEventRecord(e0, stream), "cudaEventRecord");
    enqueue();
    check(cudaEventRecord(e1, stream), "cudaEventRecord");
    check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    (void)cudaEventDestroy(e0);
    (void)cudaEventDestroy(e1);
    return ms;
}

struct CudaBackendProbe {
    // Replays `steps` decoding steps of `token` (state advances) and returns the milliseconds
    // between CUDA events around them, with no host synchronisation between steps (the step's graph
    // is captured first, outside the timed region).
    static float time_decode_steps(CudaBackend &b, SequenceState &state, int32_t token, int32_t steps);
    // Kernel-level timing of one speculative step's state work over the last verified tree, whose
    // mixer inputs are reused: the recurrence of every layer plus the commit of `path` (node
    // indices of that tree), either fused into the recurrence (deferred) or as a separate pass
    // before it. Device milliseconds per step (median of `reps`); the state's values change.
    static float time_recurrence_commit(CudaBackend &b, SequenceState &state, const int32_t *path, int32_t n_path,
                                        bool deferred, TreeAlgorithm algorithm, int32_t reps);
    // Changes the options for states created afterwards and for later calls (drivers compare
    // variants on one copy of the weights); not thread-safe with concurrent calls.
    static void set_options(CudaBackend &b, const CudaBackendOptions &o) { b.options_ = o; }
};

}  // namespace cuda
}  // namespace specla
