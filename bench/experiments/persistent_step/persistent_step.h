// The persistent decoding step (decode_step.cuh) run on a CUDA backend's sequence state, outside
// the backend: the experiment's host side. It reads the backend's device weights
// (CudaBackend::device_weights) and the state's buffers (cuda::CudaSequenceState), applies a
// pending deferred commit like the backend's own step (CudaBackend::pending_of gives the factors),
// and leaves the state exactly where the backend's kernel-per-op step would (bitwise: the
// experiment's test, test_persistent_step.cpp). Built only with SPECLA_BUILD_EXPERIMENTS.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "backend/cuda/cuda_backend.h"
#include "decode_step.cuh"

namespace specla {
namespace experiments {

class PersistentStep {
public:
    // Steps of `state` (a state of `backend`, which must outlive this object) as one persistent
    // kernel; with `use_graph`, the second and later steps replay a captured graph.
    PersistentStep(cuda::CudaBackend &backend, SequenceState &state, bool use_graph = true);
    ~PersistentStep();
    PersistentStep(const PersistentStep &) = delete;
    PersistentStep &operator=(const PersistentStep &) = delete;

    // Whether the persistent step covers the backend's model shape on its device.
    static bool supported(const cuda::CudaBackend &backend);

    // One decoding step of `token`, synchronously: the argmax; the logits row when `logits` is set.
    int32_t step(int32_t token, float *logits);
    // `steps` steps of `token` back to back (the state advances), milliseconds between CUDA events
    // around them, no host synchronisation in between (as CudaBackendProbe::time_decode_steps, bench/cuda_probe.h).
    float time_steps(int32_t token, int32_t steps);
    // Phase timestamps of the next steps ([grid][layers][kern::kDecodeTraceEvents]); null: none.
    void set_trace(unsigned long long *trace);
    // "persistent, graph" or "persistent, eager".
    const std::string &mode() const { return mode_; }

private:
    kern::DecodeStepParams params() const;
    void enqueue();
    void run();

    cuda::CudaBackend &backend_;
    cuda::CudaSequenceState &st_;
    bool use_graph_;
    kern::DecodeLayer *d_layers_ = nullptr;  // per-layer pointers (device)
    unsigned int *d_barrier_ = nullptr;      // the grid barrier's word
    unsigned long long *trace_ = nullptr;
    cudaGraphExec_t graph_ = nullptr;
    bool graph_failed_ = false;
    int64_t eager_steps_ = 0;
    std::string mode_ = "persistent, eager";
};

}  // namespace experiments
}  // namespace specla
