// The CUDA backend (host side). Internal header: the engine reaches it through
// create_cuda_backend() (engine/backend.h), which loads it from the CUDA module
// (engine/cuda_module.h); tests and benchmarks link it and include this for the options and the
// timing hooks.
//
// Every pass runs the model's layer program (forward/layer_program.h) through this backend's layer
// ops (cuda_pass_ops.cpp), in one of three launch forms (CudaPassForm): the one-row decoding step
// (fused GEMVs), a block of rows (cuBLAS GEMMs, chunk or recurrent form), a verification tree
// (multi-row GEMVs in the one-row GEMV's order, hybrid or WY tree recurrence). Step and tree passes
// are replayed from graphs captured per launch shape (launch_pass); no allocation and no host
// synchronisation happen inside a pass.
//
// Commit keeps the per-node factors on the device (cuda_verify.cpp); a deferred commit is applied by
// the next kernel that loads each state tile (verification, the decoding step's recurrent kernel
// through a device-side pending count, a recurrent block).
//
// A drafter model (spec/eagle_drafter.md; create_drafter_backend) is a backend of its own whose
// weights share the target's embeddings, final norm and output head on the device. Its rows start
// from x0 = fc @ concat(embedding[token], input feature) instead of the embedding, in blocks
// (eval_chain, one row included: it has no decoding step) and verification passes.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_util.h"
#include "backend/cuda/cuda_weights.h"
#include "engine/backend.h"
#include "forward/commit_state.h"
#include "forward/pass.h"
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

    // Scratch (pointers into scratch_buf), `capacity` rows each unless said:
    //   h        residual rows [rows][D]           proj  in-projection rows [rows][q|k|v|gate|a|b]
    //   gu       MLP rows [rows][gate|up]          o     mixer head outputs
    //   logits   [logits_rows][vocab]              xb    bf16 activation rows (the block form's GEMMs)
    //   q, k, v  a block's conv outputs per head, rows padded to whole chunks; gl, beta its log
    //            decays and betas (the decoding step keeps all of these in proj)
    // The chunk (WY) form's per-chunk matrices, named as in backend/cpu/gdn_math.md section 3:
    //   gam      cumulative log decay inside each chunk
    //   G, QK    K K^T and Q K^T per key head and chunk ([C][C])
    //   Pm       (Q K^T) o M, the decay-masked scores
    //   Tb, Tu   T diag(beta o exp(gam)) and T diag(beta), T = (I + A)^-1
    //   W, U     Tb K and Tu V (so that the chunk's residuals are U - W S_0)
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
    // Sampled acceptance's row sampler (cuda_accept.cpp): a row's total and some of its
    // probabilities, on the device and their pinned mirror ([1 + kern::kTokenListMax]).
    double *d_gather = nullptr, *h_gather = nullptr;

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
    int32_t *tree_tables = nullptr;  // parents, chains, pairs, snapshot slots, conv taps (TreeTableLayout)
    int32_t *desc = nullptr;         // pending-commit descriptor [2 + F] (launch_common.cuh)
    size_t tree_tables_count = 0;
    int32_t *h_tree_tables = nullptr, *h_desc = nullptr;  // pinned mirrors
    unsigned long long *h_verify_argmax = nullptr;
    // Top tokens of a pass's output rows (VerifyOutputs::top): [F][kMaxTopTokens] ids then logps,
    // on the device and their pinned mirror.
    ArenaBuffer top_buf;
    int32_t *top_ids = nullptr, *h_top_ids = nullptr;
    float *top_logp = nullptr, *h_top_logp = nullptr;
    cudaEvent_t desc_event = nullptr;         // the last descriptor upload (h_desc reusable after it)
    ArenaBuffer snap_buf;                     // hybrid branch-point states of one layer (grows)
    int32_t snap_slots = 0;
    int32_t last_set = 1;       // factor set the last verification wrote
    // verified -> commit -> pending (forward/commit_state.h); its pending count mirrors desc[0].
    CommitState commit;
    std::vector<int32_t> verified_parents;  // of the last verified tree (benchmark hooks)

    // ---- fixed-width drafting (drafter models; cuda_draft.cpp) ----
    // For draft_width and up to draft_levels levels: the root row and feature (device, and the
    // pinned mirror the graph copies in), the per-level frontiers and top-token rows (device, and
    // the pinned mirror the graph copies out: counts, tokens, parents, ids, logps), each level's
    // frontier scores, the per-node conv window indices and the conv windows of 2 * width nodes.
    // The hybrid snapshot slots (snap_buf) hold the frontier nodes' states, 2 * width of them.
    int32_t draft_width = 0, draft_levels = 0;
    ArenaBuffer draft_buf;
    int32_t *draft_root = nullptr, *h_draft_root = nullptr;  // ids [W], logps [W], feature [D]
    int32_t *draft_out = nullptr, *h_draft_out = nullptr;    // FixedWidthDraft's outputs, in its order
    float *draft_scores = nullptr;                           // [levels][W]
    int32_t *draft_window_index = nullptr;                   // in [W], out [W]
    float *draft_windows = nullptr;                          // [2W][conv_size - 1][CC]
    size_t draft_root_count = 0, draft_out_count = 0;        // 4-byte words

    // Captured passes (CudaBackend::launch_pass), keyed by launch shape: a shape is run eagerly the
    // first time it is seen and captured the second time.
    struct PassGraph {
        std::vector<int32_t> key;
        cudaGraphExec_t exec;  // null: capture failed, run eagerly
        bool pdl;              // captured with programmatic dependent launch edges
    };
    std::vector<PassGraph> graphs;
    std::vector<std::vector<int32_t>> seen_shapes;
    void clear_graphs();
    // How this sequence's keyed passes ran (logged at debug level when the state goes): a pass
    // whose shape keeps changing (a drafter's trees) runs eagerly, at the host's launch rate.
    struct PassLaunchCounts {
        int64_t replays = 0, captures = 0, eager = 0;
    } pass_launches;

    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
};

// The device tables of a verification tree inside CudaSequenceState::tree_tables (F = factor rows,
// W = conv size): parents, conv taps per node, chain nodes and (start, length, snapshot slot) per
// chain, snapshot slot per node, ancestor-pair offsets (WY), (first chain, chains) per wave.
struct TreeTableLayout {
    size_t parents, taps, chain_nodes, chain_info, snap, pair_off, wave_info, total;
    TreeTableLayout(int32_t F, int32_t W) {
        const size_t f = size_t(F), w = size_t(W > 1 ? W - 1 : 1);
        parents = 0;
        taps = parents + f;
        chain_nodes = taps + f * w;
        chain_info = chain_nodes + f;
        snap = chain_info + 3 * f;
        pair_off = snap + f;
        wave_info = pair_off + f + 1;
        total = wave_info + 2 * f;
    }
};

// A verification tree's launch plan (CudaBackend::prepare_tree): the schedule and its waves.
struct TreeLaunch {
    int32_t n = 0;
    bool wy = false;
    int32_t n_pairs = 0;
    int32_t root_chains = 0;
    std::vector<std::pair<int32_t, int32_t>> waves;  // (first chain, chains) in wave order
    // Per wave, the chain slots launched: its chain count rounded up to a power of two, so that
    // trees differing only in how many chains a wave has share a launch shape (cuda_verify.cpp).
    std::vector<int32_t> wave_slots;
    // The longest chain's length rounded up to a power of two, at most the state's factor rows.
    int32_t chain_len_bound = 1;
    int32_t n_snapshots = 0;
};

// How a pass is launched (cuda_pass_ops.cpp states each form's kernels).
enum class CudaPassForm { Step, Block, Tree };

// A level pass of fixed-width drafting (cuda_draft.cpp): its tokens, input features and tree
// tables are already on the device (written by the beam step before it), its outputs stay there,
// and each node's conv window is its own (VerifyConvParams::window_in / window_out).
struct DraftLevelPass {
    const int32_t *window_in = nullptr, *window_out = nullptr;
    float *windows = nullptr;
};

struct CudaPassPlan {
    CudaPassForm form = CudaPassForm::Block;
    const DraftLevelPass *draft = nullptr;  // Tree form only: a fixed-width drafting level
    bool pdl = true;                   // programmatic dependent launch between kernels
    // Tree: the launch plan and the factor set the pass writes (the pending path is in the other).
    const TreeLaunch *tree = nullptr;
    int32_t set = 0;
    // Block: rows padded to whole chunks, whether the chunk (WY) form runs, and where the logits
    // the pass asks for go (host).
    int32_t padded_rows = 0;
    bool chunk = false;
    float *host_logits = nullptr;
    // Block: the last row's top tokens (kern::launch_top_tokens) into device memory, when
    // last_top_k > 0; the last row's logits are then computed whatever host_logits asks for, and
    // stay in the logits buffer's row 0 (through the one-row GEMV, as a block's last row always is)
    // unless the pass asks for more rows.
    int32_t last_top_k = 0, last_top_candidates = 0;
    int32_t *last_top_ids = nullptr;
    float *last_top_logp = nullptr;
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
                    const RowFeatures &features = RowFeatures(), const TopTokens &last_top = TopTokens()) override;
    int32_t decode_and_sample(SequenceState &state, int32_t token, const SamplingConfig &sampling, double u,
                              float *logits, float *features = nullptr) override;
    void read_recurrent_state(SequenceState &state, int32_t layer, float *out) override;
    MemoryStats memory_stats() const override;
    void verify_tree(SequenceState &state, const int32_t *tokens, const int32_t *parents, int32_t n,
                     TreeAlgorithm algorithm, const VerifyOutputs &out) override;
    void commit_path(SequenceState &state, const int32_t *nodes, int32_t n, bool deferred) override;
    void flush_commit(SequenceState &state) override;
    // For temperature, top-k and top-p over the whole vocabulary (what the device sampler does):
    // cuda_accept.cpp.
    std::unique_ptr<RowSampler> row_sampler(SequenceState &state, const SamplingConfig &sampling) override;
    // Drafter models of one layer, width^2 <= kern::kBeamMaxCandidates: cuda_draft.cpp.
    bool supports_fixed_width_draft(int32_t width) const override;
    bool prefers_fixed_width_draft(int32_t width) const override { return supports_fixed_width_draft(width); }
    int32_t fixed_width_draft_rows(int32_t width, int32_t) const override { return width; }
    void draft_fixed_width(SequenceState &state, const FixedWidthDraft &draft) override;
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

    // ---- for tests and benchmarks ----
    int32_t device() const { return device_; }
    int32_t sm_count() const { return sm_count_; }
    const cuda::DeviceWeights &device_weights() const { return *weights_; }
    const CudaBackendOptions &options() const { return options_; }
    kern::LaunchCtx launch_ctx(cudaStream_t stream) const;
    std::string decode_mode(SequenceState &state) const;
    // The factors of the deferred commit pending in `st` for one layer (applied by the next pass's
    // recurrent kernels while the device count is > 0), for a decoding step run outside the
    // backend on the state's buffers (bench/experiments/persistent_step).
    kern::PendingFactors pending_of(const CudaSequenceState &st, int layer) const;

private:
    friend class CudaPassOps;       // the layer ops (cuda_pass_ops.cpp)
    friend struct CudaBackendProbe;  // benchmark-only timing hooks (bench/cuda_probe.h, not in the library)

    // `head`: a drafter model's shared embeddings, final norm and output head (create_drafter_backend).
    CudaBackend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                const CudaBackendOptions &options, std::shared_ptr<const DeviceWeights> head);
    CudaSequenceState &cast(SequenceState &s) const;
    // Drafter models: checks that input features come exactly with a drafter model and copies
    // them (n x D, host) into st.h_features for the pass about to be enqueued.
    void stage_features(CudaSequenceState &st, const float *features_in, int32_t n);
    // Enqueue the model's layer program over `pass` (inputs already in the pinned mirrors).
    void enqueue_pass(CudaSequenceState &st, const Pass &pass, const CudaPassPlan &plan);
    // Launch a pass: replayed from the graph captured for its launch shape `key`, captured now
    // when the shape is seen the second time, else enqueued (an empty key: never captured).
    void launch_pass(CudaSequenceState &st, const Pass &pass, CudaPassPlan plan, const std::vector<int32_t> &key);
    // launch_pass's rule for any enqueued work: `enqueue(pdl)` replayed from the graph captured
    // for `key`, captured the second time the key is seen, else run as it is; `what` names it in
    // a warning when its capture fails.
    void launch_keyed(CudaSequenceState &st, const std::vector<int32_t> &key, bool pdl, const char *what,
                      const std::function<void(bool pdl)> &enqueue);
    // Fixed-width drafting (cuda_draft.cpp): its buffers for this width and depth, and the graph body.
    void ensure_draft_buffers(CudaSequenceState &st, int32_t width, int32_t levels);
    void enqueue_fixed_width_draft(CudaSequenceState &st, const TreeLaunch &tl, const FixedWidthDraft &d, int set,
                                   bool pdl);
    // One plain decoding step of the token in st.h_tokens[0].
    void run_decode(CudaSequenceState &st);
    // A block of n rows (eval_chain's, and a drafting call's catch-up): its launch plan, and the
    // device's pending count cleared after it (its recurrent kernels applied the factors).
    CudaPassPlan block_plan(const CudaSequenceState &st, int32_t n) const;
    void clear_pending_after_block(CudaSequenceState &st);
    // The top-token rows of a pass (st.top_ids, st.top_logp: `bytes` of each) to their pinned
    // mirror, enqueued; then, after the stream's synchronisation, to the caller's TopTokens.
    void copy_top_rows(CudaSequenceState &st, size_t bytes);
    static void read_top_rows(const CudaSequenceState &st, const TopTokens &out, size_t bytes);
    // Enqueue the copy of the residual rows [from, n) (RowFeatures::out) to host memory.
    void copy_features(CudaSequenceState &st, int32_t from, int32_t n, float *out);
    // Speculative verification (cuda_verify.cpp).
    void init_verify(CudaSequenceState &st, const SessionLimits &limits);
    void prepare_tree(CudaSequenceState &st, const int32_t *parents, int32_t n, TreeAlgorithm algorithm,
                      TreeLaunch &tl);
    void enqueue_tree_layer(CudaSequenceState &st, int layer, const TreeLaunch &tl, int set,
                            const kern::LaunchCtx &ctx);

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
