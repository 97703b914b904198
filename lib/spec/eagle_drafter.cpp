#include "spec/eagle_drafter.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "util/error.h"
#include "util/log.h"
#include "util/seconds_since.h"

namespace specla {
namespace {

// Rows of the drafter's state at creation: catch-up chains are split into blocks of this many
// rows (a step consumes the accepted path plus one, a prompt is split), and draft passes grow the
// tree capacity when a tree needs more (ensure_tree_rows).
constexpr int32_t kCatchUpBlock = 64;
constexpr int32_t kInitialTreeRows = 64;

}  // namespace

EagleDrafter::EagleDrafter(std::unique_ptr<Backend> model) : model_(std::move(model)) {
    require(model_ != nullptr, SPECLA_ERR_INTERNAL, "EAGLE drafter without a model");
    D_ = model_->config().hidden_size;
    V_ = model_->config().vocab_size;
    limits_.max_batch_tokens = kCatchUpBlock;
    limits_.max_tree_nodes = kInitialTreeRows;
    state_ = model_->create_state(limits_);
    last_logits_.resize(size_t(V_));
    last_feature_.resize(size_t(D_));
}

std::unique_ptr<EagleDrafter> EagleDrafter::load(const std::string &folder, const Model &target) {
    return std::make_unique<EagleDrafter>(load_drafter_model(folder, target));
}

void EagleDrafter::restart(int64_t origin) {
    model_->reset_state(*state_);
    features_.clear();
    known_ = consumed_ = origin;
    last_token_ = -1;
    have_last_ = false;
    root_.clear();
}

void EagleDrafter::observe_features(int64_t first_position, const float *features, int32_t n_rows) {
    require(n_rows >= 0 && first_position >= 0 && (n_rows == 0 || features), SPECLA_ERR_INTERNAL,
            "EAGLE drafter: bad feature rows (first position ", first_position, ", ", n_rows, " rows)");
    if (n_rows == 0) return;
    if (first_position != known_) restart(first_position);  // not a continuation: a new sequence
    features_.insert(features_.end(), features, features + size_t(n_rows) * size_t(D_));
    known_ += n_rows;
}

void EagleDrafter::begin_generation(const SamplingConfig &sampling, Rng *rng) {
    sampling_ = sampling;
    rng_ = sampling.greedy() ? nullptr : rng;
}

void EagleDrafter::end_generation() {
    rng_ = nullptr;
    const DraftSeconds &t = draft_seconds_;
    auto mean_ms = [](double s, int64_t n) { return n > 0 ? 1e3 * s / double(n) : 0.0; };
    if (t.catch_ups + t.level_passes + t.one_calls > 0)
        log(SPECLA_LOG_DEBUG, "EAGLE drafter: ", t.catch_ups, " catch-up passes after the prompt's of ", mean_ms(t.catch_up, t.catch_ups),
            " ms (", t.folded, " of them inside a one-call tree, counted at a level's share), ", t.level_passes,
            " level passes of ", mean_ms(t.levels, t.level_passes), " ms, ", t.one_calls,
            " trees drafted in one device call of ", mean_ms(t.one_call, t.one_calls), " ms");
    draft_seconds_ = {};
}

void EagleDrafter::observe_verify_pass(int32_t n_nodes, double seconds) { cost_.observe_verify(n_nodes, seconds); }

void EagleDrafter::distribution(const float *logits, float *probs) const {
    if (rng_) {
        // Sampled: the target's own sampler shape (temperature, top-k/p, candidate ids) on the
        // drafter's logits; whatever q is, acceptance against it stays lossless.
        sampling_distribution(logits, V_, sampling_, probs);
        return;
    }
    // Greedy: only the ranking and the path scores matter; the plain softmax over the candidates.
    SamplingConfig plain;
    plain.temperature = 1.f;
    plain.n_candidates = sampling_.n_candidates;
    sampling_distribution(logits, V_, plain, probs);
}

bool EagleDrafter::follows_on(const std::vector<int32_t> &context) const {
    const int64_t n = int64_t(context.size());
    return known_ == n - 1 && (last_token_ < 0 || context[size_t(consumed_)] == last_token_);
}

void EagleDrafter::catch_up(const std::vector<int32_t> &context, int32_t top_k, int32_t n_cand) {
    const int64_t n = int64_t(context.size());
    // The invariant (eagle_drafter.md): features of every consumed position, and the last row
    // consumed read the token now at position consumed_. Otherwise this is another sequence, or
    // one whose features were not all given: restart where the next feature will come from (the
    // pending token's, returned by the next verification).
    if (!follows_on(context)) {
        restart(n - 1);
        return;
    }
    const int64_t rows = n - 1 - consumed_;  // positions consumed_ .. n-2
    if (rows <= 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    row_features_.resize(size_t(std::min<int64_t>(rows, kCatchUpBlock)) * size_t(D_));
    // Only the last row's outputs are the root: its top tokens (greedy drafting) or its logits.
    root_.clear();
    root_.resize(std::max(top_k, 0));
    for (int64_t off = 0; off < rows; off += kCatchUpBlock) {
        const int32_t m = int32_t(std::min<int64_t>(kCatchUpBlock, rows - off));
        const bool last = off + m == rows;
        RowFeatures rf;
        rf.in = features_.data() + size_t(off) * size_t(D_);
        rf.out = row_features_.data();
        TopTokens top;
        if (last && top_k > 0)
            top.k = top_k, top.n_candidates = n_cand, top.ids = root_.ids.data(), top.logp = root_.logp.data();
        const bool logits = last && top_k <= 0;
        model_->eval_chain(*state_, context.data() + consumed_ + off + 1, m,
                           logits ? LogitsRows::Last : LogitsRows::None, logits ? last_logits_.data() : nullptr, rf,
                           top);
        std::memcpy(last_feature_.data(), row_features_.data() + size_t(m - 1) * size_t(D_), size_t(D_) * sizeof(float));
    }
    if (top_k > 0) root_.k = top_k, root_.n_candidates = n_cand;
    else root_.logits = true;
    consumed(context, rows, seconds_since(t0));
}

void EagleDrafter::consumed(const std::vector<int32_t> &context, int64_t rows, double seconds) {
    // The tree builder counts the pass that gives the root distribution as one row.
    cost_.observe_draft(1, seconds);
    if (draft_seconds_.prompt_seen) {  // the first of a generation reads the prompt: not counted
        ++draft_seconds_.catch_ups;
        draft_seconds_.catch_up += seconds;
    }
    draft_seconds_.prompt_seen = true;
    features_.erase(features_.begin(), features_.begin() + rows * D_);
    consumed_ = int64_t(context.size()) - 1;
    last_token_ = context.back();
    have_last_ = true;
}

bool EagleDrafter::root_top(int32_t k, int32_t n_cand) {
    if (root_.k == k && root_.n_candidates == n_cand) return true;
    if (!root_.logits) return false;
    // A state caught up for whole logits (sampled drafting) drafting greedily now: from them.
    root_.resize(k);
    top_tokens(last_logits_.data(), n_cand, k, root_.ids.data(), root_.logp.data());
    root_.k = k, root_.n_candidates = n_cand;
    return true;
}

void EagleDrafter::ensure_tree_rows(int32_t rows) {
    if (rows <= limits_.max_tree_nodes) return;
    SessionLimits bigger = limits_;
    bigger.max_tree_nodes = std::max(rows, 2 * limits_.max_tree_nodes);
    auto state = model_->create_state(bigger);
    model_->copy_state(*state_, *state);
    state_ = std::move(state);
    limits_ = bigger;
}

void EagleDrafter::propose(const std::vector<int32_t> &context, const DraftBudget &budget, DraftTree &out) {
    out.clear();
    if (context.empty()) return;

    TreeParams tp;
    tp.max_nodes = budget.max_nodes;
    tp.max_depth = budget.max_depth;
    tp.top_k = budget.top_k;
    tp.prune_margin = budget.prune_margin;
    tp.size_from_cost = budget.size_from_cost;
    // Greedy: each row's top tokens are all the tree needs, taken where the logits are (on a GPU
    // the backend returns k ids and log-probabilities per row, not vocab-sized rows to scan on
    // the host). Sampled: whole distributions, which lossless acceptance needs.
    const bool top = !rng_ && tp.top_k >= 1 && tp.top_k <= kMaxTopTokens;
    const int32_t k = tp.top_k, n_cand = sampling_.candidates(V_);
    // Auto: fixed width where the backend prefers it (one device call, measured ahead of dynamic
    // trees at every node budget on the GPU; on the CPU, where a level costs its rows, it loses:
    // spec/eagle_drafter.md), else dynamic.
    const bool backend_one_call = model_->supports_fixed_width_draft(k);
    tp.fixed_width = top && (budget.shape == TreeShape::FixedWidth ||
                             (budget.shape == TreeShape::Auto && model_->prefers_fixed_width_draft(k)));
    const bool drafting = budget.max_nodes > 0 && budget.max_depth > 0;
    const bool one_call = drafting && tp.fixed_width && device_levels_ && tp.max_depth > 1 && backend_one_call;
    if (one_call && draft_with_catch_up(context, tp, k, n_cand)) {
        builder_.finish(&cost_, out, node_candidate_);
        return;
    }
    catch_up(context, top ? k : 0, n_cand);
    if (!have_last_ || !drafting) return;
    if (top) {
        if (!root_top(k, n_cand)) return;  // no root row for this request: nothing to draft
        builder_.start_top(tp, root_.ids.data(), root_.logp.data(), k, V_, &cost_);
    } else {
        if (!root_.logits) return;
        probs_.resize(size_t(V_));
        distribution(last_logits_.data(), probs_.data());
        builder_.start(tp, probs_.data(), V_, rng_, &cost_);
    }
    if (one_call && !builder_.frontier().empty()) {
        const int32_t levels = tp.max_depth - 1;
        replay_levels(k, levels, draft_levels_in_one_call(k, n_cand, levels, 0) / double(levels));
    } else {
        draft_levels(top, k, n_cand);
    }
    builder_.finish(&cost_, out, node_candidate_);
}

bool EagleDrafter::draft_with_catch_up(const std::vector<int32_t> &context, const TreeParams &tp, int32_t k,
                                       int32_t n_cand) {
    if (!follows_on(context)) return false;  // catch_up restarts the sequence
    const int64_t rows = int64_t(context.size()) - 1 - consumed_;
    if (rows < 1 || rows > kCatchUpBlock) return false;  // a prompt's blocks, or nothing to catch up
    const int32_t levels = tp.max_depth - 1;
    root_.clear();
    root_.resize(k);
    const double secs = draft_levels_in_one_call(k, n_cand, levels, int32_t(rows), context.data() + consumed_ + 1);
    root_.k = k, root_.n_candidates = n_cand;
    // One call did the catch-up's pass and the levels': each counted at an equal share.
    const double share = secs / double(levels + 1);
    consumed(context, rows, share);
    ++draft_seconds_.folded;
    builder_.start_top(tp, root_.ids.data(), root_.logp.data(), k, V_, &cost_);
    replay_levels(k, levels, share);
    return true;
}

void EagleDrafter::draft_levels(bool top, int32_t k, int32_t n_cand) {
    const size_t D = size_t(D_), V = size_t(V_);
    while (!builder_.frontier().empty()) {
        const std::vector<TreeCandidate> &cands = builder_.candidates();
        const std::vector<int32_t> &front = builder_.frontier();
        predicted_.resize(cands.size() * D);
        // The pass: the frontier's ancestors (each node must see its own path; they were
        // frontier nodes before, so their predicted features are known), in candidate order, which
        // is topological, then the frontier, the only rows whose outputs are needed.
        row_of_.assign(cands.size(), -1);
        constexpr int32_t kAncestor = -2;
        for (int32_t f : front)
            for (int32_t p = cands[size_t(f)].parent; p >= 0 && row_of_[size_t(p)] == -1; p = cands[size_t(p)].parent)
                row_of_[size_t(p)] = kAncestor;
        pass_candidates_.clear();
        for (int32_t c = 0; c < int32_t(cands.size()); ++c)
            if (row_of_[size_t(c)] == kAncestor) pass_candidates_.push_back(c);
        const int32_t first_row = int32_t(pass_candidates_.size());
        pass_candidates_.insert(pass_candidates_.end(), front.begin(), front.end());
        const int32_t rows = int32_t(pass_candidates_.size()), m = rows - first_row;
        ensure_tree_rows(rows);

        pass_tokens_.resize(size_t(rows));
        pass_parents_.resize(size_t(rows));
        pass_in_.resize(size_t(rows) * D);
        for (int32_t r = 0; r < rows; ++r) {
            const int32_t c = pass_candidates_[size_t(r)];
            row_of_[size_t(c)] = r;
            const int32_t parent = cands[size_t(c)].parent;
            pass_tokens_[size_t(r)] = cands[size_t(c)].token;
            pass_parents_[size_t(r)] = parent < 0 ? -1 : row_of_[size_t(parent)];
            const float *in = parent < 0 ? last_feature_.data() : predicted_.data() + size_t(parent) * D;
            std::memcpy(pass_in_.data() + size_t(r) * D, in, D * sizeof(float));
        }
        pass_features_.resize(size_t(m) * D);
        VerifyOutputs vo;
        if (top) {
            top_ids_.resize(size_t(m) * size_t(k));
            top_logp_.resize(size_t(m) * size_t(k));
            vo.top.k = k;
            vo.top.n_candidates = n_cand;
            vo.top.ids = top_ids_.data();
            vo.top.logp = top_logp_.data();
        } else {
            pass_logits_.resize(size_t(m) * V);
            vo.logits = pass_logits_.data();
        }
        vo.features.in = pass_in_.data();
        vo.features.out = pass_features_.data();
        vo.first_row = first_row;
        const auto t0 = std::chrono::steady_clock::now();
        model_->verify_tree(*state_, pass_tokens_.data(), pass_parents_.data(), rows, TreeAlgorithm::Auto, vo);
        // Counted by the rows the builder asked for (its estimate of a level's cost is keyed so).
        const double secs = seconds_since(t0);
        cost_.observe_draft(m, secs);
        ++draft_seconds_.level_passes;
        draft_seconds_.levels += secs;

        for (int32_t i = 0; i < m; ++i)
            std::memcpy(predicted_.data() + size_t(front[size_t(i)]) * D, pass_features_.data() + size_t(i) * D,
                        D * sizeof(float));
        if (top) {
            builder_.expand_top(top_ids_.data(), top_logp_.data(), k);  // invalidates cands and front
            continue;
        }
        probs_.resize(size_t(m) * V);
        for (int32_t i = 0; i < m; ++i)
            distribution(pass_logits_.data() + size_t(i) * V, probs_.data() + size_t(i) * V);
        builder_.expand(probs_.data(), V_);  // invalidates cands and front
    }
}

double EagleDrafter::draft_levels_in_one_call(int32_t k, int32_t n_cand, int32_t levels, int32_t catch_up_rows,
                                              const int32_t *catch_up_tokens) {
    ensure_tree_rows(model_->fixed_width_draft_rows(k, levels));
    const size_t w = size_t(k), L = size_t(levels);
    level_counts_.resize(L);
    level_tokens_.resize(L * w);
    level_parents_.resize(L * w);
    top_ids_.resize(L * w * w);
    top_logp_.resize(L * w * w);
    FixedWidthDraft d;
    d.width = k, d.levels = levels, d.n_candidates = n_cand;
    // The root row: the first draft position's top tokens and the depth-1 nodes' input feature,
    // written by the call when it catches up first.
    d.catch_up_rows = catch_up_rows;
    d.catch_up_tokens = catch_up_tokens;
    d.catch_up_features = catch_up_rows > 0 ? features_.data() : nullptr;
    d.root_ids = root_.ids.data(), d.root_logp = root_.logp.data(), d.root_feature = last_feature_.data();
    d.counts = level_counts_.data(), d.tokens = level_tokens_.data(), d.parents = level_parents_.data();
    d.ids = top_ids_.data(), d.logp = top_logp_.data();
    const auto t0 = std::chrono::steady_clock::now();
    model_->draft_fixed_width(*state_, d);
    const double secs = seconds_since(t0);
    ++draft_seconds_.one_calls;
    draft_seconds_.one_call += secs;
    return secs;
}

void EagleDrafter::replay_levels(int32_t k, int32_t levels, double seconds_per_level) {
    const size_t w = size_t(k);
    // The builder follows the same rule on the rows the device returns; every level's frontier
    // must be the one the device drafted from, or the rows would belong to other nodes.
    previous_front_.clear();
    for (int32_t l = 0; l < levels; ++l) {
        cost_.observe_draft(k, seconds_per_level);
        const std::vector<int32_t> &front = builder_.frontier();
        const std::vector<TreeCandidate> &cands = builder_.candidates();
        const int32_t count = level_counts_[size_t(l)];
        require(count == int32_t(front.size()), SPECLA_ERR_INTERNAL, "EAGLE drafter: level ", l + 1,
                " of fixed-width drafting has ", count, " nodes on the backend and ", front.size(), " on the host");
        if (count == 0) break;
        for (int32_t i = 0; i < count; ++i) {
            const TreeCandidate &c = cands[size_t(front[size_t(i)])];
            const int32_t row = level_parents_[size_t(l) * w + size_t(i)];
            const int32_t parent = row < 0 || row >= int32_t(previous_front_.size()) ? -1 : previous_front_[size_t(row)];
            require(c.token == level_tokens_[size_t(l) * w + size_t(i)] && c.parent == parent &&
                        (l == 0) == (row < 0),
                    SPECLA_ERR_INTERNAL, "EAGLE drafter: node ", i, " of level ", l + 1,
                    " differs between the backend's fixed-width drafting and the host's rule");
        }
        previous_front_ = front;
        builder_.expand_top(top_ids_.data() + size_t(l) * w * w, top_logp_.data() + size_t(l) * w * w, k);
    }
    require(builder_.frontier().empty(), SPECLA_ERR_INTERNAL,
            "EAGLE drafter: fixed-width drafting stopped before the depth budget");
}

}  // namespace specla
