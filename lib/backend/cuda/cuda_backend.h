// The CUDA backend (host side). Internal header: the engine reaches it through
// create_cuda_backend() (engine/backend.h), which loads it from the CUDA module
// (engine/cuda_module.h); tests and benchmarks link it and include this for the options and the
// timing hooks.
//
// A plain decoding step is one CUDA graph replay per sequence state: token id copied in from pinned
// memory, embedding gather, per layer 5 kernels (in_proj GEMV with RMSNorm prologue and
// conv/gates epilogue, recurrent step, o_proj GEMV with gated-norm prologue and residual epilogue,
// gate_up GEMV with RMSNorm prologue and SwiGLU epilogue, down GEMV with residual epilogue), the
// lm_head GEMV with final-norm prologue and a fused argmax, and the argmax copied out. Kernels are
// chained with programmatic dependent launch so each one's weight stream starts under the tail of
// the previous one. No allocation and no host synchronisation happen inside a step.
//
// A block of n > 1 tokens (prefill, chains) runs the projections as cuBLAS bf16 GEMMs (fp32
// accumulate, activations rounded to bf16), the conv/gates kernel, and the recurrence either in the
// chunk (WY) form on tensor cores (n >= chunk_min_tokens and a supported head shape) or with the
// state-resident recurrent kernel.
//
// Speculative verification (cuda_verify.cpp) runs a draft tree's n nodes through multi-row GEMVs
// with the decoding step's fp32 arithmetic, per-node conv windows along each node's path, and the
// recurrence as heavy-light chains (hybrid, bitwise equal to decoding each root path) or in the
// tree-masked WY form; the argmax of every node is taken on the device, and passes are replayed
// from captured graphs per launch shape. Commit keeps the per-node factors on the device; a
// deferred commit is applied by the next kernel that loads each state tile (verification, the
// decoding step's recurrent kernel through a device-side pending count, a recurrent block).
//
// A drafter model (spec/eagle_drafter.md; create_drafter_backend) is a backend of its own whose
// weights share the target's embeddings, final norm and output head on the device. Its rows start
// from x0 = fc @ concat(embedding[token], input feature) instead of the embedding
// (enqueue_rows_input), in blocks (eval_chain, one row included: it has no decoding step) and
// verification passes.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_util.h"
#include "backend/cuda/cuda_weights.h"
#include "engine/backend.h"
#include "launch_common.cuh"
#include "memory/gpu_arena.h"
#include "sampling.cuh"

namespace specla {

struct CudaBackendOptions {
    size_t arena_block_bytes = 0;   // 0: Arena::kDefaultBlockBytes
    size_t arena_budget_bytes = 0;  // cap on arena memory (0: none); tests use it for the OOM path
    bool use_graph = true;          // replay a captured graph per decoding step
    bool use_pdl = true;            // programmatic dependent launch between kernels
    int32_t chunk_min_tokens = 64;  // blocks of at least this many tokens use the chunk (WY) form
#ifdef SPECLA_KERNEL_TRACE
    // Diagnostics (bench_decode --trace; only in a build with SPECLA_KERNEL_TRACE): device buffer
    // that the decoding step's kernels fill with their timeline (kern::kOpTraceSlots words per
    // kernel: in_proj, recurrent, o_proj, gate_up, down per layer, then lm_head); null in normal use.
    unsigned long long *decode_trace = nullptr;
#endif
};

std::unique_ptr<Backend> create_cuda_backend_ex(const ModelConfig &config, const ModelWeights &weights,
                                                int32_t device, const CudaBackendOptions &options);
// With the default options: what the engine's create_cuda_backend() calls, through the module's
// entry table (engine/cuda_module.h) or, in programs that link the backend, directly.
std::unique_ptr<Backend> make_cuda_backend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                                           size_t arena_block_bytes);

namespace cuda {

// One sequence: recurrent state [L][HV][V][K] and conv cache [L][W-1][CC] (both fp32), and the
// scratch of one pass, all from the backend's arena; its own stream, cuBLAS handle and graph.
struct CudaSequenceState final : SequenceState {
    ~CudaSequenceState() override;

    int device = 0;
    int32_t capacity = 0;  // tokens per pass
    int32_t padded = 0;    // capacity rounded up to whole chunks
    int32_t logits_rows = 0;  // rows of the logits buffer (LogitsRows::All goes through it in slices)
    bool chunk_buffers = false;

    std::shared_ptr<Arena> arena;
    ArenaBuffer state_buf, conv_buf, scratch_buf;
    float *recurrent = nullptr, *conv = nullptr;

    // Scratch (pointers into scratch_buf).
    float *h = nullptr, *proj = nullptr, *gu = nullptr, *o = nullptr, *logits = nullptr;
    uint16_t *xb = nullptr;
    float *q = nullptr, *k = nullptr, *v = nullptr, *gl = nullptr, *beta = nullptr, *gam = nullptr;
    float *G = nullptr, *QK = nullptr, *Pm = nullptr, *Tb = nullptr, *Tu = nullptr, *W = nullptr, *U = nullptr;
    int32_t *d_tokens = nullptr, *d_sampled = nullptr;
    unsigned long long *d_argmax = nullptr;
    void *cublas_workspace = nullptr;
    size_t cublas_workspace_bytes = 0;
    kern::SamplingBuffers sampling;

    // Drafter models only: the fc input rows [capacity][2D] (embedding | input feature; scratch)
    // and the pinned copy of the caller's input features [capacity][D] that the (possibly
    // captured) pass copies from. Written by the host only after the stream has passed the
    // previous pass's copy (every pass ends with a stream synchronisation).
    float *row_in = nullptr;
    float *h_features = nullptr;

    // Pinned host memory the captured step reads from / writes to.
    size_t pinned_bytes = 0;  // all of this state's pinned buffers (session_memory)
    // cudaHostAlloc of `bytes`, counted in pinned_bytes; throws naming `what`.
    template <typename T>
    void alloc_pinned(T *&p, size_t bytes, const char *what) {
        void *raw = nullptr;
        check(cudaHostAlloc(&raw, bytes, cudaHostAllocDefault), what);
        p = static_cast<T *>(raw);
        pinned_bytes += bytes;
    }
    int32_t *h_tokens = nullptr;
    unsigned long long *h_argmax = nullptr;
    int32_t *h_sampled = nullptr;

    // ---- speculative verification (cuda_verify.cpp) ----
    // Factor rows of the last verification, per layer and node (F = max_tree_nodes + 1 nodes: the
    // session puts its pending token in front of the draft): normalised keys and log decays in two
    // sets used alternately (a pass reads the deferred path's rows of one set while it writes the
    // other), residuals u and pre-conv inputs in one (a pass reads the deferred path's u of a
    // column only in the CTA that then overwrites it; pre-conv inputs are consumed at commit).
    int32_t factor_rows = 0;
    ArenaBuffer factor_buf;
    float *factor_keys[2] = {nullptr, nullptr};        // [L][F][H*K] normalised keys
    float *factor_log_decays[2] = {nullptr, nullptr};  // [L][F][HV]
    float *factor_residuals = nullptr;                 // [L][F][HV*V] the delta-rule residuals u
    float *factor_preconv = nullptr;                   // [L][F][CC] (null without short conv)
    // Per-pass verification scratch and tables.
    ArenaBuffer verify_buf;
    float *verify_act = nullptr, *verify_beta = nullptr;  // [F][CC], [F][HV]
    unsigned long long *verify_argmax = nullptr;          // [F] packed argmax keys
    int32_t *tree_tables = nullptr;  // parents, chains, pairs, snapshot slots, conv taps (TableLayout, cuda_verify.cpp)
    int32_t *desc = nullptr;         // pending-commit descriptor [2 + F] (launch_common.cuh)
    size_t tree_tables_count = 0;
    int32_t *h_tree_tables = nullptr, *h_desc = nullptr;  // pinned mirrors
    unsigned long long *h_verify_argmax = nullptr;
    cudaEvent_t desc_event = nullptr;         // the last descriptor upload (h_desc reusable after it)
    ArenaBuffer snap_buf;                     // hybrid branch-point states of one layer (grows)
    int32_t snap_slots = 0;
    int32_t pending_count = 0;  // host mirror of desc[0]
    int32_t last_set = 1;       // factor set the last verification wrote
    bool verified = false;      // the factors hold an uncommitted verification
    int32_t verified_nodes = 0;
    std::vector<int32_t> verified_parents;  // of the last verified tree (benchmark hooks)
    struct VerifyGraph {
        std::vector<int32_t> key;  // launch shape (cuda_verify.cpp)
        cudaGraphExec_t exec;      // null: capture failed, run eagerly
    };
    std::vector<VerifyGraph> verify_graphs;
    std::vector<std::vector<int32_t>> verify_seen;  // shapes run once (captured the second time)
    void clear_verify_graphs();

    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    cudaGraphExec_t graph = nullptr;
    std::string decode_mode = "eager";  // "per-op" + ", graph+pdl" / ", graph" / ", eager"
    int64_t eager_steps = 0;
    bool graph_failed = false;
};

class CudaBackend final : public Backend {
public:
    CudaBackend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                const CudaBackendOptions &options);
    ~CudaBackend() override;

    specla_backend kind() const override { return SPECLA_BACKEND_CUDA; }
    const ModelConfig &config() const override { return config_; }
    std::unique_ptr<SequenceState> create_state(const SessionLimits &limits) override;
    void reset_state(SequenceState &state) override;
    void eval_chain(SequenceState &state, const int32_t *tokens, int32_t n, LogitsRows rows, float *logits,
                    const RowFeatures &features = RowFeatures()) override;
    int32_t decode_and_sample(SequenceState &state, int32_t token, const SamplingConfig &sampling, double u,
                              float *logits) override;
    void read_recurrent_state(SequenceState &state, int32_t layer, float *out) override;
    MemoryStats memory_stats() const override;
    void verify_tree(SequenceState &state, const int32_t *tokens, const int32_t *parents, int32_t n,
                     TreeAlgorithm algorithm, const VerifyOutputs &out) override;
    void commit_path(SequenceState &state, const int32_t *nodes, int32_t n, bool deferred) override;
    void flush_commit(SequenceState &state) override;
    void copy_state(SequenceState &from, SequenceState &to) override;
    void export_state(SequenceState &state, float *recurrent, float *conv) override;
    void import_state(SequenceState &state, const float *recurrent, const float *conv) override;
    // The drafter's backend on this device with this backend's options: its own fc and layer
    // uploaded (bf16 matrices), the embeddings, final norm and output head this backend's device
    // tensors, kept alive by shared ownership (no copy).
    std::unique_ptr<Backend> create_drafter_backend(const ModelConfig &config, ModelWeights own) const override;
    SessionMemory session_memory(const SequenceState &state) const override;
    void synchronize(SequenceState &state) override;
    // A drafter model (weights with fc): rows need input features, there is no decoding step.
    bool is_drafter() const { return weights_->fc != nullptr; }

    // The schedule TreeAlgorithm::Auto picks for a tree (cuda_verify.cpp states the rule).
    TreeAlgorithm auto_algorithm(const int32_t *parents, int32_t n) const;
    // Kernel-level timing (benchmarks) of one speculative step's state work over the last verified
    // tree, whose mixer inputs are reused: the recurrence of every layer plus the commit of `path`
    // (node indices of that tree), either fused into the recurrence (deferred) or as a separate
    // pass before it. Device milliseconds per step (median of `reps`); the state's values change.
    float time_recurrence_commit(SequenceState &state, const int32_t *path, int32_t n_path, bool deferred,
                                 TreeAlgorithm algorithm, int32_t reps);

    // ---- for tests and benchmarks ----
    int32_t device() const { return device_; }
    int32_t sm_count() const { return sm_count_; }
    const cuda::DeviceWeights &device_weights() const { return *weights_; }
    const CudaBackendOptions &options() const { return options_; }
    // Changes the options for states created afterwards and for later calls (benchmarks compare
    // variants on one copy of the weights); not thread-safe with concurrent calls.
    void set_options(const CudaBackendOptions &o) { options_ = o; }
    kern::LaunchCtx launch_ctx(cudaStream_t stream) const;
    // Replays `steps` decoding steps of `token` (state advances) and returns the milliseconds
    // between CUDA events around them, with no host synchronisation between steps.
    float time_decode_steps(SequenceState &state, int32_t token, int32_t steps);
    std::string decode_mode(SequenceState &state) const;
    // The factors of the deferred commit pending in `st` for one layer (applied by the next pass's
    // recurrent kernels while the device count is > 0), for a decoding step run outside the
    // backend on the state's buffers (bench/experiments/persistent_step).
    kern::PendingFactors pending_of(const CudaSequenceState &st, int layer) const;

private:
    // `head`: a drafter model's shared embeddings, final norm and output head (create_drafter_backend).
    CudaBackend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                const CudaBackendOptions &options, std::shared_ptr<const DeviceWeights> head);
    CudaSequenceState &cast(SequenceState &s) const;
    // Drafter models: checks that input features come exactly with a drafter model and copies
    // them (n x D, host) into st.h_features for the pass about to be enqueued.
    void stage_features(CudaSequenceState &st, const float *features_in, int32_t n);
    // Enqueue the pass's input rows st.h[0, n) from the tokens in st.d_tokens: the embedding
    // gather, or for a drafter model fc @ concat(embedding, staged feature). Optionally resets the
    // argmax slot of the pass's logits epilogue. Its first operation follows a copy (no PDL edge).
    void enqueue_rows_input(CudaSequenceState &st, int32_t n, unsigned long long *argmax_reset);
    // Enqueue one decoding step (reads the token from st.d_tokens after copying h_tokens[0]).
    void enqueue_decode(CudaSequenceState &st, bool pdl);
    void ensure_graph(CudaSequenceState &st);
    void run_decode(CudaSequenceState &st);
    // Enqueue a block of n > 1 tokens already in st.d_tokens.
    void enqueue_block(CudaSequenceState &st, int32_t n, LogitsRows rows, float *logits);
    void mix_block(CudaSequenceState &st, int layer, int32_t n);
    // Enqueue the copy of the residual rows [from, n) (RowFeatures::out) to host memory.
    void copy_features(CudaSequenceState &st, int32_t from, int32_t n, float *out);
    void gemm_bf16(CudaSequenceState &st, const uint16_t *w, int64_t rows, int64_t cols, const uint16_t *x,
                   int32_t n, float *y, float beta);
    // Speculative verification (cuda_verify.cpp).
    void init_verify(CudaSequenceState &st, const SessionLimits &limits);
    // The decoding step / a block consumed the pending factors inside its recurrent kernels.
    void pending_consumed(CudaSequenceState &st);
    struct TreeLaunch;
    void prepare_tree(CudaSequenceState &st, const int32_t *parents, int32_t n, TreeAlgorithm algorithm,
                      TreeLaunch &tl);
    void enqueue_tree_layer(CudaSequenceState &st, int layer, const TreeLaunch &tl, int set);
    void enqueue_verify(CudaSequenceState &st, const TreeLaunch &tl, int set);

    ModelConfig config_;
    int32_t device_ = 0;
    CudaBackendOptions options_;
    int32_t sm_count_ = 1;
    // The decoding step reads and writes a sequence's recurrent state through an L2 evict-last
    // policy (the weights stream evict-first) where the whole state fits in L2: it then stays there
    // from one step to the next. GDN-1.3B (48 MiB) on the H200: 1.0444 -> 1.0302 ms per step;
    // keeping only the first 6 or 12 layers: 1.0422 / 1.0427
    // (bench/journal/2026-11-30-recurrent-state-in-l2.md).
    bool keep_state_in_l2_ = false;
    std::shared_ptr<cuda::DeviceWeights> weights_;  // shared: a drafter backend holds its head
    std::shared_ptr<Arena> arena_;
};

}  // namespace cuda
}  // namespace specla
