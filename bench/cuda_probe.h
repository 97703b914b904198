// Timing hooks over a CUDA backend's internals, for the engine-level benchmark drivers only
// (bench_decode, bench_verify): compiled into them, not into the library or its CUDA module.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_backend.h"

namespace specla {
namespace cuda {

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
