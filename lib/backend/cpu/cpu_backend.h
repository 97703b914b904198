// The CPU engine: fp32 arithmetic over weights kept in the checkpoint's precision (F32 or BF16,
// see model/weights.h). It is the reference every other backend is tested against.
#pragma once

#include <memory>

#include "engine/backend.h"
#include "memory/host_alloc.h"

namespace specla {

// Per-sequence state and the scratch of one forward pass, sized at creation so that evaluation
// never allocates.
struct CpuSequenceState : SequenceState {
    HostVec<float> recurrent;  // [L][HV][K][V]   (row i of a head's K x V block = key index i)
    HostVec<float> conv;       // [L][W-1][conv_channels], oldest input first
    int32_t capacity = 0;      // rows of scratch: max(max_batch_tokens, max_tree_nodes)

    // Scratch, `capacity` rows each.
    HostVec<float> h, x, proj, mixed, o, y, ffn, logits_row;
    HostVec<float> beta, glog;  // [rows][HV]
};

class CpuBackend final : public Backend {
public:
    CpuBackend(const ModelConfig &config, ModelWeights weights, int32_t n_threads);

    specla_backend kind() const override { return SPECLA_BACKEND_CPU; }
    const ModelConfig &config() const override { return config_; }
    std::unique_ptr<SequenceState> create_state(const SessionLimits &limits) override;
    void reset_state(SequenceState &state) override;
    void eval_chain(SequenceState &state, const int32_t *tokens, int32_t n, LogitsRows rows,
                    float *logits) override;
    void read_recurrent_state(SequenceState &state, int32_t layer, float *out) override;
    MemoryStats memory_stats() const override;

    const ModelWeights &weights() const { return weights_; }
    int32_t n_threads() const { return n_threads_; }

private:
    // Token mixer of one layer over n chain tokens, reading x rows and writing y rows
    // (pre-o_proj head outputs). Advances the layer's recurrent state and conv cache.
    void mix_chain(CpuSequenceState &st, int layer, int32_t n);
    void output_logits(CpuSequenceState &st, int32_t n, LogitsRows rows, float *logits);

    ModelConfig config_;
    ModelWeights weights_;
    int32_t n_threads_;
};

}  // namespace specla
