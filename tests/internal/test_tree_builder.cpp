// The draft tree builder (spec/tree_builder.h): structure of the trees it builds (topological,
// ancestor-closed, budgets, margin, no zero-probability tokens, deterministic), the greedy EAGLE-2
// tree of a hand-made distribution set, sizing from the pass cost model (a flat "GPU" cost fills
// the budget, a linear "CPU" cost keeps the confident nodes), the without-replacement rows of
// sampled trees, and the losslessness of sampled acceptance over the builder's sampled trees as
// a chi-square test of the first two emitted tokens (with negative controls it must reject).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "sampling/logprobs.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "spec/accept.h"
#include "engine/draft_tree.h"
#include "engine/fixed_width_draft.h"
#include "spec/tree_builder.h"
#include "support/stats.h"
#include "util/error.h"

using namespace specla;

namespace {

struct Caught {
    specla_status status = SPECLA_OK;
    std::string message;
};

Caught caught(const std::function<void()> &f) {
    Caught c;
    try {
        f();
    } catch (const Error &e) {
        c.status = e.status();
        c.message = e.what();
    }
    return c;
}

// A drafter whose next-token distribution depends on the last token only: rows[last] (vocab
// floats each), and `root` after the context.
struct TableDrafter {
    int32_t vocab = 0;
    std::vector<float> root;
    std::vector<float> rows;  // vocab x vocab
    const float *after(int32_t token) const { return rows.data() + size_t(token) * size_t(vocab); }
};

struct Built {
    DraftTree tree;
    std::vector<int32_t> node_candidate;
    std::vector<TreeCandidate> candidates;
    int32_t passes = 0;  // expand() calls
};

// Drives the builder the way the EAGLE drafter does: one pass per level over the frontier.
Built build(TreeBuilder &b, const TableDrafter &d, const TreeParams &params, Rng *rng,
            const PassCostModel *cost = nullptr, const PassCostModel *level_cost = nullptr) {
    Built out;
    b.start(params, d.root.data(), d.vocab, rng, level_cost);
    std::vector<float> probs;
    while (!b.frontier().empty()) {
        probs.clear();
        for (const int32_t f : b.frontier()) {
            const float *row = d.after(b.candidates()[size_t(f)].token);
            probs.insert(probs.end(), row, row + d.vocab);
        }
        b.expand(probs.data(), d.vocab);
        ++out.passes;
    }
    b.finish(cost, out.tree, out.node_candidate);
    out.candidates = b.candidates();
    return out;
}

Built build(const TableDrafter &d, const TreeParams &params, Rng *rng, const PassCostModel *cost = nullptr) {
    TreeBuilder b;
    return build(b, d, params, rng, cost);
}

std::string show(const DraftTree &t) {
    std::ostringstream os;
    for (int32_t i = 0; i < t.size(); ++i) os << t.tokens[size_t(i)] << "@" << t.parents[size_t(i)] << " ";
    return os.str();
}

// A random drafter: rows of a random softmax sharpness, some entries zero, some rows all zero.
TableDrafter random_drafter(int32_t vocab, Rng &r) {
    TableDrafter d;
    d.vocab = vocab;
    auto row = [&](float *out, bool may_be_empty) {
        const double sharp = 0.5 + 3.0 * r.uniform();
        for (int32_t t = 0; t < vocab; ++t) {
            const bool zero = r.uniform() < 0.3;
            out[t] = zero ? 0.f : float(std::exp(sharp * 3.0 * r.uniform()));
        }
        if (may_be_empty && r.uniform() < 0.05) std::fill(out, out + vocab, 0.f);
        out[r.next() % uint64_t(vocab)] += may_be_empty ? 0.f : 1.f;  // the root is never empty
    };
    d.root.resize(size_t(vocab));
    row(d.root.data(), false);
    d.rows.resize(size_t(vocab) * size_t(vocab));
    for (int32_t t = 0; t < vocab; ++t) row(d.rows.data() + size_t(t) * size_t(vocab), true);
    return d;
}

double row_sum(const float *row, int32_t vocab) {
    double s = 0;
    for (int32_t t = 0; t < vocab; ++t) s += row[t];
    return s;
}

// The parent's (normalised) distribution a node's token came from.
std::vector<double> parent_q(const TableDrafter &d, const Built &b, int32_t node) {
    const int32_t p = b.tree.parents[size_t(node)];
    const float *row = p < 0 ? d.root.data() : d.after(b.tree.tokens[size_t(p)]);
    const double s = row_sum(row, d.vocab);
    std::vector<double> q(size_t(d.vocab));
    for (int32_t t = 0; t < d.vocab; ++t) q[size_t(t)] = double(row[t]) / s;
    return q;
}

// Random budgets (top_k 1..max_top_k, up to 39 nodes, depth up to 6, a margin or none), the
// budget filled rather than sized from costs.
TreeParams random_params(Rng &r, int32_t max_top_k) {
    TreeParams params;
    params.top_k = 1 + int32_t(r.next() % uint64_t(max_top_k));
    params.max_nodes = int32_t(r.next() % 40);
    params.max_depth = int32_t(r.next() % 7);
    params.prune_margin = r.uniform() < 0.3 ? 0.f : float(6.0 * r.uniform());
    params.size_from_cost = false;
    return params;
}

void check_structure(const TableDrafter &d, const TreeParams &params, const Built &b, bool sampled) {
    const DraftTree &t = b.tree;
    INFO("tree: ", show(t));
    REQUIRE(t.parents.size() == t.tokens.size());
    REQUIRE(b.node_candidate.size() == t.tokens.size());
    validate_tree(t.tokens.data(), t.parents.data(), t.size(), d.vocab);  // topological, in range
    CHECK(t.size() <= params.max_nodes);
    const std::vector<int32_t> depth = node_depths(t.parents.data(), t.size());
    float best = -std::numeric_limits<float>::infinity();
    for (const TreeCandidate &c : b.candidates) best = std::max(best, c.score);
    std::vector<int32_t> children(size_t(t.size()) + 1, 0);
    for (int32_t i = 0; i < t.size(); ++i) {
        const TreeCandidate &c = b.candidates[size_t(b.node_candidate[size_t(i)])];
        const int32_t p = t.parents[size_t(i)];
        // The node is its candidate, under its candidate's parent (ancestor-closed).
        CHECK(c.token == t.tokens[size_t(i)]);
        CHECK(c.parent == (p < 0 ? -1 : b.node_candidate[size_t(p)]));
        CHECK(c.depth == depth[size_t(i)]);
        CHECK(depth[size_t(i)] <= params.max_depth);
        ++children[size_t(p + 1)];
        // Never a token of probability 0; the score is the path's log-probability.
        const std::vector<double> q = parent_q(d, b, i);
        CHECK(q[size_t(c.token)] > 0);
        CHECK(c.logp == doctest::Approx(std::log(q[size_t(c.token)])).epsilon(1e-5));
        const float parent_score = p < 0 ? 0.f : b.candidates[size_t(b.node_candidate[size_t(p)])].score;
        CHECK(c.score == doctest::Approx(parent_score + c.logp).epsilon(1e-5));
        // The margin: expanded nodes (parents) are within it; greedy keeps only nodes within it.
        if (params.prune_margin > 0) {
            if (p >= 0) CHECK(parent_score >= best - params.prune_margin);
            if (!sampled) CHECK(c.score >= best - params.prune_margin);
        }
        // Siblings carry different tokens (top-k, or drawn without replacement).
        for (int32_t j = 0; j < i; ++j)
            if (t.parents[size_t(j)] == p) CHECK(t.tokens[size_t(j)] != t.tokens[size_t(i)]);
    }
    for (const int32_t k : children) CHECK(k <= params.top_k);
    CHECK(t.draft_dists.size() == (sampled ? size_t(t.size()) * size_t(d.vocab) : size_t(0)));
}

}  // namespace

// ==== structure ==================================================================================

TEST_CASE("tree builder: structure of greedy and sampled trees on random drafters") {
    const uint64_t seed = test::fresh_seed();
    MESSAGE("random drafters: seed " << seed << " (set SPECLA_TEST_SEED to replay)");
    Rng r(seed);
    for (int trial = 0; trial < 300; ++trial) {
        const int32_t vocab = 2 + int32_t(r.next() % 40);
        const TableDrafter d = random_drafter(vocab, r);
        const TreeParams params = random_params(r, 5);
        CAPTURE(trial);
        CAPTURE(vocab);
        CAPTURE(params.top_k);
        CAPTURE(params.max_nodes);
        CAPTURE(params.max_depth);
        CAPTURE(params.prune_margin);

        const Built g = build(d, params, nullptr);
        check_structure(d, params, g, false);
        // Deterministic: the same inputs give the same tree.
        const Built g2 = build(d, params, nullptr);
        CHECK(g2.tree.tokens == g.tree.tokens);
        CHECK(g2.tree.parents == g.tree.parents);
        CHECK(g2.node_candidate == g.node_candidate);
        // Greedy keeps the best candidates: nothing left out ranks above a kept node unless the
        // budget or the margin excluded it.
        if (g.tree.size() > 0) {
            float worst_kept = std::numeric_limits<float>::infinity();
            for (const int32_t c : g.node_candidate) worst_kept = std::min(worst_kept, g.candidates[size_t(c)].score);
            std::vector<char> kept(g.candidates.size(), 0);
            for (const int32_t c : g.node_candidate) kept[size_t(c)] = 1;
            for (size_t c = 0; c < g.candidates.size(); ++c)
                if (!kept[c] && g.candidates[c].score > worst_kept) CHECK(g.tree.size() == params.max_nodes);
        } else {
            CHECK((params.max_nodes == 0 || params.max_depth == 0));
        }

        Rng draw(seed + uint64_t(trial));
        const Built s = build(d, params, &draw);
        check_structure(d, params, s, true);
        Rng draw2(seed + uint64_t(trial));
        const Built s2 = build(d, params, &draw2);
        CHECK(s2.tree.tokens == s.tree.tokens);
        CHECK(s2.tree.parents == s.tree.parents);
        CHECK(s2.tree.draft_dists == s.tree.draft_dists);
        // Sampled mode keeps every node it drew (no cost model): the node budget is enforced
        // while drawing.
        CHECK(s.tree.size() == int32_t(s.candidates.size()));
    }
}

TEST_CASE("tree builder: greedy trees from top-token rows equal those from whole distributions") {
    const uint64_t seed = test::fresh_seed();
    MESSAGE("top-token rows: seed " << seed << " (set SPECLA_TEST_SEED to replay)");
    Rng r(seed);
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int trial = 0; trial < 200; ++trial) {
        // A drafter whose row depends on the depth and the last token: two different paths never
        // share their multiset of transitions, so no two scores tie exactly (a tie would let the
        // two forms' roundings order them differently). Log-weights from a continuous range, some
        // ids of probability 0.
        const int32_t vocab = 2 + int32_t(r.next() % 40);
        const size_t V = size_t(vocab);
        const TreeParams params = random_params(r, 6);
        const int32_t k = params.top_k + int32_t(r.next() % 3);  // rows may carry more than top_k
        std::vector<float> rows((size_t(params.max_depth) + 1) * V * V);  // [depth][last token][next]
        for (size_t i = 0; i < rows.size(); i += V) {
            for (size_t t = 0; t < V; ++t) rows[i + t] = r.uniform() < 0.2 ? 0.f : float(std::exp(6.0 * r.uniform()));
            rows[i + r.next() % V] = float(std::exp(6.0 + r.uniform()));  // never empty
        }
        const std::vector<float> root = [&] {
            std::vector<float> w(V);
            for (size_t t = 0; t < V; ++t) w[t] = float(std::exp(6.0 * r.uniform()));
            return w;
        }();
        auto after = [&](const TreeBuilder &b, int32_t f) {
            const TreeCandidate &c = b.candidates()[size_t(f)];
            return rows.data() + (size_t(c.depth) * V + size_t(c.token)) * V;
        };
        CAPTURE(trial);
        CAPTURE(vocab);
        CAPTURE(params.top_k);
        CAPTURE(k);

        Built full;
        {
            TreeBuilder b;
            b.start(params, root.data(), vocab, nullptr);
            std::vector<float> probs;
            while (!b.frontier().empty()) {
                probs.clear();
                for (const int32_t f : b.frontier()) probs.insert(probs.end(), after(b, f), after(b, f) + V);
                b.expand(probs.data(), vocab);
            }
            b.finish(nullptr, full.tree, full.node_candidate);
            full.candidates = b.candidates();
        }
        // The same drafter as logits (log of the weights: an unnormalised log-softmax input).
        auto top_of = [&](const float *probs, int32_t *ids, float *logp) {
            std::vector<float> logits(V);
            for (size_t t = 0; t < V; ++t) logits[t] = probs[t] > 0.f ? std::log(probs[t]) : ninf;
            top_tokens(logits.data(), vocab, k, ids, logp);
        };
        Built top;
        {
            TreeBuilder b;
            std::vector<int32_t> ids(static_cast<size_t>(k));
            std::vector<float> logp(static_cast<size_t>(k));
            top_of(root.data(), ids.data(), logp.data());
            b.start_top(params, ids.data(), logp.data(), k, vocab);
            while (!b.frontier().empty()) {
                const size_t m = b.frontier().size();
                ids.resize(m * size_t(k));
                logp.resize(m * size_t(k));
                for (size_t i = 0; i < m; ++i)
                    top_of(after(b, b.frontier()[i]), ids.data() + i * size_t(k), logp.data() + i * size_t(k));
                b.expand_top(ids.data(), logp.data(), k);
            }
            b.finish(nullptr, top.tree, top.node_candidate);
            top.candidates = b.candidates();
        }
        INFO("full: ", show(full.tree), " top: ", show(top.tree));
        CHECK(top.tree.tokens == full.tree.tokens);
        CHECK(top.tree.parents == full.tree.parents);
        REQUIRE(top.candidates.size() == full.candidates.size());
        for (size_t c = 0; c < top.candidates.size(); ++c) {
            CHECK(top.candidates[c].token == full.candidates[c].token);
            CHECK(top.candidates[c].parent == full.candidates[c].parent);
            CHECK(top.candidates[c].score == doctest::Approx(full.candidates[c].score).epsilon(1e-5));
        }
    }
    // Bad rows are refused before anything changes; sampled drafting cannot use them.
    TreeBuilder b;
    TreeParams params;
    const int32_t ok_ids[2] = {1, 0};
    const float ok_lp[2] = {-0.5f, -1.f};
    b.start_top(params, ok_ids, ok_lp, 2, 4);
    const size_t before = b.candidates().size();
    const std::vector<int32_t> bad_ids(b.frontier().size() * 2, 4);  // id == vocab
    const std::vector<float> lps(b.frontier().size() * 2, -1.f);
    Caught c = caught([&] { b.expand_top(bad_ids.data(), lps.data(), 2); });
    CHECK(c.status == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(c.message.find("top-token row") != std::string::npos);
    CHECK(b.candidates().size() == before);
    const float rising[2] = {-2.f, -1.f};
    c = caught([&] { b.start_top(params, ok_ids, rising, 2, 4); });
    CHECK(c.message.find("descending") != std::string::npos);
    const float nan_lp[2] = {std::nanf(""), -1.f};
    c = caught([&] { b.start_top(params, ok_ids, nan_lp, 2, 4); });
    CHECK(c.status == SPECLA_ERR_INVALID_ARGUMENT);
    c = caught([&] { b.start_top(params, ok_ids, ok_lp, 0, 4); });
    CHECK(c.status == SPECLA_ERR_INVALID_ARGUMENT);
}

// ==== the greedy tree of a hand-made distribution set ==========================================
//
// vocab 6, top_k 2, depth 3. Root q = (.55, .35, .05, .05, 0, 0); after token 0: tokens 2, 3 at
// .7/.3; after 1: tokens 0, 1 at .8/.2; after 2: token 4 only; after 3, 4, 5: uniform.
//   level 1: A = 0 (.55), B = 1 (.35)                       frontier A, B
//   level 2: C = 0>2 (.385), D = 0>3 (.165), E = 1>0 (.28), F = 1>1 (.07)
//            frontier: the best two, C and E (D is not expanded)
//   level 3: G = 0>2>4 (.385, ties C: its parent ranks first), H = 1>0>2 (.196), I = 1>0>3 (.084)
// Ranking by path probability: A .55, C .385, G .385, B .35, E .28, H .196, D .165, I .084, F .07.

TEST_CASE("tree builder: the greedy EAGLE-2 tree of a hand-made distribution set") {
    TableDrafter d;
    d.vocab = 6;
    d.root = {.55f, .35f, .05f, .05f, 0.f, 0.f};
    d.rows.assign(36, 1.f / 6.f);
    auto set = [&](int32_t token, std::vector<float> row) { std::copy(row.begin(), row.end(), &d.rows[size_t(token) * 6]); };
    set(0, {0.f, 0.f, .7f, .3f, 0.f, 0.f});
    set(1, {.8f, .2f, 0.f, 0.f, 0.f, 0.f});
    set(2, {0.f, 0.f, 0.f, 0.f, 1.f, 0.f});
    TreeParams params;
    params.top_k = 2;
    params.max_depth = 3;
    params.prune_margin = 0.f;
    params.size_from_cost = false;

    SUBCASE("budget of 5: A, C, G, B, E") {
        params.max_nodes = 5;
        const Built b = build(d, params, nullptr);
        INFO(show(b.tree));
        CHECK(b.tree.tokens == std::vector<int32_t>{0, 2, 4, 1, 0});
        CHECK(b.tree.parents == std::vector<int32_t>{-1, 0, 1, -1, 3});
        CHECK(b.tree.draft_dists.empty());
        CHECK(b.passes == 2);
        // All nine candidates were generated, D's children were not (D was not expanded).
        REQUIRE(b.candidates.size() == 9);
        for (const TreeCandidate &c : b.candidates) CHECK(c.parent != 3);
    }
    SUBCASE("budget of 7: then H and D") {
        params.max_nodes = 7;
        const Built b = build(d, params, nullptr);
        INFO(show(b.tree));
        CHECK(b.tree.tokens == std::vector<int32_t>{0, 2, 4, 1, 0, 2, 3});
        CHECK(b.tree.parents == std::vector<int32_t>{-1, 0, 1, -1, 3, 4, 0});
    }
    SUBCASE("margin: only nodes within ln(.55/.25) nats of the best") {
        params.max_nodes = 32;
        params.prune_margin = float(std::log(.55 / .25));
        const Built b = build(d, params, nullptr);
        INFO(show(b.tree));
        CHECK(b.tree.tokens == std::vector<int32_t>{0, 2, 4, 1, 0});
        CHECK(b.tree.parents == std::vector<int32_t>{-1, 0, 1, -1, 3});
    }
    SUBCASE("a tight margin stops the expansion") {
        // Margin ln(.55/.3): B (.35) is expanded at level 1, but of level 2 only C (.385) is
        // within it, and E (.28) is not.
        params.max_nodes = 32;
        params.prune_margin = float(std::log(.55 / .3));
        TreeBuilder tb;
        tb.start(params, d.root.data(), 6, nullptr);
        CHECK(tb.frontier().size() == 2);
        std::vector<float> rows(d.after(0), d.after(0) + 6);
        rows.insert(rows.end(), d.after(1), d.after(1) + 6);
        tb.expand(rows.data(), 6);
        REQUIRE(tb.frontier().size() == 1);
        CHECK(tb.candidates()[size_t(tb.frontier()[0])].token == 2);
    }
    SUBCASE("ties between tokens: the lower id first") {
        d.root = {.1f, .3f, .3f, .3f, 0.f, 0.f};
        params.max_nodes = 2;
        params.max_depth = 1;
        const Built b = build(d, params, nullptr);
        CHECK(b.tree.tokens == std::vector<int32_t>{1, 2});
    }
    SUBCASE("a root without mass gives an empty tree") {
        d.root.assign(6, 0.f);
        params.max_nodes = 8;
        const Built b = build(d, params, nullptr);
        CHECK(b.tree.empty());
        CHECK(b.passes == 0);
    }
}

// ==== sizing from the cost model ===============================================================

TEST_CASE("pass cost model: moving averages, interpolation and the prior") {
    PassCostModel m;
    CHECK_FALSE(m.calibrated());
    CHECK(m.verify_seconds(0) == doctest::Approx(1.0));  // before any measurement: 1 + 0.1 n
    CHECK(m.verify_seconds(9) == doctest::Approx(1.9));
    CHECK(m.draft_seconds(4) == 0.0);  // unknown drafting cost: left out
    m.observe_verify(3, 0.8);
    CHECK_FALSE(m.calibrated());
    CHECK(m.verify_seconds(3) == doctest::Approx(0.8));
    CHECK(m.verify_seconds(1) == doctest::Approx(0.8 * 1.1 / 1.3));  // the prior's shape through it
    CHECK(m.verify_seconds(7) == doctest::Approx(0.8 * 1.7 / 1.3));
    m.observe_verify(7, 1.0);
    CHECK(m.calibrated());
    CHECK(m.verify_seconds(5) == doctest::Approx(0.9));  // interpolated
    CHECK(m.verify_seconds(9) == doctest::Approx(1.1));  // 1.0 + 2 * 0.05, the slope of the two largest
    m.observe_verify(3, 1.6);  // moving average: 0.8 + 0.25 * (1.6 - 0.8)
    CHECK(m.verify_seconds(3) == doctest::Approx(1.0));
    m.observe_draft(2, 0.01);
    CHECK(m.draft_seconds(2) == doctest::Approx(0.01));
    CHECK(m.draft_seconds(1) == doctest::Approx(0.01 * 1.1 / 1.2));  // one count: the prior's shape
    CHECK(m.draft_seconds(4) == doctest::Approx(0.01 * 1.4 / 1.2));
    m.observe_draft(4, 0.03);
    CHECK(m.draft_seconds(3) == doctest::Approx(0.02));   // interpolated
    CHECK(m.draft_seconds(1) == doctest::Approx(0.0));    // the line of the two, floored at 0
    CHECK(m.draft_seconds(6) == doctest::Approx(0.05));   // the line of the two largest

    for (const Caught &c : {caught([&] { m.observe_verify(-1, 0.1); }), caught([&] { m.verify_seconds(-2); })}) {
        CHECK(c.status == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(c.message.find("n_nodes") != std::string::npos);
    }
    for (const Caught &c : {caught([&] { m.observe_draft(0, 0.1); }), caught([&] { m.draft_seconds(0); })}) {
        CHECK(c.status == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(c.message.find("n_rows") != std::string::npos);
    }
    for (const double bad : {std::nan(""), -1.0, std::numeric_limits<double>::infinity()})
        for (const Caught &c : {caught([&] { m.observe_verify(1, bad); }), caught([&] { m.observe_draft(1, bad); })}) {
            CHECK(c.status == SPECLA_ERR_INVALID_ARGUMENT);
            CHECK(c.message.find("seconds") != std::string::npos);
        }
    CHECK(m.verify_seconds(3) == doctest::Approx(1.0));  // refused observations changed nothing
}

namespace {

// Every row: one confident token (.9, the next id) and the rest spread thinly, so the tree has a
// confident chain and many unlikely side branches.
TableDrafter confident_drafter(int32_t vocab) {
    TableDrafter d;
    d.vocab = vocab;
    auto fill = [&](float *row, int32_t confident) {
        for (int32_t t = 0; t < vocab; ++t) row[t] = 0.1f / float(vocab - 1);
        row[confident] = 0.9f;
    };
    d.root.resize(size_t(vocab));
    fill(d.root.data(), 0);
    d.rows.resize(size_t(vocab) * size_t(vocab));
    for (int32_t t = 0; t < vocab; ++t) fill(d.rows.data() + size_t(t) * size_t(vocab), (t + 1) % vocab);
    return d;
}

// The best prefix of the greedy ranking by the documented rule, computed independently: the n
// maximising (1 + sum_{i<n} exp(score_i)) / (verify_seconds(n) + drafting seconds).
size_t best_prefix(const Built &full, const PassCostModel &cost, double drafting) {
    std::vector<float> scores;
    for (const int32_t c : full.node_candidate) scores.push_back(full.candidates[size_t(c)].score);
    size_t best = 0;
    double best_rate = 0, tokens = 1;
    for (size_t n = 0; n <= scores.size(); ++n) {
        if (n > 0) tokens += std::exp(double(scores[n - 1]));
        const double rate = tokens / (cost.verify_seconds(int32_t(n)) + drafting);
        if (rate > best_rate) best_rate = rate, best = n;
    }
    return best;
}

}  // namespace

TEST_CASE("tree builder: the tree size follows the measured pass costs") {
    const TableDrafter d = confident_drafter(16);
    TreeParams params;
    params.max_nodes = 24;
    params.top_k = 4;
    params.max_depth = 6;
    params.prune_margin = 0.f;
    params.size_from_cost = true;
    // The ranking the cost sizing cuts: the budget-filled tree.
    TreeParams fill = params;
    fill.size_from_cost = false;
    const Built full = build(d, fill, nullptr);
    REQUIRE(full.tree.size() == 24);

    // Drafter passes: 1 ms per pass plus 0.1 ms per row, measured.
    PassCostModel draft_costs;
    for (int32_t rows = 1; rows <= 8; ++rows) draft_costs.observe_draft(rows, 0.001 + 0.0001 * rows);
    double drafting = draft_costs.draft_seconds(1);  // the pass that gave the root distribution
    for (int32_t level = 0; level < full.passes; ++level) drafting += draft_costs.draft_seconds(4);  // 4 frontier rows

    SUBCASE("GPU-like: a pass costs the same for any n, the tree fills the budget") {
        PassCostModel gpu = draft_costs;
        for (int32_t n = 0; n <= 32; n += 8) gpu.observe_verify(n, 0.010);
        const Built b = build(d, params, nullptr, &gpu);
        CHECK(b.tree.size() == 24);
        CHECK(b.tree.tokens == full.tree.tokens);
        CHECK(b.tree.parents == full.tree.parents);
    }
    SUBCASE("CPU-like: a pass costs per row, only the confident nodes are kept") {
        // 10 ms for the pending token's row, 7 ms per node.
        PassCostModel cpu = draft_costs;
        cpu.observe_verify(0, 0.010);
        cpu.observe_verify(32, 0.010 + 32 * 0.007);
        const Built b = build(d, params, nullptr, &cpu);
        INFO(show(b.tree));
        const size_t expected = best_prefix(full, cpu, drafting);
        CHECK(size_t(b.tree.size()) == expected);
        CHECK(b.tree.size() >= 2);
        CHECK(b.tree.size() <= 8);
        // The prefix of the same ranking: the confident chain 0, 1, 2, ... (each .9 likely).
        for (int32_t i = 0; i < b.tree.size(); ++i) {
            CHECK(b.tree.tokens[size_t(i)] == i);
            CHECK(b.tree.parents[size_t(i)] == i - 1);
        }
    }
    SUBCASE("before calibration the CPU-like prior sizes the tree; without a model or sizing off the budget decides") {
        // One row count measured (or none): the cost per row is assumed, so a tree that filled
        // the budget at once would never be timed at another size; the prior keeps the
        // confident prefix instead, and the budget is used only without a model.
        PassCostModel one_size = draft_costs;
        one_size.observe_verify(5, 1.0);
        CHECK_FALSE(one_size.calibrated());
        const Built prior = build(d, params, nullptr, &one_size);
        CHECK(prior.tree.size() >= 1);
        CHECK(prior.tree.size() < 24);
        CHECK(size_t(prior.tree.size()) == best_prefix(full, one_size, drafting));
        PassCostModel none;
        CHECK(build(d, params, nullptr, &none).tree.size() < 24);
        CHECK(build(d, params, nullptr, nullptr).tree.size() == 24);
        PassCostModel cpu;
        cpu.observe_verify(0, 0.010);
        cpu.observe_verify(32, 0.234);
        CHECK(build(d, fill, nullptr, &cpu).tree.size() == 24);
    }
    SUBCASE("sampled trees are sized by the same costs, on pre-draw estimates") {
        PassCostModel gpu = draft_costs, cpu = draft_costs;
        for (int32_t n = 0; n <= 32; n += 8) gpu.observe_verify(n, 0.010);
        cpu.observe_verify(0, 0.010);
        cpu.observe_verify(32, 0.234);
        Rng r1(7), r2(7);
        const Built on_gpu = build(d, params, &r1, &gpu);
        const Built on_cpu = build(d, params, &r2, &cpu);
        CHECK(on_gpu.tree.size() == 24);
        CHECK(on_cpu.tree.size() < 12);
        CHECK(on_cpu.tree.size() >= 1);
        // The same draws: the CPU tree is a subset of the drawn nodes, whole sibling prefixes.
        CHECK(on_cpu.candidates.size() == on_gpu.candidates.size());
    }
}

// ==== sampled trees: the rows the tokens were drawn from =======================================

TEST_CASE("tree builder: sampled rows remove the earlier siblings and sum to 1") {
    const uint64_t seed = test::fresh_seed();
    MESSAGE("sampled rows: seed " << seed << " (set SPECLA_TEST_SEED to replay)");
    Rng r(seed);
    int64_t later_siblings = 0;
    for (int trial = 0; trial < 200; ++trial) {
        const int32_t vocab = 3 + int32_t(r.next() % 12);
        const TableDrafter d = random_drafter(vocab, r);
        TreeParams params;
        params.top_k = 1 + int32_t(r.next() % 4);
        params.max_nodes = 1 + int32_t(r.next() % 30);
        params.max_depth = 1 + int32_t(r.next() % 4);
        params.prune_margin = 0.f;
        Rng draw(seed ^ uint64_t(trial));
        const Built b = build(d, params, &draw);
        const DraftTree &t = b.tree;
        REQUIRE(t.draft_dists.size() == size_t(t.size()) * size_t(vocab));
        for (int32_t i = 0; i < t.size(); ++i) {
            const float *row = t.draft_dists.data() + size_t(i) * size_t(vocab);
            CHECK(row_sum(row, vocab) == doctest::Approx(1.0).epsilon(1e-5));
            CHECK(row[t.tokens[size_t(i)]] > 0.f);
            // The row: the parent's distribution without the earlier siblings' tokens, renormalised.
            std::vector<double> want = parent_q(d, b, i);
            for (int32_t j = 0; j < i; ++j)
                if (t.parents[size_t(j)] == t.parents[size_t(i)]) want[size_t(t.tokens[size_t(j)])] = 0, ++later_siblings;
            double mass = 0;
            for (const double w : want) mass += w;
            for (int32_t x = 0; x < vocab; ++x) CHECK(double(row[x]) == doctest::Approx(want[size_t(x)] / mass).epsilon(1e-5));
        }
    }
    CHECK(later_siblings > 100);  // the property was exercised
}

// ==== bad parameters ===========================================================================

TEST_CASE("tree builder: bad parameters are refused with a message naming them") {
    const std::vector<float> root = {.5f, .3f, .2f, 0.f};
    TreeBuilder b;
    auto expect = [](const Caught &c, specla_status status, const char *name) {
        CHECK(c.status == status);
        INFO(c.message);
        CHECK(c.message.find(name) != std::string::npos);
    };
    TreeParams p;
    p.top_k = 0;
    expect(caught([&] { b.start(p, root.data(), 4, nullptr); }), SPECLA_ERR_INVALID_ARGUMENT, "top_k");
    p = TreeParams();
    p.max_nodes = -1;
    expect(caught([&] { b.start(p, root.data(), 4, nullptr); }), SPECLA_ERR_INVALID_ARGUMENT, "max_nodes");
    p = TreeParams();
    p.max_depth = -3;
    expect(caught([&] { b.start(p, root.data(), 4, nullptr); }), SPECLA_ERR_INVALID_ARGUMENT, "max_depth");
    p = TreeParams();
    p.prune_margin = std::nanf("");
    expect(caught([&] { b.start(p, root.data(), 4, nullptr); }), SPECLA_ERR_INVALID_ARGUMENT, "prune_margin");
    p = TreeParams();
    expect(caught([&] { b.start(p, root.data(), 0, nullptr); }), SPECLA_ERR_INVALID_ARGUMENT, "vocab");
    expect(caught([&] { b.start(p, root.data(), -5, nullptr); }), SPECLA_ERR_INVALID_ARGUMENT, "vocab");
    expect(caught([&] { b.start(p, nullptr, 4, nullptr); }), SPECLA_ERR_INVALID_ARGUMENT, "root_probs");
    for (const float bad : {std::nanf(""), -0.5f, std::numeric_limits<float>::infinity()}) {
        std::vector<float> r = root;
        r[2] = bad;
        Rng rng(1);
        expect(caught([&] { b.start(p, r.data(), 4, nullptr); }), SPECLA_ERR_INVALID_ARGUMENT, "root_probs[2]");
        expect(caught([&] { b.start(p, r.data(), 4, &rng); }), SPECLA_ERR_INVALID_ARGUMENT, "root_probs[2]");
    }
    // expand(): a NaN in the second row is named, and the tree is left as it was.
    REQUIRE(caught([&] { b.start(p, root.data(), 4, nullptr); }).status == SPECLA_OK);
    REQUIRE(b.frontier().size() == 3);
    std::vector<float> rows(12, .25f);
    rows[4 + 1] = std::nanf("");
    expect(caught([&] { b.expand(rows.data(), 4); }), SPECLA_ERR_INVALID_ARGUMENT, "probs row 1");
    CHECK(b.candidates().size() == 3);
    CHECK(b.frontier().size() == 3);
    expect(caught([&] { b.expand(rows.data(), 5); }), SPECLA_ERR_INVALID_ARGUMENT, "vocab");
    expect(caught([&] { b.expand(nullptr, 4); }), SPECLA_ERR_INVALID_ARGUMENT, "probs");
    p.max_depth = 1;
    REQUIRE(caught([&] { b.start(p, root.data(), 4, nullptr); }).status == SPECLA_OK);
    CHECK(b.frontier().empty());
    expect(caught([&] { b.expand(rows.data(), 4); }), SPECLA_ERR_STATE, "frontier");
    TreeBuilder fresh;
    DraftTree t;
    std::vector<int32_t> nc;
    expect(caught([&] { fresh.finish(nullptr, t, nc); }), SPECLA_ERR_STATE, "start");
    expect(caught([&] { fresh.expand(rows.data(), 4); }), SPECLA_ERR_STATE, "start");
}

// ==== sampled trees keep acceptance lossless (statistical) =====================================
//
// vocab 6. The target's distribution after a token depends on that token only (P[last], made-up
// rows, all positive); the drafter's likewise (Q[last], different from P, with zeros). Each of
// kSamples independent runs starts after token kCtx and performs speculative steps (the builder
// draws a sampled tree from Q, the target's rows judge it through accept_sampled) until two
// tokens are emitted. The histogram of the first token and of the first two tokens is compared
// with the exact p_root(x) and p_root(x) * P[x](y) by a chi-square goodness-of-fit test, as in
// test_accept.cpp: bins expected below 10 samples pooled, pass at p > kAlpha = 1e-4.

namespace {

constexpr int32_t kS = 6;
constexpr int32_t kCtx = 2;
constexpr int64_t kSamples = 200000;
constexpr double kAlpha = 1e-4;
constexpr double kMinExpected = 10.0;

struct Model {
    std::vector<float> P, Q;  // kS x kS rows
    explicit Model(uint64_t seed) : P(kS * kS), Q(kS * kS) {
        Rng r(seed);
        auto normal = [&] {
            const double u1 = 1.0 - r.uniform(), u2 = r.uniform();
            return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
        };
        for (int32_t a = 0; a < kS; ++a) {
            double sp = 0, sq = 0;
            for (int32_t t = 0; t < kS; ++t) {
                sp += P[size_t(a * kS + t)] = float(std::exp(1.2 * normal()));
                // The drafter: a different table, sharper, with one token it never proposes.
                sq += Q[size_t(a * kS + t)] = t == (a + 3) % kS ? 0.f : float(std::exp(1.6 * normal()));
            }
            for (int32_t t = 0; t < kS; ++t) P[size_t(a * kS + t)] = float(P[size_t(a * kS + t)] / sp);
            for (int32_t t = 0; t < kS; ++t) Q[size_t(a * kS + t)] = float(Q[size_t(a * kS + t)] / sq);
        }
    }
    const float *p(int32_t last) const { return &P[size_t(last * kS)]; }
    const float *q(int32_t last) const { return &Q[size_t(last * kS)]; }
};

// A change applied to the builder's tree before acceptance (negative controls).
using Tamper = std::function<void(DraftTree &)>;

struct Verdict {
    test::ChiSquareResult first, joint;
    double nodes_per_tree = 0, tokens_per_step = 0;
};

Verdict run_lossless(const char *name, const Model &m, const TreeParams &params, const PassCostModel *cost,
                     uint64_t seed, const Tamper &tamper = nullptr) {
    seed = test::fixed_seed(seed);
    Rng draft_rng(seed), accept_rng(seed ^ 0x9e3779b97f4a7c15ull);
    TreeBuilder b;
    DraftTree tree;
    std::vector<int32_t> nc;
    std::vector<float> probs, root_logits(kS), node_logits;
    SamplingConfig sampling;
    sampling.temperature = 1.f;
    std::vector<int64_t> first(kS), joint(kS * kS);
    int64_t steps = 0, emitted = 0, nodes = 0;
    std::vector<int32_t> out;
    auto logits_of = [](const float *p, float *dst) {
        for (int32_t t = 0; t < kS; ++t) dst[t] = std::log(p[t]);
    };
    for (int64_t s = 0; s < kSamples; ++s) {
        out.clear();
        int32_t last = kCtx;
        while (out.size() < 2) {
            b.start(params, m.q(last), kS, &draft_rng);
            while (!b.frontier().empty()) {
                probs.clear();
                for (const int32_t f : b.frontier()) {
                    const float *row = m.q(b.candidates()[size_t(f)].token);
                    probs.insert(probs.end(), row, row + kS);
                }
                b.expand(probs.data(), kS);
            }
            b.finish(cost, tree, nc);
            if (tamper) tamper(tree);
            logits_of(m.p(last), root_logits.data());
            node_logits.resize(size_t(tree.size()) * kS);
            for (int32_t i = 0; i < tree.size(); ++i) logits_of(m.p(tree.tokens[size_t(i)]), &node_logits[size_t(i) * kS]);
            const AcceptResult r =
                accept_sampled(tree, root_logits.data(), node_logits.data(), kS, sampling, accept_rng);
            const size_t before = out.size();
            for (const int32_t c : r.path) out.push_back(tree.tokens[size_t(c)]);
            out.push_back(r.bonus);
            ++steps, nodes += tree.size(), emitted += int64_t(out.size() - before);
            last = out.back();
        }
        ++first[size_t(out[0])];
        ++joint[size_t(out[0] * kS + out[1])];
    }
    // The target's own distribution (the softmax of log p is p).
    std::vector<double> e1(kS), e2(kS * kS);
    float p1[kS], p2[kS];
    logits_of(m.p(kCtx), root_logits.data());
    sampling_distribution(root_logits.data(), kS, sampling, p1);
    for (int32_t x = 0; x < kS; ++x) {
        e1[size_t(x)] = p1[x];
        float lg[kS];
        logits_of(m.p(x), lg);
        sampling_distribution(lg, kS, sampling, p2);
        for (int32_t y = 0; y < kS; ++y) e2[size_t(x * kS + y)] = double(p1[x]) * double(p2[y]);
    }
    Verdict v{test::chi_square_gof(first, e1, kMinExpected), test::chi_square_gof(joint, e2, kMinExpected),
              double(nodes) / double(steps), double(emitted) / double(steps)};
    std::ostringstream os;
    os << name << " [seed " << seed << "]: first token " << v.first.str() << "; first two tokens " << v.joint.str()
       << "; nodes/tree " << v.nodes_per_tree << "; tokens/step " << v.tokens_per_step;
    MESSAGE(os.str());
    return v;
}

TreeParams bushy_params() {
    TreeParams p;
    p.top_k = 3;
    p.max_nodes = 10;
    p.max_depth = 3;
    p.prune_margin = 2.5f;
    p.size_from_cost = true;
    return p;
}

// Children of every node judged against their parent's full row, as if drawn with replacement.
void parent_rows(DraftTree &t) {
    const size_t v = kS;
    for (int32_t c = 0; c < t.size(); ++c)
        for (int32_t f = 0; f < c; ++f)
            if (t.parents[size_t(f)] == t.parents[size_t(c)]) {  // f: the first sibling, whose row is the parent's
                std::copy_n(&t.draft_dists[size_t(f) * v], v, &t.draft_dists[size_t(c) * v]);
                break;
            }
}

// Drops every node whose own token was unlikely under its row (and the node's subtree): a
// selection by the node's own value, which the builder must never make.
void drop_unlikely(DraftTree &t) {
    DraftTree kept;
    std::vector<int32_t> node_of(size_t(t.size()), -1);
    for (int32_t i = 0; i < t.size(); ++i) {
        const int32_t p = t.parents[size_t(i)];
        if (p >= 0 && node_of[size_t(p)] < 0) continue;
        const float *row = &t.draft_dists[size_t(i) * kS];
        if (row[t.tokens[size_t(i)]] < 0.15f) continue;
        node_of[size_t(i)] = kept.add(t.tokens[size_t(i)], p < 0 ? -1 : node_of[size_t(p)]);
        kept.draft_dists.insert(kept.draft_dists.end(), row, row + kS);
    }
    t = kept;
}

}  // namespace

TEST_CASE("tree builder: sampled trees keep acceptance lossless") {
    const Model m(4242);
    {
        const Verdict v = run_lossless("sampled trees, node budget only", m, bushy_params(), nullptr, 51);
        CHECK(v.first.impossible == 0);
        CHECK(v.joint.impossible == 0);
        CHECK(v.first.p_value > kAlpha);
        CHECK(v.joint.p_value > kAlpha);
        CHECK(v.nodes_per_tree > 6);  // bushy: siblings drawn without replacement matter
    }
    {
        // Sized from a CPU-like cost: finish() drops sibling suffixes on pre-draw estimates.
        PassCostModel cpu;
        cpu.observe_verify(0, 0.010);
        cpu.observe_verify(16, 0.010 + 16 * 0.0015);
        cpu.observe_draft(1, 0.001);
        cpu.observe_draft(8, 0.002);
        const Verdict v = run_lossless("sampled trees sized from a CPU-like cost", m, bushy_params(), &cpu, 52);
        CHECK(v.first.impossible == 0);
        CHECK(v.joint.impossible == 0);
        CHECK(v.first.p_value > kAlpha);
        CHECK(v.joint.p_value > kAlpha);
        CHECK(v.nodes_per_tree < 6);  // the cost cut the trees
        CHECK(v.nodes_per_tree > 2);
    }
}

TEST_CASE("tree builder: the losslessness test rejects wrong rows and score-based selection") {
    const Model m(4242);
    {
        const Verdict v = run_lossless("negative control: siblings judged against the parent's row", m,
                                       bushy_params(), nullptr, 53, parent_rows);
        CHECK(v.joint.p_value < 1e-12);
    }
    {
        const Verdict v = run_lossless("negative control: nodes dropped for their own low probability", m,
                                       bushy_params(), nullptr, 54, drop_unlikely);
        CHECK(v.joint.p_value < 1e-12);
    }
}

TEST_CASE("tree builder: a drafter level is drawn only while the tokens it can add pay for its pass") {
    const TableDrafter d = confident_drafter(16);
    TreeParams params;
    params.max_nodes = 24;
    params.top_k = 4;
    params.max_depth = 6;
    params.prune_margin = 0.f;
    params.size_from_cost = true;
    // A CPU-like verification cost: 10 ms for the pending token's row, 7 ms per node.
    PassCostModel cheap, dear;
    for (PassCostModel *m : {&cheap, &dear}) {
        m->observe_verify(0, 0.010);
        m->observe_verify(32, 0.010 + 32 * 0.007);
    }
    for (int32_t rows = 1; rows <= 8; ++rows) {
        cheap.observe_draft(rows, 0.0001);  // a drafter pass nearly free: every level pays
        dear.observe_draft(rows, 0.1);      // a drafter pass dearer than the whole verification
    }
    TreeBuilder b;
    const Built all = build(b, d, params, nullptr);  // no level cost: every level up to the depth
    CHECK(all.passes == params.max_depth - 1);
    const Built with_cheap = build(b, d, params, nullptr, &cheap, &cheap);
    CHECK(with_cheap.passes == all.passes);
    const Built with_dear = build(b, d, params, nullptr, &dear, &dear);
    INFO("levels drafted with a dear drafter pass: " << with_dear.passes);
    CHECK(with_dear.passes < all.passes);
    CHECK(!with_dear.tree.empty());  // the root's children need no drafter level
    // The tree is still the prefix of the same ranking.
    for (int32_t i = 0; i < with_dear.tree.size(); ++i) CHECK(with_dear.tree.parents[size_t(i)] < i);
    // Sizing off: the cost model given to start() is not used for levels either.
    TreeParams fill = params;
    fill.size_from_cost = false;
    CHECK(build(b, d, fill, nullptr, nullptr, &dear).passes == all.passes);
    // Sampled mode follows the same rule (scores fixed before the children are drawn).
    Rng r1(3), r2(3);
    CHECK(build(b, d, params, &r1, &dear, &dear).passes < build(b, d, params, &r2, &cheap, &cheap).passes + 1);
}

// ==== fixed-width levels =========================================================================

TEST_CASE("tree builder: fixed-width levels expand the newest depth's top_k, whatever margin, budget and cost") {
    const uint64_t seed = test::fresh_seed();
    MESSAGE("fixed-width levels: seed " << seed << " (set SPECLA_TEST_SEED to replay)");
    Rng r(seed);
    // A drafter pass dearer than any verification: a dynamic tree would draw no level.
    PassCostModel dear;
    dear.observe_verify(0, 0.010);
    dear.observe_verify(32, 0.234);
    for (int32_t rows = 1; rows <= 64; ++rows) dear.observe_draft(rows, 1.0);
    for (int trial = 0; trial < 300; ++trial) {
        const int32_t vocab = 2 + int32_t(r.next() % 40);
        const TableDrafter d = random_drafter(vocab, r);
        TreeParams params = random_params(r, 6);
        params.fixed_width = true;
        params.size_from_cost = r.uniform() < 0.5;
        CAPTURE(trial);
        CAPTURE(vocab);
        CAPTURE(params.top_k);
        CAPTURE(params.max_nodes);
        CAPTURE(params.max_depth);
        CAPTURE(params.prune_margin);

        // The frontier of every level, against the rule computed here from the candidates.
        TreeBuilder b;
        b.start(params, d.root.data(), vocab, nullptr, &dear);
        int32_t passes = 0, level_begin = 0;
        std::vector<float> probs;
        for (;;) {
            const std::vector<TreeCandidate> &cands = b.candidates();
            const int32_t n = int32_t(cands.size());
            std::vector<int32_t> expected;
            if (level_begin < n && cands[size_t(level_begin)].depth < params.max_depth) {
                for (int32_t i = level_begin; i < n; ++i) expected.push_back(i);
                std::stable_sort(expected.begin(), expected.end(), [&](int32_t a, int32_t c) {
                    return cands[size_t(a)].score > cands[size_t(c)].score;
                });
                if (int32_t(expected.size()) > params.top_k) expected.resize(size_t(params.top_k));
            }
            CHECK(b.frontier() == expected);
            if (b.frontier().empty()) break;
            probs.clear();
            for (const int32_t f : b.frontier()) {
                const float *row = d.after(cands[size_t(f)].token);
                probs.insert(probs.end(), row, row + vocab);
            }
            level_begin = n;
            b.expand(probs.data(), vocab);
            ++passes;
        }
        // Every level to the depth budget unless a level came out empty (rows without mass).
        CHECK(passes <= std::max(0, params.max_depth - 1));
        if (!b.candidates().empty() && b.candidates().back().depth == params.max_depth)
            CHECK(passes == params.max_depth - 1);
        // finish() cuts as it does for dynamic trees: the structure's rules hold.
        Built out;
        b.finish(params.size_from_cost ? &dear : nullptr, out.tree, out.node_candidate);
        out.candidates = b.candidates();
        out.passes = passes;
        check_structure(d, params, out, false);
    }
    // A node budget the levels ignore: every level is drafted, finish() keeps the budget.
    const TableDrafter d = confident_drafter(16);
    TreeParams params;
    params.top_k = 3;
    params.max_depth = 5;
    params.max_nodes = 2;  // a budget the levels ignore
    params.fixed_width = true;
    const Built full = build(d, params, nullptr);
    CHECK(full.passes == 4);
    CHECK(full.tree.size() == 2);

    // Sampled trees cannot have a fixed shape: each node's children must depend only on what was
    // drawn before it, not on a ranking of its level.
    TreeBuilder b;
    Rng draw(1);
    const Caught c = caught([&] { b.start(params, d.root.data(), d.vocab, &draw); });
    CHECK(c.status == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(c.message.find("fixed-width") != std::string::npos);
}

TEST_CASE("tree builder: the engine's fixed-width frontier rule equals the builder's, level after level") {
    // engine/fixed_width_draft.h writes the rule a second time (a backend's draft_fixed_width
    // follows it; the builder checks the backend's frontiers against its own): over random
    // top-token rows, ties within and across rows, rows ending early at id -1 or -inf, a first
    // entry above 0 now and then (clamped), both must pick the same frontier with bitwise scores.
    const uint64_t seed = test::fresh_seed();
    MESSAGE("fixed-width frontier rule: seed " << seed << " (set SPECLA_TEST_SEED to replay)");
    Rng r(seed);
    const float kNegInf = -std::numeric_limits<float>::infinity();
    int compared = 0;
    for (int trial = 0; trial < 200; ++trial) {
        const int32_t W = 1 + int32_t(r.next() % 8), vocab = 50, levels = 1 + int32_t(r.next() % 5);
        CAPTURE(trial);
        CAPTURE(W);
        auto random_rows = [&](int32_t rows, std::vector<int32_t> &ids, std::vector<float> &logp) {
            ids.assign(size_t(rows) * size_t(W), -1);
            logp.assign(ids.size(), kNegInf);
            for (int32_t row = 0; row < rows; ++row) {
                const int32_t valid = r.next() % 4 == 0 ? int32_t(r.next() % uint64_t(W + 1)) : W;
                float lp = r.next() % 5 == 0 ? 0.5f : -0.25f * float(r.next() % 4);
                for (int32_t i = 0; i < valid; ++i) {
                    ids[size_t(row) * size_t(W) + size_t(i)] = int32_t(r.next() % uint64_t(vocab));
                    logp[size_t(row) * size_t(W) + size_t(i)] = lp;
                    lp -= 0.25f * float(r.next() % 3);
                }
                if (valid < W && r.next() % 2) ids[size_t(row) * size_t(W) + size_t(valid)] = 7;  // an id with -inf
            }
        };
        TreeParams params;
        params.top_k = W;
        params.max_depth = levels + 1;
        params.max_nodes = 64;
        params.fixed_width = true;
        std::vector<int32_t> ids;
        std::vector<float> logp;
        random_rows(1, ids, logp);
        TreeBuilder b;
        b.start_top(params, ids.data(), logp.data(), W, vocab);
        FixedWidthFrontier f;
        fixed_width_frontier(ids.data(), logp.data(), 1, W, nullptr, f);
        std::vector<int32_t> previous;  // the previous level's frontier (candidate indices)
        for (int32_t l = 0;; ++l) {
            const std::vector<int32_t> &front = b.frontier();
            const std::vector<TreeCandidate> &cands = b.candidates();
            REQUIRE(f.count == int32_t(front.size()));
            for (int32_t i = 0; i < W; ++i) {
                if (i >= f.count) {
                    CHECK(f.tokens[size_t(i)] == -1);
                    CHECK(f.parents[size_t(i)] == -1);
                    CHECK(f.scores[size_t(i)] == kNegInf);
                    continue;
                }
                const TreeCandidate &c = cands[size_t(front[size_t(i)])];
                CHECK(f.tokens[size_t(i)] == c.token);
                const int32_t row = f.parents[size_t(i)];
                CHECK(c.parent == (l == 0 ? -1 : previous[size_t(row)]));
                CHECK(std::memcmp(&f.scores[size_t(i)], &c.score, sizeof(float)) == 0);
                ++compared;
            }
            if (front.empty() || l + 1 >= levels) break;
            random_rows(f.count, ids, logp);
            previous = front;
            const std::vector<float> scores = f.scores;
            fixed_width_frontier(ids.data(), logp.data(), f.count, W, scores.data(), f);
            b.expand_top(ids.data(), logp.data(), W);
        }
    }
    MESSAGE(compared << " frontier entries equal");
}
