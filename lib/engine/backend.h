// The interface between the model-level code (sessions, generation, speculative decoding) and
// the hardware. A backend owns the model's weights in its own layout and creates the
// per-sequence state (recurrent state, conv cache, scratch) that it alone reads and writes.
// Two implementations: lib/backend/cpu (the reference, and the engine when no GPU is present)
// and lib/backend/cuda.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/weights.h"
#include "specla/specla.h"

namespace specla {

enum class LogitsRows { None, Last, All };

// One row's sampling distribution p at a time, over a verification's rows that stay where the
// backend keeps them (Backend::row_sampler): what sampled acceptance of one-hot proposals needs.
class RowSampler {
public:
    virtual ~RowSampler() = default;
    // p := the sampling distribution of row `row` of the last verify_tree.
    virtual void select(int32_t row) = 0;
    // total = the sum of p (its float probabilities added in double), probs[i] = p(ids[i]).
    virtual void probabilities(const int32_t *ids, int32_t n, double &total, double *probs) = 0;
    // sample_from_distribution's rule over p with the tokens `removed` at 0: the first id whose
    // cumulative mass exceeds u times the total.
    virtual int32_t draw(const int32_t *removed, int32_t n_removed, double u) = 0;
};

// Sampled acceptance (spec/accept.cpp): a rejection whose residual's mass is below this is rounding
// noise (p <= q everywhere), and the distribution is kept as it was. One definition for the host
// rule and a backend's own.
constexpr double kAcceptResidualFloor = 1e-6;

// How a draft tree's recurrence is evaluated (engine/tree_recurrence.md): heavy-light chains with
// the state resident inside each chain and only branch-point states materialised, or the
// parallel tree-masked WY (chunk) form. Auto lets the backend pick per tree shape.
enum class TreeAlgorithm { Auto, Hybrid, ParallelWY };

struct SessionLimits {
    int32_t max_tree_nodes = 64;     // largest draft tree verified at once
    int32_t max_batch_tokens = 512;  // largest block evaluated in one pass
};

// What the sampler needs besides the logits; the uniform variate is drawn by the caller so that
// every backend makes the same decision from the same random stream.
struct SamplingConfig {
    float temperature = 0.f;  // below SPECLA_LIMIT_MIN_TEMPERATURE (0 included): greedy
    int32_t top_k = 0;        // 0: off
    float top_p = 1.f;        // >= 1: off
    // Ids at or above this are not candidates: their probability is 0 (as if their logits were
    // -inf), greedy never picks them. Used for a model vocabulary padded beyond its tokenizer's,
    // whose padding ids are not tokens. 0 (or >= vocab): every id is a candidate.
    int32_t n_candidates = 0;
    // The transformations of lib/sampling/sampler.h (the order is documented there), each off at
    // its default. Bias and penalties depend on the tokens before the sampled position.
    std::vector<std::pair<int32_t, float>> logit_bias;  // (token, added to its logit)
    float repetition_penalty = 1.f;  // > 0; 1: off
    float presence_penalty = 0.f;    // 0: off
    float frequency_penalty = 0.f;   // 0: off
    int32_t penalty_last_n = 64;     // tokens of the history the penalties count; -1: all; 0: none
    float min_p = 0.f;               // 0: off
    // A positive temperature below the limit has no finite float reciprocal; its distribution is
    // the argmax's anyway.
    bool greedy() const { return !(temperature >= SPECLA_LIMIT_MIN_TEMPERATURE) || top_k == 1; }
    // How many leading ids of a `vocab`-wide row are candidates.
    int32_t candidates(int32_t vocab) const {
        return n_candidates > 0 && n_candidates < vocab ? n_candidates : vocab;
    }
    bool restricts(int32_t vocab) const { return candidates(vocab) < vocab; }
    bool penalizes() const {
        return penalty_last_n != 0 && (repetition_penalty != 1.f || presence_penalty != 0.f || frequency_penalty != 0.f);
    }
    // Whether the logits are transformed before selection (bias, penalties): the distribution
    // then depends on the history, which only the host-side sampler sees.
    bool transforms() const { return !logit_bias.empty() || penalizes(); }
    // Whether a backend's own sampler (which knows temperature, top-k and top-p over the whole
    // vocabulary only) cannot make the choice: the logits must come to the host.
    bool needs_host_sampler(int32_t vocab) const {
        return restricts(vocab) || transforms() || (!greedy() && min_p > 0.f);
    }
};

// Per-row feature vectors of a pass (spec/eagle_drafter.md), host memory, D = hidden_size floats
// per row. Either pointer may be null.
struct RowFeatures {
    // Every row's input feature (n x D), for drafter models (weights with fc) only, which start
    // a row from fc @ concat(embedding[token], feature); required by them, refused by others.
    const float *in = nullptr;
    // The rows' last hidden state after the last layer, before the final norm (what the output
    // head turns into the row's logits): eval_chain writes all n rows, verify_tree the rows from
    // VerifyOutputs::first_row on.
    float *out = nullptr;
};

// Where a verification's results go (host memory); any pointer may be null. A greedy acceptance
// needs only the argmax, which a GPU backend computes without copying logits. Outputs are written
// for the rows t >= first_row only, row t at index t - first_row of each buffer (so n - first_row
// rows); a drafter's per-level passes ask only for the newest level's rows.
// The k most probable tokens of each output row, most probable first (the larger logit, the lower
// id on ties), and their log-probabilities under the softmax of the row's first n_candidates
// logits (sampling/logprobs.h top_tokens, the reference): what greedy drafting needs of a row,
// computed where the logits are (on a GPU, no vocab-sized row crosses to the host). Slots beyond
// n_candidates, and ids of logit -inf: id -1, logp -inf.
struct TopTokens {
    int32_t k = 0;             // 0: not asked for; else 1..kMaxTopTokens
    int32_t n_candidates = 0;  // ids >= this are not tokens (a padded vocabulary)
    int32_t *ids = nullptr;    // (n - first_row) x k
    float *logp = nullptr;     // (n - first_row) x k
};
constexpr int32_t kMaxTopTokens = 64;  // SPECLA_LIMIT_DRAFT_TOP_K
// A backend's check of a request with k > 0 (an engine caller's mistake: SPECLA_ERR_INTERNAL).
void check_top_tokens(const TopTokens &top, int32_t vocab);

struct VerifyOutputs {
    float *logits = nullptr;   // (n - first_row) x vocab
    int32_t *argmax = nullptr; // n - first_row
    TopTokens top;             // (n - first_row) rows
    RowFeatures features;      // in: n x D (every row); out: (n - first_row) x D
    int32_t first_row = 0;     // 0 <= first_row < n
};

// Greedy fixed-width drafting by a drafter model in one call (spec/eagle_drafter.md): the rule of
// TreeBuilder's fixed-width mode (spec/tree_builder.h, TreeParams::fixed_width), run from the
// committed state, the first draft position's top tokens and the feature the first level reads,
// as `levels` drafter passes of `width` rows, each row a frontier node evaluated on its parent's
// state (kernels/beam_draft.cuh on the GPU, all levels in one captured graph; on the CPU the
// level passes through verify_tree, engine/fixed_width_draft.h). Host memory.
struct FixedWidthDraft {
    int32_t width = 0;         // nodes per level and entries per top-token row (the tree's top_k)
    int32_t levels = 0;        // drafter passes: the frontiers of depth 1..levels are expanded
    int32_t n_candidates = 0;  // as TopTokens::n_candidates
    // The catch-up, in the same call (catch_up_rows > 0): first the committed chain of these rows,
    // exactly as eval_chain(tokens, rows, LogitsRows::None, null, {features}, last_top {width,
    // n_candidates}) advances the state; its last row is the root, and root_ids, root_logp and
    // root_feature are written (its top tokens and its output feature). With 0 rows they are read:
    // the root of a state already caught up. 1 <= catch_up_rows <= max_batch_tokens.
    int32_t catch_up_rows = 0;
    const int32_t *catch_up_tokens = nullptr;  // [catch_up_rows]
    const float *catch_up_features = nullptr;  // [catch_up_rows][hidden_size] the rows' input features
    int32_t *root_ids = nullptr;    // [width] the first draft position's top tokens (TopTokens)
    float *root_logp = nullptr;     // [width]
    float *root_feature = nullptr;  // [hidden_size] the depth-1 nodes' input feature
    // Out, per level l = 0..levels-1 (the frontier of depth l + 1): its size, its nodes' tokens and
    // their parents' rows in the frontier before (-1 at depth 1), and the top tokens of its rows
    // (rows past the size are not frontier nodes: ignore them).
    int32_t *counts = nullptr;   // [levels]
    int32_t *tokens = nullptr;   // [levels][width]
    int32_t *parents = nullptr;  // [levels][width]
    int32_t *ids = nullptr;      // [levels][width][width]
    float *logp = nullptr;       // [levels][width][width]
};
// A backend's check of a FixedWidthDraft's request as such (levels, the buffers, the candidate
// and catch-up counts; width and state sizes are each backend's own): an engine caller's mistake,
// SPECLA_ERR_INTERNAL.
void check_fixed_width_draft(const FixedWidthDraft &draft, int32_t vocab);

// Bytes one session's state holds on its backend: every buffer it owns, as allocated (HostVec
// capacities; arena allocations rounded as the arena rounds them; pinned staging as requested).
// Driver objects (streams, graphs, cuBLAS handles) and worker threads are not counted.
struct SessionMemory {
    size_t state_bytes = 0;    // recurrent state + conv cache: what plain decoding needs
    size_t factor_bytes = 0;   // per-node commit factors for max_tree_nodes (+ the pending token)
    size_t scratch_bytes = 0;  // activations, logits, tree snapshots, sampling, staging of a pass
    // The same bytes by where they live: host_bytes + device_bytes == the sum of the three above.
    size_t host_bytes = 0;
    size_t device_bytes = 0;
};

struct MemoryStats {
    size_t weight_bytes = 0;           // weights resident on the backend
    size_t arena_reserved_bytes = 0;   // device memory taken in blocks (CUDA)
    size_t arena_used_bytes = 0;       // sub-allocated and live
    size_t arena_peak_bytes = 0;
    int32_t arena_blocks = 0;
    int32_t live_allocations = 0;
};

// Opaque per-sequence state; each backend defines its own subclass.
class SequenceState {
public:
    virtual ~SequenceState() = default;
};

class Backend {
public:
    virtual ~Backend() = default;

    virtual specla_backend kind() const = 0;
    virtual const ModelConfig &config() const = 0;

    // A zeroed state able to evaluate blocks up to limits.max_batch_tokens tokens.
    // Throws SPECLA_ERR_OUT_OF_MEMORY without side effects when memory is short.
    virtual std::unique_ptr<SequenceState> create_state(const SessionLimits &limits) = 0;
    virtual void reset_state(SequenceState &state) = 0;

    // Advance the state by `n` tokens (1 <= n <= max_batch_tokens; ids already validated) and
    // write fp32 logits to host memory: none, the last row, or all n rows (row-major, vocab wide);
    // features (RowFeatures): the rows' input features (drafter models) and all n rows' output
    // features; last_top (k > 0): the last row's top tokens (TopTokens, one row), taken where its
    // logits are, whatever `rows` asks for (a drafter's root row: spec/eagle_drafter.h).
    virtual void eval_chain(SequenceState &state, const int32_t *tokens, int32_t n, LogitsRows rows,
                            float *logits, const RowFeatures &features = RowFeatures(),
                            const TopTokens &last_top = TopTokens()) = 0;

    // One plain decoding step: feed `token`, return the next token chosen by `sampling` with the
    // uniform variate `u` in [0, 1), following lib/sampling/sampler.h exactly (the GPU samples on
    // the device so that only the token id crosses to the host); `logits` (may be null) receives
    // the step's logits, `features` (may be null) the fed token's output feature (hidden_size
    // floats, as eval_chain's RowFeatures::out: what a drafter reading features needs of a plain
    // step).
    virtual int32_t decode_and_sample(SequenceState &state, int32_t token, const SamplingConfig &sampling,
                                      double u, float *logits, float *features = nullptr) = 0;

    // Speculative verification: evaluate every node of a draft tree (topological, parents[i] < i,
    // -1 = child of the committed context) on top of the committed state without changing it,
    // writing the requested per-node outputs (host) and keeping per-node factors (normalised key, delta
    // residual, log decay, pre-conv inputs) for commit_path. Pending factors of an earlier
    // deferred commit are applied first, inside the same pass. 1 <= n <= max_tree_nodes.
    virtual void verify_tree(SequenceState &state, const int32_t *tokens, const int32_t *parents, int32_t n,
                             TreeAlgorithm algorithm, const VerifyOutputs &out);
    // Make the nodes of a root-to-leaf path of the last verified tree part of the committed
    // state, from the stored factors (no token is recomputed). The conv cache is updated at
    // once; the recurrent state either at once or, when `deferred`, inside the next pass that
    // loads it (verify_tree, eval_chain) or at flush_commit.
    virtual void commit_path(SequenceState &state, const int32_t *nodes, int32_t n, bool deferred);
    virtual void flush_commit(SequenceState &state);

    // The sampling distributions of a verification's rows where its logits are, for sampled
    // acceptance without copying them (spec/accept.h, accept_sampled_rows); null where the
    // backend has none for this config (the caller then copies the rows: accept_sampled). Use it
    // right after the verify_tree whose rows it reads and before the state's next pass, which
    // overwrites them.
    virtual std::unique_ptr<RowSampler> row_sampler(SequenceState &state, const SamplingConfig &sampling) {
        return nullptr;
    }

    // Whether draft_fixed_width runs here for this width (a drafter model's backend that has it;
    // otherwise the caller drafts level by level through verify_tree, which gives the same tree).
    virtual bool supports_fixed_width_draft(int32_t width) const { return false; }
    // Whether a greedy tree of TreeShape::Auto should be fixed width here: where draft_fixed_width
    // is one device call, measured ahead of dynamic trees at every node budget (CUDA); not where
    // it runs as the level passes (engine/fixed_width_draft.h: the CPU, where a level costs its
    // rows and dynamic trees draft fewer of them).
    virtual bool prefers_fixed_width_draft(int32_t width) const { return false; }
    // The tree rows (SessionLimits::max_tree_nodes) a state needs for draft_fixed_width: the
    // passes form verifies a level's frontier with its ancestors (up to width x levels rows);
    // a backend that evaluates each row on its parent's state needs one level's rows.
    virtual int32_t fixed_width_draft_rows(int32_t width, int32_t levels) const { return width * levels; }
    // FixedWidthDraft's drafting; the committed state is left as it was, or advanced by the
    // catch-up rows only (the level passes never change it). Throws
    // SPECLA_ERR_UNSUPPORTED where supports_fixed_width_draft is false.
    virtual void draft_fixed_width(SequenceState &state, const FixedWidthDraft &draft);

    // Copy one layer's recurrent state to host memory as [HV, V, K] fp32 (fla's layout).
    virtual void read_recurrent_state(SequenceState &state, int32_t layer, float *out) = 0;

    virtual MemoryStats memory_stats() const = 0;

    // Copy the committed state (recurrent state and conv cache, pending factors applied first)
    // of one sequence into another of the same backend (benchmark baselines, forking).
    virtual void copy_state(SequenceState &from, SequenceState &to);

    // The committed state in the canonical layout every backend shares (session state files,
    // lib/session/session_state.md): `recurrent` [L][HV][V][K] fp32 (fla's layout, as
    // read_recurrent_state), `conv` [L][W-1][conv_channels] fp32, oldest input first (nothing
    // without short conv). Export applies pending factors first; import replaces the state and
    // leaves no pending factors and no verification to commit.
    virtual void export_state(SequenceState &state, float *recurrent, float *conv);
    virtual void import_state(SequenceState &state, const float *recurrent, const float *conv);

    // A backend of this one's kind and settings for a drafter model (spec/eagle_drafter.md):
    // `own` holds the drafter's own tensors (fc and its layers); the embeddings, final norm and
    // output head are this model's (the CPU backend copies them; the CUDA backend shares its
    // device tensors).
    // Throws SPECLA_ERR_UNSUPPORTED where the backend cannot run drafter models.
    virtual std::unique_ptr<Backend> create_drafter_backend(const ModelConfig &config, ModelWeights own) const;
    virtual SessionMemory session_memory(const SequenceState &state) const;
    // Wait until the state's queued device work is done (timing); CPU work is synchronous.
    virtual void synchronize(SequenceState &state) {}
    // How many prompt tokens a generation feeds per block between two checks for an abort
    // request (lib/generate/generation.h), within the session's max_batch_tokens; 0: the
    // largest block. A backend whose results do not depend on the block size, and whose small
    // blocks cost no more per token, returns a block short enough to stop quickly.
    virtual int32_t interruptible_block_tokens() const { return 0; }
};

std::unique_ptr<Backend> create_cpu_backend(const ModelConfig &config, ModelWeights weights, int32_t n_threads);

// Loads the CUDA module on first use (engine/cuda_module.h, lib/engine/cuda_module.cpp) and creates
// the backend there. Throws SPECLA_ERR_BACKEND_UNAVAILABLE when the library is built without CUDA,
// when the module or the CUDA libraries it needs cannot be loaded (naming what is missing), or
// when no usable device `device` exists.
std::unique_ptr<Backend> create_cuda_backend(const ModelConfig &config, const ModelWeights &weights,
                                             int32_t device, size_t arena_block_bytes);

}  // namespace specla
