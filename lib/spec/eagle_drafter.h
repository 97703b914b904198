// The learned EAGLE-style drafter (spec/eagle_drafter.md): one Gated DeltaNet layer that reads
// the target's features, run on a backend of the target's kind through the engine's own chain
// and tree passes, with trees shaped by TreeBuilder (spec/tree_builder.h).
//
// Per proposal after a context x_0..x_{n-1} (x_{n-1} pending, positions 0-based):
//   1. catch-up, committed: one chain over the rows not yet consumed, row i = (x_{i+1}, f_i)
//      with the target's true feature f_i, up to row n-2; its last row's logits give the first
//      draft position's distribution and its output feature the input of the first level;
//   2. one draft pass per level: the frontier nodes (and their ancestors, so that each node sees
//      its own path) as a tree on the committed state, input feature of a node = its parent's
//      predicted feature, outputs only for the frontier rows; the state does not change;
//   3. TreeBuilder keeps the tree; the caller verifies it and hands back the committed rows'
//      features (observe_features), restoring the invariant of eagle_drafter.md.
// Greedy drafting needs only the root row's top tokens, which the catch-up takes where the logits
// are; a greedy fixed-width tree on a backend with Backend::draft_fixed_width runs 1 and 2 in one
// call (the root's top tokens and feature never leave the device before the levels need them).
// A sequence whose features do not follow on (a reset session, a context without features)
// restarts the drafter's state from zero at the next feature it is given; until it has a row to
// catch up from, proposals are empty.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/model.h"
#include "spec/drafter.h"
#include "spec/tree_builder.h"

namespace specla {

class EagleDrafter : public Drafter {
public:
    // `model`: a drafter model (load_drafter_model) for the target whose features it reads.
    explicit EagleDrafter(std::unique_ptr<Backend> model);
    // Loads the drafter folder for `target` (model/drafter_checkpoint.h states the checks).
    static std::unique_ptr<EagleDrafter> load(const std::string &folder, const Model &target);

    void propose(const std::vector<int32_t> &context, const DraftBudget &budget, DraftTree &out) override;
    bool wants_features() const override { return true; }
    void observe_features(int64_t first_position, const float *features, int32_t n_rows) override;
    void begin_generation(const SamplingConfig &sampling, Rng *rng) override;
    void end_generation() override;
    void observe_verify_pass(int32_t n_nodes, double seconds) override;

    const PassCostModel &cost_model() const { return cost_; }
    const ModelConfig &config() const { return model_->config(); }
    // For tests: the drafter model, its committed state, and the positions its rows have consumed
    // ([origin, consumed_positions()): the row of position p read token p + 1 and feature f_p).
    Backend &model() { return *model_; }
    SequenceState &state() { return *state_; }
    int64_t consumed_positions() const { return consumed_; }
    // For tests: trees drafted with their catch-up in the same backend call, this generation.
    int64_t catch_ups_in_one_call() const { return draft_seconds_.folded; }
    // For tests: whether fixed-width trees may be drafted in one backend call where the backend
    // has it (the default); false drafts them level by level, the reference it must equal.
    void allow_one_call_drafting(bool allow) { device_levels_ = allow; }

private:
    // Forget the sequence: the next rows start from a zero state at position `origin`.
    void restart(int64_t origin);
    // Whether `context` continues the sequence the state has consumed (else catch_up restarts).
    bool follows_on(const std::vector<int32_t> &context) const;
    // Consume the rows not yet read; the last one's outputs become the root: its top tokens when
    // top_k > 0 (greedy drafting), else its logits.
    void catch_up(const std::vector<int32_t> &context, int32_t top_k, int32_t n_cand);
    // Bookkeeping after `rows` rows were consumed up to the context's end in `seconds`.
    void consumed(const std::vector<int32_t> &context, int64_t rows, double seconds);
    // The root's top tokens for this request (from its logits if it has those instead); false:
    // the root row has neither (a state caught up for another request), so nothing is drafted.
    bool root_top(int32_t k, int32_t n_cand);
    // The drafter's proposal distribution from a row of logits.
    void distribution(const float *logits, float *probs) const;
    void ensure_tree_rows(int32_t rows);
    // The tree's levels after the root: one drafter pass per level through verify_tree (top:
    // greedy top-token rows, else whole distributions), or, for a fixed-width tree, every level in
    // one Backend::draft_fixed_width call, whose frontiers are checked against the builder's.
    void draft_levels(bool top, int32_t k, int32_t n_candidates);
    // Backend::draft_fixed_width from the root row, or (catch_up_rows > 0) from the rows to catch
    // up, whose root it writes; the caller then replays the levels (replay_levels) through the
    // builder started on the root. Returns the call's seconds.
    double draft_levels_in_one_call(int32_t k, int32_t n_candidates, int32_t levels, int32_t catch_up_rows,
                                    const int32_t *catch_up_tokens = nullptr);
    // The whole greedy fixed-width proposal in one backend call, catch-up included (the common
    // case during generation: the accepted rows, then the tree); false where it does not apply
    // (a restart, a prompt longer than one block, nothing to catch up), and nothing was done.
    bool draft_with_catch_up(const std::vector<int32_t> &context, const TreeParams &tp, int32_t k,
                             int32_t n_candidates);
    // TreeBuilder's fixed-width rule over the levels a one-call draft returned, checked against them.
    void replay_levels(int32_t k, int32_t levels, double seconds_per_level);

    std::unique_ptr<Backend> model_;
    SessionLimits limits_;
    std::unique_ptr<SequenceState> state_;
    int32_t D_ = 0, V_ = 0;

    // Features f_p of positions [consumed_, known_) not yet read by a drafter row.
    std::vector<float> features_;
    int64_t known_ = 0;     // features are known for the positions before this
    int64_t consumed_ = 0;  // drafter rows consumed: those of positions [origin, consumed_)
    int32_t last_token_ = -1;  // the token of the last consumed row (x_{consumed_}), -1: none
    // Outputs of the last consumed row: the first level's input feature and the root row, the
    // first draft position's top tokens for (k, n_candidates) or its logits (last_logits_).
    bool have_last_ = false;
    std::vector<float> last_logits_, last_feature_;
    struct RootRow {
        int32_t k = 0, n_candidates = -1;  // top tokens valid for this request (k 0: none)
        bool logits = false;               // last_logits_ valid
        std::vector<int32_t> ids;
        std::vector<float> logp;
        void clear() { k = 0, n_candidates = -1, logits = false; }
        void resize(int32_t entries) { ids.resize(size_t(entries)), logp.resize(size_t(entries)); }
    } root_;

    SamplingConfig sampling_;
    Rng *rng_ = nullptr;
    PassCostModel cost_;
    TreeBuilder builder_;

    // Scratch of propose().
    std::vector<float> probs_, row_features_, pass_in_, pass_logits_, pass_features_, predicted_;
    std::vector<int32_t> top_ids_;  // greedy drafting: each row's top tokens (TopTokens)
    std::vector<float> top_logp_;
    std::vector<int32_t> pass_tokens_, pass_parents_, pass_candidates_, row_of_, node_candidate_;
    // Scratch of draft_levels_in_one_call().
    bool device_levels_ = true;
    std::vector<int32_t> level_counts_, level_tokens_, level_parents_, previous_front_;
    // A generation's drafter time by kind, for the debug log at its end (end_generation()).
    struct DraftSeconds {
        int64_t catch_ups = 0, level_passes = 0, one_calls = 0, folded = 0;
        double catch_up = 0, levels = 0, one_call = 0;
        bool prompt_seen = false;
    } draft_seconds_;
};

}  // namespace specla
