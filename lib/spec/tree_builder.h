// Dynamic draft trees from a learned drafter's distributions (EAGLE-2 style, see
// spec/eagle_drafter.md): best-first expansion by cumulative log-probability, top-k children per
// expanded node, confidence pruning, node and depth budgets, and a tree size chosen from the
// measured costs of verification passes on the backend that runs them. Pure bookkeeping: the
// drafter evaluates the nodes this class asks for and hands back their distributions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "sampling/rng.h"
#include "engine/draft_tree.h"

namespace specla {

struct TreeParams {
    int32_t max_nodes = 32;     // node budget of the final tree
    int32_t max_depth = 8;      // depth budget (a node's depth: 1 for a child of the context end)
    int32_t top_k = 4;          // children drawn per expanded node, and nodes expanded per level
    float prune_margin = 8.f;   // keep nodes whose score is within this many nats of the best
                                // path's; <= 0: no margin pruning
    bool size_from_cost = true; // choose the node count from the measured costs (else fill the budget)
    // Greedy only: every level's frontier is the newest level's top_k candidates by score, with
    // no margin, budget or cost cut, down to max_depth (finish() still applies all three). Every
    // level then has the same shape, which lets a backend run all of a tree's drafter passes in
    // one device call (Backend::draft_fixed_width, kernels/beam_draft.cuh, follows this rule).
    bool fixed_width = false;
};

struct TreeCandidate {
    int32_t token = -1;
    int32_t parent = -1;   // candidate index, -1: a child of the context end
    int32_t depth = 1;
    float logp = 0.f;      // log q of the token under the drafter's distribution after its parent
                           // (the full row; a sampled sibling's without-replacement row, which
                           // it was drawn from, is its draft_dists row)
    float score = 0.f;     // cumulative logp along the path (the path's drafter log-probability)
};

// Measured seconds of the passes a tree costs, per number of rows, so the tree size fits the
// backend: on a CPU a verification of n nodes costs about n steps, on a GPU about one. Until
// measured, a prior that assumes a pass costs as much as n + 1 plain rows (a CPU's) keeps trees
// small; measurements replace it per row count. The exact estimate (moving average per count,
// interpolation, prior) is described in tree_builder.cpp. Bad arguments (negative counts, NaN,
// infinite or negative seconds) throw SPECLA_ERR_INVALID_ARGUMENT.
class PassCostModel {
public:
    // A target verification pass over n_nodes draft nodes (plus the pending token's row).
    void observe_verify(int32_t n_nodes, double seconds);
    // One drafter pass (a catch-up chain or a draft level) of n_rows rows.
    void observe_draft(int32_t n_rows, double seconds);
    double verify_seconds(int32_t n_nodes) const;
    // 0 until a drafter pass has been observed (an unknown drafting cost is left out, not guessed).
    double draft_seconds(int32_t n_rows) const;
    // Verification passes of at least two different node counts observed: the model then knows
    // the cost's slope instead of assuming one (TreeBuilder sizes trees before that too, from
    // the prior, so that the sizes get measured).
    bool calibrated() const;

private:
    // Per row count: a moving average of the observed seconds.
    struct RowCosts {
        std::map<int32_t, double> seconds;
        void observe(int32_t n, double s);
        double estimate(int32_t n, double unit_before_any) const;
    };
    RowCosts verify_, draft_;
};

class TreeBuilder {
public:
    // Start a tree from the drafter's distribution of the first draft position (probabilities,
    // `vocab` floats). rng null: greedy drafting, children are the top-k tokens (deterministic,
    // one-hot proposals). rng given: sampled generation, children are drawn without replacement
    // from the distribution, and the tree keeps the rows they were drawn from (draft_dists), so
    // that acceptance stays lossless; the rules that keep it so are in tree_builder.cpp.
    // cost (may be null; used when params.size_from_cost): a level is expanded only while the
    // tokens it can add are worth its drafter pass (see compute_frontier in tree_builder.cpp).
    void start(const TreeParams &params, const float *root_probs, int32_t vocab, Rng *rng,
               const PassCostModel *cost = nullptr);
    // The candidates whose children the drafter should produce next (one drafter pass for all of
    // them); empty when the tree is complete (depth budget, node budget or margin reached).
    const std::vector<int32_t> &frontier() const;
    // probs row i: the drafter's next-token probabilities after frontier()[i] (`vocab` floats).
    void expand(const float *probs, int32_t vocab);
    const std::vector<TreeCandidate> &candidates() const;

    // Greedy drafting from each row's top tokens (engine/backend.h TopTokens: k ids per row, most
    // probable first, id -1 for none, and their log-probabilities) instead of whole
    // distributions: the same tree as start()/expand() build from the rows those tokens come
    // from, when k >= params.top_k (up to the rounding of the log-probabilities, and but for
    // tokens whose probability underflows in float, which the full rows drop). Greedy only: sampled
    // drafting needs every row for lossless acceptance.
    void start_top(const TreeParams &params, const int32_t *ids, const float *logp, int32_t k, int32_t vocab,
                   const PassCostModel *cost = nullptr);
    // Rows in frontier() order, k entries each.
    void expand_top(const int32_t *ids, const float *logp, int32_t k);

    // The final tree: topological, ancestor-closed, at most max_nodes nodes (fewer when the cost
    // model says a smaller tree pays more); node_candidate[i] is the candidate index of node i.
    // cost may be null (then the budget decides).
    // With rng given, finish() never drops a drawn node because of its own score (see
    // tree_builder.cpp); the cost model then decides node by node in drawing order, on estimates
    // fixed before each node was drawn, and draft_dists holds each node's row.
    void finish(const PassCostModel *cost, DraftTree &out, std::vector<int32_t> &node_candidate);

private:
    void compute_frontier();
    bool level_pays() const;
    // start()'s checks and clearing, without the root's children.
    void reset(const TreeParams &params, int32_t vocab, Rng *rng, const PassCostModel *cost);
    void after_root();
    void add_children(int32_t parent, const float *probs, double row_sum, int32_t max_children);
    // Greedy: the first max_children entries of a top-token row of positive probability.
    void add_ranked(int32_t parent, const int32_t *ids, const float *logp, int32_t k, int32_t max_children);
    void push_candidate(int32_t parent, int32_t token, float logp);
    void check_top_rows(const int32_t *ids, const float *logp, int32_t k, int32_t rows) const;
    // A level of children: add_row(i, frontier()[i], children it may get) per frontier node.
    void add_level(const std::function<void(size_t, int32_t, int32_t)> &add_row);
    double drafting_seconds(const PassCostModel &cost, int32_t levels) const;
    void finish_greedy(const PassCostModel *cost, std::vector<int32_t> &kept) const;
    void finish_sampled(const PassCostModel *cost, std::vector<int32_t> &kept) const;

    TreeParams params_;
    int32_t vocab_ = 0;
    Rng *rng_ = nullptr;
    const PassCostModel *level_cost_ = nullptr;  // start()'s cost model when sizing from cost
    std::vector<TreeCandidate> candidates_;
    std::vector<int32_t> frontier_;
    std::vector<int32_t> frontier_children_;  // children each frontier node gets (its top_k,
                                              // or what the node budget leaves, sampled mode)
    int32_t level_begin_ = 0;          // first candidate of the newest level
    float best_score_ = 0.f;           // the best candidate score so far
    // Rows of each drafter pass this tree used: [0] the pass that gave the root distribution
    // (counted as one row), then one entry per expand() (the frontier's size).
    std::vector<int32_t> pass_rows_;
    // Sampled mode, per candidate: the row it was drawn from (vocab floats each) and the
    // drafter's estimate, made before the draw, of the probability that it is accepted.
    std::vector<float> rows_;
    std::vector<double> prior_value_;
    std::vector<float> normalised_, available_;
    std::vector<int32_t> ids_;
};

}  // namespace specla
