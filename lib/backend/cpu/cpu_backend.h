// The CPU engine: fp32 arithmetic over weights kept in the checkpoint's precision (F32 or BF16,
// see model/weights.h). It is the reference every other backend is tested against.
#pragma once

#include <memory>
#include <vector>

#include "engine/backend.h"
#include "forward/commit_state.h"
#include "forward/pass.h"
#include "memory/host_alloc.h"
#include "util/thread_pool.h"

namespace specla {

// Per-node factors of one verification pass, for every layer: enough to rebuild the state after
// any accepted path without recomputing a token.
struct CpuFactorSet {
    HostVec<float> k;    // [L][nodes][H*K]  normalised keys
    HostVec<float> u;    // [L][nodes][HV*V] delta residuals
    HostVec<float> g;    // [L][nodes][HV]   log decays
    HostVec<float> pre;  // [L][nodes][conv_channels] pre-conv inputs (for the conv cache)
};

// Per-sequence state and the scratch of one forward pass, sized at creation so that evaluation
// does not allocate (tree scratch grows to the largest tree seen).
struct CpuSequenceState : SequenceState {
    // [L][HV][K][V] (row i of a head's K x V block = key index i): the layout in which the CPU's
    // state step vectorises over V with sums over the key index in order; reading, exporting and
    // importing transpose to the canonical [HV][V][K] (the canonical layout here measured slower,
    // bench/journal/2026-12-02-cpu-state-canonical-layout.md).
    HostVec<float> recurrent;
    HostVec<float> conv;       // [L][W-1][conv_channels], oldest input first
    std::unique_ptr<ThreadPool> pool;  // this session's CPU workers
    int32_t capacity = 0;      // rows of activation scratch
    int32_t factor_capacity = 0;

    // Activation scratch, `capacity` rows each.
    HostVec<float> h, x, proj, mixed, o, y, ffn;
    HostVec<float> row_in;      // drafter models: [rows][2D] concat(embedding, input feature)
    HostVec<float> verify_logits;  // verification logits when the caller wants only argmax
    HostVec<float> step_logits;    // one decoding step's logits (vocab floats)
    HostVec<float> beta, glog;  // [rows][HV]

    // One factor set: a verification first applies the deferred path (read from these rows) and
    // only then overwrites the rows of that layer, so no second set is needed.
    CpuFactorSet factors;
    CommitState commit;             // verified -> commit -> pending (forward/commit_state.h)
    HostVec<int32_t> pending_path;  // the deferred path's nodes (indices into factors)
    HostVec<float> tree_scratch;    // per value head: hybrid snapshots or WY workspace
};

class CpuBackend final : public Backend {
public:
    CpuBackend(const ModelConfig &config, ModelWeights weights, int32_t n_threads);

    specla_backend kind() const override { return SPECLA_BACKEND_CPU; }
    const ModelConfig &config() const override { return config_; }
    std::unique_ptr<SequenceState> create_state(const SessionLimits &limits) override;
    void reset_state(SequenceState &state) override;
    void eval_chain(SequenceState &state, const int32_t *tokens, int32_t n, LogitsRows rows, float *logits,
                    const RowFeatures &features = RowFeatures(), const TopTokens &last_top = TopTokens()) override;
    int32_t decode_and_sample(SequenceState &state, int32_t token, const SamplingConfig &sampling, double u,
                              float *logits, float *features = nullptr) override;
    void verify_tree(SequenceState &state, const int32_t *tokens, const int32_t *parents, int32_t n,
                     TreeAlgorithm algorithm, const VerifyOutputs &out) override;
    void commit_path(SequenceState &state, const int32_t *nodes, int32_t n, bool deferred) override;
    void flush_commit(SequenceState &state) override;
    void read_recurrent_state(SequenceState &state, int32_t layer, float *out) override;
    MemoryStats memory_stats() const override;
    void copy_state(SequenceState &from, SequenceState &to) override;
    void export_state(SequenceState &state, float *recurrent, float *conv) override;
    void import_state(SequenceState &state, const float *recurrent, const float *conv) override;
    SessionMemory session_memory(const SequenceState &state) const override;
    // Drafter models: fixed-width drafting as the level passes (engine/fixed_width_draft.h), so that
    // the one-call drafting path runs, and is tested, on the CPU too; AUTO keeps dynamic trees here.
    bool supports_fixed_width_draft(int32_t width) const override;
    void draft_fixed_width(SequenceState &state, const FixedWidthDraft &draft) override;
    std::unique_ptr<Backend> create_drafter_backend(const ModelConfig &config, ModelWeights own) const override;
    // Every row of a block is computed on its own (the recurrence token by token, the
    // projections row by row in a fixed order), so results are bitwise the same for any block
    // size (tests/internal/test_generation.cpp), and linear() streams the weights once per 32
    // rows whatever the block: 8-token blocks prefill gdn-pycode-22m no slower than 512 (2 shared
    // cores, 1100 tokens: 1.8 s vs 2.0 s) and stop ~15 ms after an abort (16: ~25 ms, which a
    // loaded machine stretched past 50).
    int32_t interruptible_block_tokens() const override { return 8; }

    // BF16 matrices in linear()'s packed order (cpu::pack_bf16_blocks): read rows with
    // cpu::packed_row_to_f32, not Matrix::row_to_f32.
    const ModelWeights &weights() const { return weights_; }
    int32_t n_threads() const { return n_threads_; }

private:
    friend class CpuPassOps;  // the layer ops (cpu_forward.cpp)

    // The model's layer program over `pass` on st.h (forward/layer_program.h): outputs as
    // CpuPassOps takes them; the deferred path is applied and cleared.
    void run_pass(CpuSequenceState &st, const Pass &pass, float *logits, int32_t *argmax, float *features);
    void apply_pending(CpuSequenceState &st, int layer, int hv, float *S) const;
    void update_conv_cache(CpuSequenceState &st, int layer, const float *rows, int64_t row_stride,
                           const int32_t *order, int32_t n) const;

    ModelConfig config_;
    ModelWeights weights_;  // BF16 matrices packed (see weights())
    int32_t n_threads_;
};

}  // namespace specla
