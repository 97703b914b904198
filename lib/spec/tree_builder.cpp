// Draft trees from a learned drafter's distributions.
//
// Candidates, scores, levels
//   A candidate's score is the sum of log q along its path (q: the drafter's distribution after
//   the parent, normalised by its sum; log q clamped to <= 0, so a child never outscores its
//   parent). Level 1 comes from start()'s root distribution; every expand() adds one level: the
//   children of the frontier, which holds nodes of the newest level only. Tokens of probability 0
//   are never drafted. Ties are broken by candidate index (creation order), so the result is a
//   function of the inputs (and, sampled, of the random stream) only.
//
// Greedy drafting (rng null), EAGLE-2:
//   * level 1: the top_k tokens of the root distribution (most probable first, lower id on ties);
//   * frontier: of the newest level's candidates, the top_k by score, skipping those below
//     best_score - prune_margin (best_score: the best candidate score so far; margin <= 0: no
//     margin) and, once there are max_nodes candidates, those whose score is at most the
//     max_nodes-th best score (their children, scored at most as high and created later, could
//     never enter the final tree); empty at depth max_depth;
//   * fixed width (params.fixed_width): the frontier is simply the newest level's top_k by
//     score, down to max_depth, so that every level has one shape (a backend may then run them
//     all in one device call); finish() prunes as below;
//   * expand(): each frontier node gets its top_k tokens as children, score = parent + log q;
//   * finish(): all candidates ranked by (score descending, index ascending), those below
//     best_score - prune_margin dropped, the first max_nodes kept. A child's score is at most its
//     parent's and its index larger, so a parent ranks first: every prefix of the ranking is
//     ancestor-closed and in topological order, which is the output order.
//   * Sizing from cost (params.size_from_cost and a cost model given; before any measurement its
//     CPU-like prior, so that the first trees are small and the sizes measured): with
//     v_i = exp(score_i), the drafter's estimate of the probability that node i is accepted,
//     a tree of the first n ranked nodes emits 1 + sum_{i<n} v_i tokens per pass on average
//     (the bonus plus each node's chance to be on the accepted path) at a cost of
//     verify_seconds(n) + D, D the drafting seconds this tree took: the cost model's estimate of
//     each drafter pass it used (the pass that gave the root distribution, counted as one row,
//     and one pass per expand() of the frontier's size; the caller feeds the model its measured
//     drafter passes through observe_draft). The tree keeps the n in [0, budget] maximising
//         (1 + sum_{i<n} v_i) / (verify_seconds(n) + D),
//     the smallest such n on ties. A flat cost (a GPU's) fills the budget; a cost linear in n (a
//     CPU's) keeps a node only while its v is worth a row of the pass. Without a cost model
//     the budget decides. (Gating on a calibrated model instead let a tree that filled the
//     budget from the first pass never be timed at another size, so a CPU kept verifying
//     full-budget trees: 16-node trees at 8 plain steps a pass on gdn-pycode-22m.)
//
// Sampled drafting (rng given): why the tree keeps acceptance lossless
//   accept_sampled (spec/accept.cpp) tries the children of the current position in node order;
//   child c with token x and row q_c (draft_dists row c) is accepted with min(1, p(x)/q_c(x)), and
//   on rejection p <- norm(max(0, p - q_c)). One round emits a token distributed as the current p
//   provided that, given everything that decided the tree up to child c (its ancestors, its
//   earlier siblings, the residual they left), child c exists with row q_c and x ~ q_c. Both halves
//   constrain the builder:
//   (a) the row recorded must be the row the token was drawn from. Children of a node are drawn
//       without replacement: sibling j's row is the parent's q with the tokens of siblings 0..j-1
//       set to 0, renormalised to sum 1 (the convention accept.cpp and draft_tree.h state), stored
//       as the float row that the draw (sample_from_distribution) used. Siblings keep their drawing
//       order in the tree, so node order is drawing order;
//   (b) whether child j exists may depend only on what was fixed before x_j was drawn. If it
//       depended on x_j itself (dropping a child because its own score is low), then given that
//       the child exists x_j would follow q_c restricted to the likely tokens, not q_c, and the
//       acceptance test, computed with q_c, would over-accept them. If a child's existence
//       depended on a later sibling's value, the same bias would enter through the back door.
//   So, in sampled mode:
//   * the decision to expand a node and how many children it gets depend on its path score
//     (fixed before its children are drawn), the newest level's scores (all drawn before) and
//     the node budget left (max_nodes - nodes drawn so far). A node's children are drawn until
//     top_k, that budget or the parent's support runs out (the last is decided by the earlier
//     siblings' tokens only). Margin pruning applies to the frontier only;
//   * finish() never drops a node because of its own score. It walks the nodes in drawing order and
//     keeps node i iff its parent is kept, its previous sibling is kept (a dropped sibling cuts
//     the whole suffix of its siblings, so the kept rows stay the without-replacement sequence),
//     and, when sizing from cost, adding it pays by an estimate fixed before it was drawn:
//         (1 + S + vhat_i) / (verify_seconds(n + 1) + D_i) >= (1 + S) / (verify_seconds(n) + D_i)
//     with n and S = sum exp(score) the count and values of the nodes kept before it (all drawn
//     before it), D_i the drafting seconds up to the pass that produced its row, and
//     vhat_i = exp(parent score) * sum_t row_i(t) q(t), the expected drafter probability of its
//     token before the draw. Nodes drawn and then dropped cost only drafter rows.
//   The greedy tree needs none of this: its children are deterministic (one-hot proposals) and
//   empty draft_dists.
#include "spec/tree_builder.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "engine/backend.h"
#include "sampling/sampler.h"
#include "util/error.h"

namespace specla {

namespace {

// Weight of a new observation in the moving average of a row count's seconds: a change of
// machine load or clock shows within a few passes, one noisy pass moves the estimate by a quarter.
constexpr double kPriorNodeCost = 0.1;
constexpr double kNewObservationWeight = 0.25;
// Denominator floor of the tokens-per-second ratio (a measured zero-second pass stays finite).
constexpr double kMinStepSeconds = 1e-12;

// Checks a probability row (finite, >= 0) and returns its sum.
double checked_row_sum(const float *row, int32_t vocab, const char *name, int32_t index) {
    double sum = 0;
    for (int32_t t = 0; t < vocab; ++t) {
        const float x = row[t];
        if (!(std::isfinite(x) && x >= 0.f)) {
            if (index < 0)
                fail(SPECLA_ERR_INVALID_ARGUMENT, "tree builder: ", name, "[", t, "] is ", x,
                     " (probabilities must be finite and >= 0)");
            fail(SPECLA_ERR_INVALID_ARGUMENT, "tree builder: ", name, " row ", index, " [", t, "] is ", x,
                 " (probabilities must be finite and >= 0)");
        }
        sum += double(x);
    }
    return sum;
}

bool ranks_before(const TreeCandidate &a, int32_t ia, const TreeCandidate &b, int32_t ib) {
    return a.score > b.score || (a.score == b.score && ia < ib);
}

}  // namespace

// ---- PassCostModel ---------------------------------------------------------------------------
//
// Per row count n, the seconds observed for passes of n (counted) rows, as a moving average (the
// first observation taken as is, then a weight of kNewObservationWeight per new one). An
// unmeasured n is estimated as follows:
//   * with two or more measured counts: linear interpolation between the two around n, and
//     outside them the line through the two nearest measured counts, with a slope clamped at 0
//     (a pass never gets cheaper with more rows). On a CPU (cost rising with rows) trees stay
//     small; on a GPU (flat cost) the next larger tree looks as cheap as the largest timed one,
//     is tried, timed, and kept or corrected;
//   * with one measured count n1 (seconds s1): the affine prior shape through it,
//     s1 * (1 + kPriorNodeCost * n) / (1 + kPriorNodeCost * n1);
//   * with none: unit * (1 + kPriorNodeCost * n), unit 1 for a verification and 0 for a drafter
//     pass (an unknown drafting cost is left out rather than guessed).
// The prior assumes a node costs a tenth of a pass's fixed part: a pass reads every weight once
// whatever its rows (gdn-pycode-22m on the CPU: 5 rows at 1.07 plain steps; a GPU: flat). A
// prior through the origin (each row as dear as the pending token's) made every tree of nodes
// less certain than 1 look a loss, so no other size was ever tried and measured.

void PassCostModel::RowCosts::observe(int32_t n, double s) {
    const auto [it, fresh] = seconds.emplace(n, s);
    if (!fresh) it->second += kNewObservationWeight * (s - it->second);
}

double PassCostModel::RowCosts::estimate(int32_t n, double unit_before_any) const {
    // Before two counts are measured, the affine prior: a pass costs a * (1 + kPriorNodeCost * n).
    if (seconds.empty()) return unit_before_any * (1.0 + kPriorNodeCost * double(n));
    if (seconds.size() == 1) {
        const auto [n1, s1] = *seconds.begin();
        return s1 * (1.0 + kPriorNodeCost * double(n)) / (1.0 + kPriorNodeCost * double(n1));
    }
    const auto hi = seconds.lower_bound(n);
    if (hi != seconds.end() && hi->first == n) return hi->second;
    // Outside the measured counts: the line through the two nearest ones, never falling.
    auto a = hi == seconds.begin() ? seconds.begin() : std::prev(hi);
    if (hi == seconds.end()) a = std::prev(a);
    const auto b = std::next(a);
    const double slope = (b->second - a->second) / double(b->first - a->first);
    if (hi == seconds.begin() || hi == seconds.end())
        return std::max(0.0, a->second + std::max(0.0, slope) * double(n - a->first));
    return a->second + slope * double(n - a->first);
}

void PassCostModel::observe_verify(int32_t n_nodes, double seconds) {
    require(n_nodes >= 0, SPECLA_ERR_INVALID_ARGUMENT, "pass cost model: n_nodes must be >= 0 (got ", n_nodes, ")");
    require(std::isfinite(seconds) && seconds >= 0, SPECLA_ERR_INVALID_ARGUMENT,
            "pass cost model: seconds must be finite and >= 0 (got ", seconds, ")");
    verify_.observe(n_nodes, seconds);
}

void PassCostModel::observe_draft(int32_t n_rows, double seconds) {
    require(n_rows >= 1, SPECLA_ERR_INVALID_ARGUMENT, "pass cost model: n_rows must be >= 1 (got ", n_rows, ")");
    require(std::isfinite(seconds) && seconds >= 0, SPECLA_ERR_INVALID_ARGUMENT,
            "pass cost model: seconds must be finite and >= 0 (got ", seconds, ")");
    draft_.observe(n_rows, seconds);
}

double PassCostModel::verify_seconds(int32_t n_nodes) const {
    require(n_nodes >= 0, SPECLA_ERR_INVALID_ARGUMENT, "pass cost model: n_nodes must be >= 0 (got ", n_nodes, ")");
    return verify_.estimate(n_nodes, 1.0);
}

double PassCostModel::draft_seconds(int32_t n_rows) const {
    require(n_rows >= 1, SPECLA_ERR_INVALID_ARGUMENT, "pass cost model: n_rows must be >= 1 (got ", n_rows, ")");
    return draft_.estimate(n_rows, 0.0);
}

bool PassCostModel::calibrated() const { return verify_.seconds.size() >= 2; }

// ---- TreeBuilder -----------------------------------------------------------------------------

void TreeBuilder::reset(const TreeParams &params, int32_t vocab, Rng *rng, const PassCostModel *cost) {
    require(params.top_k >= 1, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: top_k must be >= 1 (got ", params.top_k,
            ")");
    require(params.max_nodes >= 0, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: max_nodes must be >= 0 (got ",
            params.max_nodes, ")");
    require(params.max_depth >= 0, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: max_depth must be >= 0 (got ",
            params.max_depth, ")");
    require(!std::isnan(params.prune_margin), SPECLA_ERR_INVALID_ARGUMENT,
            "tree builder: prune_margin must not be NaN");
    require(vocab > 0, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: vocab must be positive (got ", vocab, ")");
    require(!(params.fixed_width && rng), SPECLA_ERR_INVALID_ARGUMENT,
            "tree builder: fixed-width levels are for greedy drafting (a sampled tree's shape must depend only on "
            "what was drawn before each node)");
    params_ = params;
    vocab_ = vocab;
    rng_ = rng;
    level_cost_ = params.size_from_cost ? cost : nullptr;
    candidates_.clear();
    rows_.clear();
    prior_value_.clear();
    pass_rows_.assign(1, 1);
    level_begin_ = 0;
}

void TreeBuilder::after_root() {
    best_score_ = -std::numeric_limits<float>::infinity();
    for (const TreeCandidate &c : candidates_) best_score_ = std::max(best_score_, c.score);
    compute_frontier();
}

void TreeBuilder::start(const TreeParams &params, const float *root_probs, int32_t vocab, Rng *rng,
                        const PassCostModel *cost) {
    require(root_probs != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: root_probs must not be NULL");
    require(vocab > 0, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: vocab must be positive (got ", vocab, ")");
    const double sum = checked_row_sum(root_probs, vocab, "root_probs", -1);
    reset(params, vocab, rng, cost);
    if (params_.max_depth >= 1 && params_.max_nodes >= 1)
        add_children(-1, root_probs, sum, rng_ ? std::min(params_.top_k, params_.max_nodes) : params_.top_k);
    after_root();
}

void TreeBuilder::start_top(const TreeParams &params, const int32_t *ids, const float *logp, int32_t k, int32_t vocab,
                            const PassCostModel *cost) {
    reset(params, vocab, nullptr, cost);
    check_top_rows(ids, logp, k, 1);
    if (params_.max_depth >= 1 && params_.max_nodes >= 1) add_ranked(-1, ids, logp, k, params_.top_k);
    after_root();
}

const std::vector<int32_t> &TreeBuilder::frontier() const { return frontier_; }

const std::vector<TreeCandidate> &TreeBuilder::candidates() const { return candidates_; }

void TreeBuilder::add_children(int32_t parent, const float *probs, double row_sum, int32_t max_children) {
    if (!(row_sum > 0) || max_children <= 0) return;  // nothing to draft after this node
    const size_t v = size_t(vocab_);
    // q: the drafter's distribution, normalised.
    normalised_.resize(v);
    for (size_t t = 0; t < v; ++t) normalised_[t] = float(double(probs[t]) / row_sum);
    const float *q = normalised_.data();
    const float parent_score = parent < 0 ? 0.f : candidates_[size_t(parent)].score;
    auto add = [&](int32_t token) { push_candidate(parent, token, std::log(q[token])); };

    if (!rng_) {
        // The top max_children tokens of positive probability, most probable first.
        ids_.clear();
        for (int32_t t = 0; t < vocab_; ++t)
            if (q[t] > 0.f) ids_.push_back(t);
        const size_t k = std::min(ids_.size(), size_t(max_children));
        std::partial_sort(ids_.begin(), ids_.begin() + std::ptrdiff_t(k), ids_.end(),
                          [&](int32_t a, int32_t b) { return q[a] > q[b] || (q[a] == q[b] && a < b); });
        for (size_t i = 0; i < k; ++i) add(ids_[i]);
        return;
    }

    // Sampled: draw without replacement. available = q with the tokens drawn so far removed; each
    // sibling's row is `available` renormalised, and the token is drawn from exactly that row.
    // One pass over the vocabulary per sibling writes its row and sums it (the draw's total), a
    // second finds the drawn token; the remaining mass is kept by subtraction (a sibling's row is
    // a proposal, q, which acceptance reads as it was written, so its normalisation need not be
    // exact). The sums run over four independent partial sums: the vocabulary-long chain of
    // dependent additions was most of a sibling's time.
    available_.assign(q, q + v);
    double mass = 0;
    {
        double part[4] = {0, 0, 0, 0};
        size_t t = 0;
        for (; t + 4 <= v; t += 4)
            for (size_t j = 0; j < 4; ++j) part[j] += double(available_[t + j]);
        for (; t < v; ++t) part[0] += double(available_[t]);
        mass = (part[0] + part[1]) + (part[2] + part[3]);
    }
    for (int32_t j = 0; j < max_children; ++j) {
        if (!(mass > 0)) break;  // the parent's support is exhausted
        const size_t at = rows_.size();
        rows_.resize(at + v);
        float *row = rows_.data() + at;
        const double inv = 1.0 / mass;
        double total[4] = {0, 0, 0, 0}, eq[4] = {0, 0, 0, 0};
        size_t t = 0;
        for (; t + 4 <= v; t += 4)
            for (size_t k = 0; k < 4; ++k) {
                const float r = float(double(available_[t + k]) * inv);
                row[t + k] = r;
                total[k] += double(r);
                eq[k] += double(r) * double(q[t + k]);
            }
        for (; t < v; ++t) {
            row[t] = float(double(available_[t]) * inv);
            total[0] += double(row[t]);
            eq[0] += double(row[t]) * double(q[t]);
        }
        const double row_total = (total[0] + total[1]) + (total[2] + total[3]);
        const double expected_q = (eq[0] + eq[1]) + (eq[2] + eq[3]);
        if (!(row_total > 0)) {  // every remaining entry underflowed in float
            rows_.resize(at);
            break;
        }
        const int32_t token = sample_from_distribution(row, vocab_, rng_->uniform(), row_total);
        prior_value_.push_back(std::exp(double(parent_score)) * expected_q);
        add(token);
        mass -= double(available_[size_t(token)]);
        available_[size_t(token)] = 0.f;
    }
}

void TreeBuilder::push_candidate(int32_t parent, int32_t token, float logp) {
    TreeCandidate c;
    c.token = token, c.parent = parent;
    c.depth = parent < 0 ? 1 : candidates_[size_t(parent)].depth + 1;
    c.logp = std::min(0.f, logp);
    c.score = (parent < 0 ? 0.f : candidates_[size_t(parent)].score) + c.logp;
    candidates_.push_back(c);
}

void TreeBuilder::add_ranked(int32_t parent, const int32_t *ids, const float *logp, int32_t k, int32_t max_children) {
    for (int32_t i = 0; i < std::min(k, max_children); ++i) {
        // A row's entries are in descending order: the first without a token or of probability
        // 0 ends it.
        if (ids[i] < 0 || logp[i] == -std::numeric_limits<float>::infinity()) return;
        push_candidate(parent, ids[i], logp[i]);
    }
}

void TreeBuilder::check_top_rows(const int32_t *ids, const float *logp, int32_t k, int32_t rows) const {
    require(!rng_, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: top-token rows are for greedy drafting");
    require(k >= 1 && k <= kMaxTopTokens, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: top-token rows of ", k,
            " entries (1..", kMaxTopTokens, ")");
    require(ids != nullptr && logp != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: top-token rows are NULL");
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t i = 0; i < k; ++i) {
            const int32_t id = ids[size_t(r) * size_t(k) + size_t(i)];
            const float lp = logp[size_t(r) * size_t(k) + size_t(i)];
            require(id >= -1 && id < vocab_ && !std::isnan(lp) && lp != std::numeric_limits<float>::infinity(),
                    SPECLA_ERR_INVALID_ARGUMENT, "tree builder: top-token row ", r, " entry ", i, " is (", id, ", ",
                    lp, "): ids in [-1, ", vocab_, "), log-probabilities not NaN or +inf");
            require(i == 0 || lp <= logp[size_t(r) * size_t(k) + size_t(i) - 1], SPECLA_ERR_INVALID_ARGUMENT,
                    "tree builder: top-token row ", r, " is not in descending order at entry ", i);
        }
}

void TreeBuilder::compute_frontier() {
    frontier_.clear();
    frontier_children_.clear();
    const int32_t n = int32_t(candidates_.size());
    if (level_begin_ >= n) return;  // the newest level is empty
    if (candidates_[size_t(level_begin_)].depth >= params_.max_depth) return;
    int32_t budget_left = params_.max_nodes - n;  // sampled mode: every node drawn is a node of the tree
    if (rng_ && budget_left <= 0) return;

    std::vector<int32_t> level;
    for (int32_t i = level_begin_; i < n; ++i) level.push_back(i);
    auto before = [&](int32_t a, int32_t b) {
        return ranks_before(candidates_[size_t(a)], a, candidates_[size_t(b)], b);
    };
    std::sort(level.begin(), level.end(), before);
    if (params_.fixed_width) {
        for (const int32_t i : level) {
            if (int32_t(frontier_.size()) >= params_.top_k) break;
            frontier_.push_back(i);
            frontier_children_.push_back(params_.top_k);
        }
        return;
    }

    const bool margin = params_.prune_margin > 0;
    const float floor = best_score_ - params_.prune_margin;
    // Greedy: once max_nodes candidates exist, a node at or below the max_nodes-th best score
    // cannot contribute a child to the final tree.
    bool beyond_budget = false;
    float kth_score = 0.f;
    if (!rng_ && n >= params_.max_nodes && params_.max_nodes > 0) {
        std::vector<float> scores;
        for (const TreeCandidate &c : candidates_) scores.push_back(c.score);
        std::nth_element(scores.begin(), scores.begin() + (params_.max_nodes - 1), scores.end(),
                         [](float a, float b) { return a > b; });
        kth_score = scores[size_t(params_.max_nodes - 1)];
        beyond_budget = true;
    }
    for (const int32_t i : level) {
        if (int32_t(frontier_.size()) >= params_.top_k) break;
        const float s = candidates_[size_t(i)].score;
        if (margin && s < floor) break;  // sorted: all further ones are lower
        if (beyond_budget && s <= kth_score) break;
        if (rng_) {
            if (budget_left <= 0) break;
            const int32_t children = std::min(params_.top_k, budget_left);
            budget_left -= children;
            frontier_children_.push_back(children);
        } else {
            frontier_children_.push_back(params_.top_k);
        }
        frontier_.push_back(i);
    }
    if (level_cost_ && !frontier_.empty() && !level_pays()) frontier_.clear(), frontier_children_.clear();
}

// Whether the next level's drafter pass pays for itself. The frontier's nodes can add at most
// the sum of their own values v = exp(score) in expected tokens (a child's value is its parent's
// times q <= 1); the tree so far promises at most T = 1 + the sum of all values at a cost of
// C = verify_seconds(its size within the budget) + the drafting seconds spent. The level is
// drawn when (T + gain) / (C + d) > T / C, d its drafter pass's seconds: on a CPU, where a
// drafter pass costs a good part of a plain step, deep unlikely levels are not drafted. An
// unmeasured drafter pass (d = 0) is always drawn, which measures it. In sampled mode this
// depends only on scores fixed before the children are drawn, as the lossless rule requires.
bool TreeBuilder::level_pays() const {
    double tokens = 1.0, gain = 0.0;
    for (const TreeCandidate &c : candidates_) tokens += std::exp(double(c.score));
    for (const int32_t f : frontier_) gain += std::exp(double(candidates_[size_t(f)].score));
    const double d = level_cost_->draft_seconds(int32_t(frontier_.size()));
    if (d <= 0) return true;
    const int32_t nodes = std::min(int32_t(candidates_.size()), params_.max_nodes);
    const double spent = level_cost_->verify_seconds(nodes) + drafting_seconds(*level_cost_, int32_t(pass_rows_.size()));
    return gain * spent > d * tokens;
}

void TreeBuilder::expand(const float *probs, int32_t vocab) {
    require(vocab_ > 0, SPECLA_ERR_STATE, "tree builder: expand() before start()");
    require(vocab == vocab_, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: expand() vocab ", vocab,
            " differs from start()'s ", vocab_);
    require(!frontier_.empty(), SPECLA_ERR_STATE, "tree builder: expand() on a complete tree (empty frontier)");
    require(probs != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "tree builder: probs must not be NULL");
    // Check every row before changing anything, so a bad row leaves the tree as it was.
    std::vector<double> sums(frontier_.size());
    for (size_t i = 0; i < frontier_.size(); ++i)
        sums[i] = checked_row_sum(probs + i * size_t(vocab_), vocab_, "probs", int32_t(i));

    add_level([&](size_t i, int32_t parent, int32_t children) {
        add_children(parent, probs + i * size_t(vocab_), sums[i], children);
    });
}

void TreeBuilder::expand_top(const int32_t *ids, const float *logp, int32_t k) {
    require(vocab_ > 0, SPECLA_ERR_STATE, "tree builder: expand_top() before start_top()");
    require(!frontier_.empty(), SPECLA_ERR_STATE, "tree builder: expand_top() on a complete tree (empty frontier)");
    check_top_rows(ids, logp, k, int32_t(frontier_.size()));  // before anything changes
    add_level([&](size_t i, int32_t parent, int32_t children) {
        add_ranked(parent, ids + i * size_t(k), logp + i * size_t(k), k, children);
    });
}

void TreeBuilder::add_level(const std::function<void(size_t, int32_t, int32_t)> &add_row) {
    const std::vector<int32_t> expanded = frontier_, children = frontier_children_;
    const int32_t new_level = int32_t(candidates_.size());
    pass_rows_.push_back(int32_t(expanded.size()));
    for (size_t i = 0; i < expanded.size(); ++i) add_row(i, expanded[i], children[i]);
    level_begin_ = new_level;
    for (size_t i = size_t(new_level); i < candidates_.size(); ++i)
        best_score_ = std::max(best_score_, candidates_[i].score);
    compute_frontier();
}

double TreeBuilder::drafting_seconds(const PassCostModel &cost, int32_t passes) const {
    double seconds = 0;
    for (int32_t l = 0; l < passes && l < int32_t(pass_rows_.size()); ++l)
        seconds += cost.draft_seconds(pass_rows_[size_t(l)]);
    return seconds;
}

void TreeBuilder::finish_greedy(const PassCostModel *cost, std::vector<int32_t> &kept) const {
    const int32_t n = int32_t(candidates_.size());
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) order[size_t(i)] = i;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return ranks_before(candidates_[size_t(a)], a, candidates_[size_t(b)], b);
    });
    const bool margin = params_.prune_margin > 0;
    const float floor = best_score_ - params_.prune_margin;
    for (const int32_t i : order) {
        if (int32_t(kept.size()) >= params_.max_nodes) break;
        if (margin && candidates_[size_t(i)].score < floor) break;
        kept.push_back(i);
    }
    if (!(params_.size_from_cost && cost)) return;

    // The prefix maximising expected tokens per second (see the top of this file).
    const double drafting = drafting_seconds(*cost, int32_t(pass_rows_.size()));
    size_t best_n = 0;
    double best_rate = 1.0 / std::max(cost->verify_seconds(0) + drafting, kMinStepSeconds), tokens = 1.0;
    for (size_t k = 1; k <= kept.size(); ++k) {
        tokens += std::exp(double(candidates_[size_t(kept[k - 1])].score));
        const double rate = tokens / std::max(cost->verify_seconds(int32_t(k)) + drafting, kMinStepSeconds);
        if (rate > best_rate) best_rate = rate, best_n = k;
    }
    kept.resize(best_n);
}

void TreeBuilder::finish_sampled(const PassCostModel *cost, std::vector<int32_t> &kept) const {
    const int32_t n = int32_t(candidates_.size());
    const bool sized = params_.size_from_cost && cost;
    std::vector<char> is_kept(static_cast<size_t>(n), 0);
    std::vector<char> siblings_cut(static_cast<size_t>(n) + 1, 0);  // [parent + 1]
    double tokens = 1.0;  // 1 + the values of the nodes kept so far
    for (int32_t i = 0; i < n; ++i) {
        const TreeCandidate &c = candidates_[size_t(i)];
        const size_t slot = size_t(c.parent + 1);
        bool keep = (c.parent < 0 || is_kept[size_t(c.parent)]) && !siblings_cut[slot];
        if (keep && sized) {
            const int32_t k = int32_t(kept.size());
            const double drafting = drafting_seconds(*cost, c.depth);
            const double without = std::max(cost->verify_seconds(k) + drafting, kMinStepSeconds);
            const double with = std::max(cost->verify_seconds(k + 1) + drafting, kMinStepSeconds);
            keep = (tokens + prior_value_[size_t(i)]) * without >= tokens * with;
        }
        if (!keep) {
            siblings_cut[slot] = 1;
            continue;
        }
        is_kept[size_t(i)] = 1;
        kept.push_back(i);
        tokens += std::exp(double(c.score));
    }
}

void TreeBuilder::finish(const PassCostModel *cost, DraftTree &out, std::vector<int32_t> &node_candidate) {
    require(vocab_ > 0, SPECLA_ERR_STATE, "tree builder: finish() before start()");
    out.clear();
    node_candidate.clear();
    std::vector<int32_t> kept;
    if (rng_) finish_sampled(cost, kept);
    else finish_greedy(cost, kept);

    std::vector<int32_t> node_of(candidates_.size(), -1);
    for (const int32_t i : kept) {
        const TreeCandidate &c = candidates_[size_t(i)];
        const int32_t parent = c.parent < 0 ? -1 : node_of[size_t(c.parent)];
        require(c.parent < 0 || parent >= 0, SPECLA_ERR_INTERNAL, "tree builder: candidate ", i,
                " kept without its parent ", c.parent);
        node_of[size_t(i)] = out.add(c.token, parent);
        node_candidate.push_back(i);
        if (rng_) {
            const float *row = rows_.data() + size_t(i) * size_t(vocab_);
            out.draft_dists.insert(out.draft_dists.end(), row, row + vocab_);
        }
    }
}

}  // namespace specla
