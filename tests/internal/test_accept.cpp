// Acceptance rules: tree validation, greedy acceptance on hand-built and random trees, and the
// losslessness of sampled acceptance as a chi-square goodness-of-fit test of the emitted tokens
// against the target's exact distribution (plus negative controls that the test must reject).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "spec/accept.h"
#include "engine/draft_tree.h"
#include "support/stats.h"
#include "util/error.h"

using namespace specla;

namespace {

// ---- tree validation ------------------------------------------------------------------------

specla_status status_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const Error &e) {
        return e.status();
    }
    return SPECLA_OK;
}

// ---- greedy helpers -------------------------------------------------------------------------

constexpr int32_t kV = 8;

// A logits row whose argmax is `tok` (other entries distinct and lower).
std::vector<float> peak(int32_t tok) {
    std::vector<float> row(kV);
    for (int32_t i = 0; i < kV; ++i) row[size_t(i)] = 0.1f * float(i);
    row[size_t(tok)] = 5.f;
    return row;
}

struct GreedyCase {
    DraftTree tree;
    std::vector<float> root;
    std::vector<float> nodes;  // n x kV
    // node i's target argmax
    void add(int32_t token, int32_t parent, int32_t target_next) {
        tree.add(token, parent);
        const auto row = peak(target_next);
        nodes.insert(nodes.end(), row.begin(), row.end());
    }
    AcceptResult run() const {
        return accept_greedy(tree, root.data(), tree.empty() ? nullptr : nodes.data(), kV);
    }
};

// ---- the synthetic target and drafter of the statistical tests ----------------------------
//
// Vocabulary of kS tokens. The target's logits after a history depend on its last two tokens:
// logits(.., a, b)[t] = A[b][t] + B[a][t] (fixed random tables). The drafter proposes from
// its own table D (different from the target), q(.., b) = sampling_distribution(D[b], draft_cfg),
// or, for the "drafter equals target" cases, exactly the target's sampling distribution.

constexpr int32_t kS = 6;
constexpr int32_t kCtxA = 2, kCtxB = 4;  // the last two tokens of the history the samples start from

struct Synthetic {
    std::vector<float> A, B, D;
    SamplingConfig target;
    SamplingConfig draft;
    bool draft_is_target = false;
    // The history the samples start from (what penalties count); ends in kCtxA, kCtxB.
    std::vector<int32_t> context = {kCtxA, kCtxB};

    explicit Synthetic(uint64_t seed) : A(kS * kS), B(kS * kS), D(kS * kS) {
        Rng r(seed);
        auto normal = [&] {  // Box-Muller
            const double u1 = 1.0 - r.uniform(), u2 = r.uniform();
            return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
        };
        for (auto &x : A) x = 1.5f * normal();
        for (auto &x : B) x = 0.7f * normal();
        for (auto &x : D) x = 1.5f * normal();
        draft.temperature = 1.2f;
    }
    void target_logits(int32_t a, int32_t b, float *out) const {
        for (int32_t t = 0; t < kS; ++t) out[t] = A[size_t(b * kS + t)] + B[size_t(a * kS + t)];
    }
    void target_dist(int32_t a, int32_t b, const History &h, float *out) const {
        float logits[kS];
        target_logits(a, b, logits);
        sampling_distribution(logits, kS, target, h, out);
    }
    void target_dist(int32_t a, int32_t b, float *out) const { target_dist(a, b, History{}, out); }
    void draft_dist(int32_t a, int32_t b, float *out) const {
        if (draft_is_target) return target_dist(a, b, out);
        sampling_distribution(&D[size_t(b * kS)], kS, draft, out);
    }
};

enum class DraftKind {
    Iid,                  // every child drawn independently from q(parent), row = q(parent)
    WithoutReplacement,   // siblings drawn without replacement: row = q(parent) minus earlier siblings
    TopK,                 // the r-th child of a node is q(parent)'s r-th most likely token; one-hot
};

const char *kind_name(DraftKind k) {
    return k == DraftKind::Iid ? "iid" : k == DraftKind::WithoutReplacement ? "without-replacement" : "top-k";
}

using AcceptFn = std::function<AcceptResult(const DraftTree &, const float *, const float *, int32_t,
                                            const SamplingConfig &, Rng &, const History &)>;

struct Scratch {
    DraftTree tree;
    std::vector<float> node_logits, root_logits = std::vector<float>(kS);
    std::vector<int32_t> last1, last2, nkids;
};

// One speculative step after a history ending in (a, b): draft on `shape`, verify with the
// synthetic target, accept. Appends the emitted tokens (path tokens, then the bonus) to `out`.
void speculative_step(const Synthetic &m, const std::vector<int32_t> &shape, DraftKind kind, int32_t a, int32_t b,
                      const std::vector<int32_t> &history, const AcceptFn &accept, Rng &draft_rng, Rng &accept_rng, Scratch &s,
                      std::vector<int32_t> &out) {
    const int32_t n = int32_t(shape.size());
    s.tree.clear();
    s.last1.assign(size_t(n), 0), s.last2.assign(size_t(n), 0);
    s.nkids.assign(size_t(n) + 1, 0);
    s.node_logits.resize(size_t(n) * kS);
    if (kind != DraftKind::TopK) s.tree.draft_dists.resize(size_t(n) * kS);
    float q[kS];
    for (int32_t i = 0; i < n; ++i) {
        const int32_t p = shape[size_t(i)];
        const int32_t pa = p < 0 ? a : s.last2[size_t(p)], pb = p < 0 ? b : s.last1[size_t(p)];
        m.draft_dist(pa, pb, q);
        const int32_t r = s.nkids[size_t(p + 1)]++;
        int32_t tok;
        if (kind == DraftKind::TopK) {
            std::vector<int32_t> order(kS);
            for (int32_t t = 0; t < kS; ++t) order[size_t(t)] = t;
            std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return q[x] > q[y]; });
            tok = order[size_t(r)];
        } else {
            float *row = &s.tree.draft_dists[size_t(i) * kS];
            std::copy(q, q + kS, row);
            if (kind == DraftKind::WithoutReplacement) {
                // Remove the tokens of the earlier siblings, renormalise.
                double total = 0;
                for (int32_t j = 0; j < i; ++j)
                    if (shape[size_t(j)] == p) row[s.tree.tokens[size_t(j)]] = 0.f;
                for (int32_t t = 0; t < kS; ++t) total += row[t];
                if (!(total > 0)) throw std::runtime_error("without replacement: drafter support exhausted");
                for (int32_t t = 0; t < kS; ++t) row[t] = float(row[t] / total);
            }
            tok = sample_from_distribution(row, kS, draft_rng.uniform());
        }
        s.tree.add(tok, p);
        s.last2[size_t(i)] = pb, s.last1[size_t(i)] = tok;
        m.target_logits(pb, tok, &s.node_logits[size_t(i) * kS]);
    }
    m.target_logits(a, b, s.root_logits.data());
    const AcceptResult r =
        accept(s.tree, s.root_logits.data(), s.node_logits.data(), kS, m.target, accept_rng, History::of(history));
    for (int32_t c : r.path) out.push_back(s.tree.tokens[size_t(c)]);
    out.push_back(r.bonus);
}

struct Histograms {
    std::vector<int64_t> first = std::vector<int64_t>(kS), joint = std::vector<int64_t>(kS * kS);
    double mean_emitted = 0;  // tokens per step (acceptance + 1), for the report
};


Histograms simulate(const Synthetic &m, const std::vector<int32_t> &shape, DraftKind kind, const AcceptFn &accept,
                    int64_t samples, uint64_t seed) {
    Histograms h;
    Rng draft_rng(seed), accept_rng(seed ^ 0x5bd1e995u);
    Scratch s;
    std::vector<int32_t> out, history;
    int64_t steps = 0, emitted = 0;
    for (int64_t i = 0; i < samples; ++i) {
        out.clear();
        int32_t a = kCtxA, b = kCtxB;
        while (out.size() < 2) {
            const size_t before = out.size();
            history = m.context;
            history.insert(history.end(), out.begin(), out.end());
            speculative_step(m, shape, kind, a, b, history, accept, draft_rng, accept_rng, s, out);
            ++steps, emitted += int64_t(out.size() - before);
            a = out.size() >= 2 ? out[out.size() - 2] : b;
            b = out.back();
        }
        ++h.first[size_t(out[0])];
        ++h.joint[size_t(out[0] * kS + out[1])];
    }
    h.mean_emitted = double(emitted) / double(steps);
    return h;
}

struct Exact {
    std::vector<double> first = std::vector<double>(kS), joint = std::vector<double>(kS * kS);
};

Exact exact(const Synthetic &m) {
    Exact e;
    float p1[kS], p2[kS];
    m.target_dist(kCtxA, kCtxB, History::of(m.context), p1);
    for (int32_t x = 0; x < kS; ++x) {
        e.first[size_t(x)] = p1[x];
        std::vector<int32_t> after_x = m.context;
        after_x.push_back(x);
        m.target_dist(kCtxB, x, History::of(after_x), p2);
        for (int32_t y = 0; y < kS; ++y) e.joint[size_t(x * kS + y)] = double(p1[x]) * double(p2[y]);
    }
    return e;
}

// Significance level of each comparison. Seeds are fixed, so the verdicts are reproducible; with
// about 30 comparisons in this file a correct implementation run on other seeds
// (SPECLA_TEST_SEED) fails one with probability below 0.3%.
constexpr double kAlpha = 1e-4;
constexpr int64_t kSamples = 200000;
// Bins expected to hold fewer samples are pooled (keeps the chi-square approximation of the tail
// accurate at kAlpha).
constexpr double kMinExpected = 10.0;

const std::vector<int32_t> kChain4 = {-1, 0, 1, 2};
const std::vector<int32_t> kChain8 = {-1, 0, 1, 2, 3, 4, 5, 6};
// root: 0, 1, 2; 0: 3, 4; 1: 5; 3: 6
const std::vector<int32_t> kTree7 = {-1, -1, -1, 0, 0, 1, 3};
const std::vector<int32_t> kStar4 = {-1, -1, -1, -1};
// Bushy: three children at the root, three under the first, two under the second, a grandchild.
const std::vector<int32_t> kBushy = {-1, -1, -1, 0, 0, 0, 1, 1, 3, 6};

SamplingConfig cfg(float t, int32_t k = 0, float p = 1.f) {
    SamplingConfig c;
    c.temperature = t, c.top_k = k, c.top_p = p;
    return c;
}

std::string cfg_name(const SamplingConfig &c) {
    return "T=" + std::to_string(c.temperature).substr(0, 4) + " top_k=" + std::to_string(c.top_k) +
           " top_p=" + std::to_string(c.top_p).substr(0, 4);
}

struct Verdict {
    test::ChiSquareResult first, joint;
    double mean_emitted;
};

Verdict run_case(const char *name, Synthetic &m, const std::vector<int32_t> &shape, DraftKind kind,
                 const AcceptFn &accept, uint64_t seed) {
    seed = test::fixed_seed(seed);
    const auto t0 = std::chrono::steady_clock::now();
    const Histograms h = simulate(m, shape, kind, accept, kSamples, seed);
    const Exact e = exact(m);
    Verdict v{test::chi_square_gof(h.first, e.first, kMinExpected), test::chi_square_gof(h.joint, e.joint, kMinExpected),
              h.mean_emitted};
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ostringstream os;  // (doctest prints a char pointer streamed into MESSAGE as an address)
    os << name << " [" << kind_name(kind) << ", " << shape.size() << " nodes, target " << cfg_name(m.target)
       << (m.draft_is_target ? ", drafter = target" : "") << ", seed " << seed << "]: first token " << v.first.str()
       << "; first two tokens " << v.joint.str() << "; tokens/step " << v.mean_emitted << "; " << secs << " s";
    MESSAGE(os.str());
    return v;
}

void expect_lossless(const char *name, Synthetic &m, const std::vector<int32_t> &shape, DraftKind kind,
                     uint64_t seed) {
    const Verdict v = run_case(name, m, shape, kind, accept_sampled, seed);
    CHECK(v.first.impossible == 0);
    CHECK(v.joint.impossible == 0);
    CHECK(v.first.p_value > kAlpha);
    CHECK(v.joint.p_value > kAlpha);
}

// ---- deliberately wrong acceptance rules (negative controls) ------------------------------

// Accepts every first child: emits the drafter's tokens.
AcceptResult accept_always(const DraftTree &tree, const float *root, const float *nodes, int32_t vocab,
                           const SamplingConfig &cfg, Rng &rng, const History &) {
    AcceptResult r;
    int32_t cur = -1;
    const float *logits = root;
    for (;;) {
        int32_t child = -1;
        for (int32_t i = 0; i < tree.size() && child < 0; ++i)
            if (tree.parents[size_t(i)] == cur) child = i;
        if (child < 0) break;
        r.path.push_back(child);
        cur = child;
        logits = nodes + size_t(child) * size_t(vocab);
    }
    r.bonus = sample_token(logits, vocab, cfg, rng.uniform());
    return r;
}

// The right acceptance test, but a rejection leaves p as it was (no residual): the classic bug.
AcceptResult accept_without_residual(const DraftTree &tree, const float *root, const float *nodes, int32_t vocab,
                                     const SamplingConfig &cfg, Rng &rng, const History &) {
    AcceptResult r;
    int32_t cur = -1;
    const float *logits = root;
    std::vector<float> p(static_cast<size_t>(vocab));
    for (;;) {
        sampling_distribution(logits, vocab, cfg, p.data());
        int32_t accepted = -1;
        for (int32_t c = 0; c < tree.size() && accepted < 0; ++c) {
            if (tree.parents[size_t(c)] != cur) continue;
            const int32_t x = tree.tokens[size_t(c)];
            const double qx = tree.draft_dists.empty() ? 1.0 : tree.draft_dists[size_t(c) * size_t(vocab) + size_t(x)];
            if (qx > 0 && rng.uniform() < p[size_t(x)] / qx) accepted = c;
        }
        if (accepted < 0) break;
        r.path.push_back(accepted);
        cur = accepted;
        logits = nodes + size_t(accepted) * size_t(vocab);
    }
    r.bonus = sample_from_distribution(p.data(), vocab, rng.uniform());
    return r;
}

// A protocol slip: siblings drafted without replacement, but every sibling judged against the
// parent's full row (as for i.i.d. siblings), i.e. the wrong q for all but the first.
AcceptResult accept_with_parent_rows(const DraftTree &tree, const float *root, const float *nodes, int32_t vocab,
                                     const SamplingConfig &cfg, Rng &rng, const History &history) {
    DraftTree wrong = tree;
    for (int32_t c = 0; c < tree.size(); ++c)
        for (int32_t f = 0; f < c; ++f)
            if (tree.parents[size_t(f)] == tree.parents[size_t(c)]) {  // f: the first sibling
                std::copy_n(&tree.draft_dists[size_t(f) * size_t(vocab)], vocab,
                            &wrong.draft_dists[size_t(c) * size_t(vocab)]);
                break;
            }
    return accept_sampled(wrong, root, nodes, vocab, cfg, rng, history);
}

// Drafter rows scaled by 1/1.1: acceptance probability min(1, 1.1 p/q), and a residual off by as
// much.
AcceptResult accept_inflated(const DraftTree &tree, const float *root, const float *nodes, int32_t vocab,
                             const SamplingConfig &cfg, Rng &rng, const History &history) {
    DraftTree scaled = tree;
    for (float &x : scaled.draft_dists) x /= 1.1f;
    return accept_sampled(scaled, root, nodes, vocab, cfg, rng, history);
}

}  // namespace

// ==== validation ==============================================================================

TEST_CASE("draft tree: validation and depths") {
    const int32_t tokens[] = {1, 2, 3, 4, 5};
    const int32_t ok[] = {-1, 0, 0, -1, 2};
    CHECK(status_of([&] { validate_tree(tokens, ok, 5, 8); }) == SPECLA_OK);
    CHECK(status_of([&] { validate_tree(nullptr, nullptr, 0, 8); }) == SPECLA_OK);
    CHECK(node_depths(ok, 5) == std::vector<int32_t>{1, 2, 2, 1, 3});
    const int32_t chain[] = {-1, 0, 1, 2};
    CHECK(node_depths(chain, 4) == std::vector<int32_t>{1, 2, 3, 4});
    CHECK(node_depths(chain, 0).empty());

    const int32_t forward[] = {-1, 2, 0, 1, 1};   // node 1's parent comes after it
    const int32_t self[] = {-1, 0, 2, 1, 1};      // node 2 is its own parent
    const int32_t below[] = {-1, 0, -2, 1, 1};    // parent < -1
    const int32_t root_bad[] = {0, 0, 1, 1, 1};   // node 0 cannot have a parent
    for (const int32_t *bad : {forward, self, below, root_bad})
        CHECK(status_of([&] { validate_tree(tokens, bad, 5, 8); }) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { validate_tree(tokens, ok, 5, 5); }) == SPECLA_ERR_TOKEN_OUT_OF_RANGE);  // token 5
    const int32_t negative[] = {1, -1, 3, 4, 0};
    CHECK(status_of([&] { validate_tree(negative, ok, 5, 8); }) == SPECLA_ERR_TOKEN_OUT_OF_RANGE);
    CHECK(status_of([&] { node_depths(forward, 5); }) == SPECLA_ERR_INVALID_ARGUMENT);
    // The message names the node.
    try {
        validate_tree(tokens, forward, 5, 8);
        FAIL("no throw");
    } catch (const Error &e) {
        CHECK(std::string(e.what()).find("node 1") != std::string::npos);
    }
    try {
        validate_tree(negative, ok, 5, 8);
        FAIL("no throw");
    } catch (const Error &e) {
        CHECK(std::string(e.what()).find("node 1") != std::string::npos);
    }
}

// ==== greedy acceptance ========================================================================

TEST_CASE("greedy acceptance: chains") {
    GreedyCase c;
    c.root = peak(3);
    c.add(3, -1, 5);
    c.add(5, 0, 1);
    c.add(1, 1, 7);
    SUBCASE("all accepted, bonus after the leaf") {
        const AcceptResult r = c.run();
        CHECK(r.path == std::vector<int32_t>{0, 1, 2});
        CHECK(r.bonus == 7);
    }
    SUBCASE("stops at the first disagreement") {
        c.nodes[size_t(1 * kV + 2)] = 9.f;  // after node 1 the target wants 2, not 1
        const AcceptResult r = c.run();
        CHECK(r.path == std::vector<int32_t>{0, 1});
        CHECK(r.bonus == 2);
    }
    SUBCASE("rejected at the root") {
        c.root = peak(4);
        const AcceptResult r = c.run();
        CHECK(r.path.empty());
        CHECK(r.bonus == 4);
    }
}

TEST_CASE("greedy acceptance: single node and no children") {
    GreedyCase c;
    c.root = peak(6);
    {
        const AcceptResult r = c.run();  // empty tree: node_logits may be null
        CHECK(r.path.empty());
        CHECK(r.bonus == 6);
    }
    c.add(6, -1, 0);
    {
        const AcceptResult r = c.run();
        CHECK(r.path == std::vector<int32_t>{0});
        CHECK(r.bonus == 0);
    }
    c.root = peak(2);
    {
        const AcceptResult r = c.run();
        CHECK(r.path.empty());
        CHECK(r.bonus == 2);
    }
}

TEST_CASE("greedy acceptance: stars, ties and duplicate siblings") {
    GreedyCase c;
    c.root = peak(6);
    c.add(2, -1, 1);
    c.add(4, -1, 3);
    c.add(6, -1, 5);
    c.add(6, -1, 7);  // duplicate token: the first one in node order wins
    {
        const AcceptResult r = c.run();
        CHECK(r.path == std::vector<int32_t>{2});
        CHECK(r.bonus == 5);
    }
    // Ties in the target's logits: the lowest id is the argmax.
    c.root.assign(kV, 0.f);
    c.root[4] = 3.f;
    c.root[2] = 3.f;
    {
        const AcceptResult r = c.run();
        CHECK(r.path == std::vector<int32_t>{0});  // token 2
        CHECK(r.bonus == 1);
    }
}

TEST_CASE("greedy acceptance: deep chain and bushy tree") {
    {
        GreedyCase c;
        c.root = peak(0);
        for (int32_t i = 0; i < 200; ++i) c.add(i % kV, i - 1, (i + 1) % kV);
        const AcceptResult r = c.run();
        REQUIRE(r.path.size() == 200);
        for (int32_t i = 0; i < 200; ++i) CHECK(r.path[size_t(i)] == i);
        CHECK(r.bonus == 200 % kV);
    }
    {
        // root: n0 (1), n1 (2); n0: n2 (5); n1: n3 (5), n4 (6); n4: n5 (3), n6 (0)
        // The target goes 2, 6, 0, 4: through the second child twice, ignoring n2/n3 (token 5
        // elsewhere) and n5.
        GreedyCase c;
        c.root = peak(2);
        c.add(1, -1, 5);
        c.add(2, -1, 6);
        c.add(5, 0, 1);
        c.add(5, 1, 1);
        c.add(6, 1, 0);
        c.add(3, 4, 1);
        c.add(0, 4, 4);
        const AcceptResult r = c.run();
        CHECK(r.path == std::vector<int32_t>{1, 4, 6});
        CHECK(r.bonus == 4);
    }
}

TEST_CASE("greedy acceptance equals autoregressive greedy decoding on random trees") {
    const uint64_t seed = test::fresh_seed();
    MESSAGE("random greedy trees: seed " << seed << " (set SPECLA_TEST_SEED to replay)");
    Rng rng(seed);
    auto below = [&](int32_t n) { return int32_t(rng.next() % uint64_t(n)); };
    Synthetic m(seed + 1);
    for (int trial = 0; trial < 2000; ++trial) {
        // Target: greedy over the synthetic logits; the tree mixes the greedy continuation with
        // random tokens so that acceptance stops at varied depths and branches.
        const int32_t a = below(kS), b = below(kS);
        const int32_t n = 1 + below(24);
        DraftTree tree;
        std::vector<int32_t> l1, l2;
        std::vector<float> nodes(size_t(n) * kS);
        float root[kS];
        m.target_logits(a, b, root);
        for (int32_t i = 0; i < n; ++i) {
            const int32_t p = below(i + 1) - 1;
            const int32_t pa = p < 0 ? a : l2[size_t(p)], pb = p < 0 ? b : l1[size_t(p)];
            float lg[kS];
            m.target_logits(pa, pb, lg);
            const int32_t tok = below(3) == 0 ? below(kS) : argmax(lg, kS);
            tree.add(tok, p);
            l2.push_back(pb), l1.push_back(tok);
            m.target_logits(pb, tok, &nodes[size_t(i) * kS]);
        }
        const AcceptResult r = accept_greedy(tree, root, nodes.data(), kS);
        // Emitted tokens == the first path+1 tokens of plain greedy decoding.
        std::vector<int32_t> emitted;
        int32_t prev = -1;
        for (int32_t c : r.path) {
            CHECK(tree.parents[size_t(c)] == prev);
            prev = c;
            emitted.push_back(tree.tokens[size_t(c)]);
        }
        emitted.push_back(r.bonus);
        int32_t ga = a, gb = b;
        for (size_t k = 0; k < emitted.size(); ++k) {
            float lg[kS];
            m.target_logits(ga, gb, lg);
            const int32_t g = argmax(lg, kS);
            CHECK(emitted[k] == g);
            ga = gb, gb = g;
        }
        // Maximality: the walk stopped because no child of the last node carries the next greedy
        // token (it is the bonus).
        for (int32_t i = 0; i < n; ++i)
            if (tree.parents[size_t(i)] == prev) CHECK(tree.tokens[size_t(i)] != r.bonus);
        // A greedy sampling config gives the same result through accept_sampled, without drawing.
        for (const SamplingConfig &g : {cfg(0.f), cfg(0.8f, 1), cfg(-1.f, 5, 0.5f)}) {
            Rng r1(trial), r2(trial);
            const AcceptResult rs = accept_sampled(tree, root, nodes.data(), kS, g, r1);
            CHECK(rs.path == r.path);
            CHECK(rs.bonus == r.bonus);
            CHECK(r1.next() == r2.next());
        }
    }
}

TEST_CASE("acceptance: bad inputs are reported") {
    DraftTree t;
    t.add(1, -1);
    t.add(2, 0);
    std::vector<float> logits(3 * kV, 0.f);
    Rng rng(1);
    CHECK(status_of([&] { accept_greedy(t, logits.data(), logits.data() + kV, kV); }) == SPECLA_OK);
    CHECK(status_of([&] { accept_greedy(t, logits.data(), nullptr, kV); }) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { accept_greedy(t, nullptr, logits.data(), kV); }) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { accept_greedy(t, logits.data(), logits.data(), 2); }) == SPECLA_ERR_TOKEN_OUT_OF_RANGE);
    t.draft_dists.assign(kV, 0.f);  // one row for two nodes
    CHECK(status_of([&] { accept_sampled(t, logits.data(), logits.data() + kV, kV, cfg(1.f), rng); }) ==
          SPECLA_ERR_INVALID_ARGUMENT);
    t.draft_dists.clear();
    t.parents[1] = 1;
    CHECK(status_of([&] { accept_sampled(t, logits.data(), logits.data() + kV, kV, cfg(1.f), rng); }) ==
          SPECLA_ERR_INVALID_ARGUMENT);
}

// ==== sampled acceptance: exact cases =========================================================

TEST_CASE("sampled acceptance: degenerate proposals") {
    // Target logits: token 0 dominant; top_k = 2 keeps tokens 0 and 1 only.
    std::vector<float> root = {3.f, 2.f, 1.f, 0.5f, 0.f, -1.f, -2.f, -3.f};
    std::vector<float> nodes(size_t(2) * kV);
    for (int32_t i = 0; i < 2; ++i) std::copy(root.begin(), root.end(), nodes.begin() + i * kV);
    const SamplingConfig topk2 = cfg(1.f, 2);
    std::vector<float> p(kV);
    sampling_distribution(root.data(), kV, topk2, p.data());
    Rng rng(test::fixed_seed(42));

    SUBCASE("p(x) = 0: a token outside top-k is never accepted") {
        DraftTree t;
        t.add(5, -1);
        for (int i = 0; i < 2000; ++i) {
            const AcceptResult r = accept_sampled(t, root.data(), nodes.data(), kV, topk2, rng);
            CHECK(r.path.empty());
            CHECK((r.bonus == 0 || r.bonus == 1));
        }
    }
    SUBCASE("q(x) = 0: rejected; a zero residual falls back to p") {
        DraftTree t;
        t.add(3, -1);
        t.draft_dists.assign(p.begin(), p.end());  // q == p, which gives token 3 no mass
        int32_t ones = 0;
        for (int i = 0; i < 2000; ++i) {
            const AcceptResult r = accept_sampled(t, root.data(), nodes.data(), kV, topk2, rng);
            CHECK(r.path.empty());
            CHECK((r.bonus == 0 || r.bonus == 1));
            ones += r.bonus == 1;
        }
        CHECK(std::abs(ones / 2000.0 - p[1]) < 0.05);  // the bonus follows p, not noise
    }
    SUBCASE("q == p: every proposal drawn from q is accepted") {
        DraftTree t;
        t.add(1, -1);
        t.add(0, 0);
        t.draft_dists.assign(p.begin(), p.end());
        t.draft_dists.insert(t.draft_dists.end(), p.begin(), p.end());
        for (int i = 0; i < 200; ++i)
            CHECK(accept_sampled(t, root.data(), nodes.data(), kV, topk2, rng).path == std::vector<int32_t>{0, 1});
    }
    SUBCASE("an all-zero drafter row rejects and leaves p untouched") {
        DraftTree t;
        t.add(0, -1);
        t.draft_dists.assign(kV, 0.f);
        int32_t zeros = 0;
        for (int i = 0; i < 4000; ++i) {
            const AcceptResult r = accept_sampled(t, root.data(), nodes.data(), kV, topk2, rng);
            CHECK(r.path.empty());
            zeros += r.bonus == 0;
        }
        CHECK(std::abs(zeros / 4000.0 - p[0]) < 0.05);
    }
    SUBCASE("one-hot proposals exhausting the support") {
        // Children 0 and 1 (the whole top-2 support) as deterministic proposals: one of them is
        // always accepted (the residual after rejecting 0 is one-hot on 1).
        DraftTree t;
        t.add(0, -1);
        t.add(1, -1);
        int32_t first = 0;
        for (int i = 0; i < 4000; ++i) {
            const AcceptResult r = accept_sampled(t, root.data(), nodes.data(), kV, topk2, rng);
            REQUIRE(r.path.size() == 1);
            first += r.path[0] == 0;
            CHECK((r.bonus == 0 || r.bonus == 1));
        }
        CHECK(std::abs(first / 4000.0 - p[0]) < 0.05);
    }
    SUBCASE("no NaN with extreme logits and a residual below the floor") {
        std::vector<float> sharp = {80.f, -80.f, -80.f, -80.f, -80.f, -80.f, -80.f, -80.f};
        std::vector<float> sharp_nodes(sharp);
        DraftTree t;
        t.add(1, -1);  // p(1) = 0: always rejected
        t.draft_dists.assign(kV, 0.f);
        t.draft_dists[0] = 0.9999999f;  // max(0, p - q) has mass ~1e-7 only
        t.draft_dists[1] = 1e-7f;
        for (int i = 0; i < 100; ++i) {
            const AcceptResult r = accept_sampled(t, sharp.data(), sharp_nodes.data(), kV, cfg(0.5f), rng);
            CHECK(r.path.empty());
            CHECK(r.bonus == 0);
        }
    }
}

// ==== sampled acceptance: losslessness, statistically =========================================
//
// For each case: 200k independent runs of the speculative process from a fixed history; each
// run performs speculative steps (draft, verify with the synthetic target, accept) until two
// tokens are emitted. The histogram of the first token (6 bins) and of the first two tokens
// (36 bins; zero-probability bins excluded, any sample in one fails) is compared with the exact
// target distribution (p_root, and p_root(x) * p_after_x(y)) by a chi-square goodness-of-fit
// test; bins with an expected count below 10 are pooled. Each comparison passes when its p-value
// exceeds kAlpha = 1e-4.

TEST_CASE("sampled acceptance is lossless: chains") {
    Synthetic m(1001);
    m.target = cfg(1.f);
    expect_lossless("chain, T=1", m, kChain4, DraftKind::Iid, 11);
    m.target = cfg(0.6f, 4);
    m.draft = cfg(1.f, 3);  // the drafter has zeros too
    expect_lossless("chain, T=0.6 top-k 4, drafter top-k 3", m, kChain4, DraftKind::Iid, 12);
    m.target = cfg(1.4f, 0, 0.85f);
    m.draft = cfg(1.2f);
    expect_lossless("chain, one-hot proposals, T=1.4 top-p 0.85", m, kChain4, DraftKind::TopK, 13);
    m.target = cfg(0.9f, 5, 0.7f);
    m.draft_is_target = true;
    expect_lossless("deep chain, drafter = target, T=0.9 top-k 5 top-p 0.7", m, kChain8, DraftKind::Iid, 14);
}

TEST_CASE("sampled acceptance is lossless: trees") {
    Synthetic m(2002);
    m.target = cfg(1.4f, 0, 0.85f);
    expect_lossless("tree, iid siblings, T=1.4 top-p 0.85", m, kTree7, DraftKind::Iid, 21);
    m.target = cfg(0.9f, 5, 0.95f);
    expect_lossless("tree, siblings without replacement, T=0.9 top-k 5 top-p 0.95", m, kTree7,
                    DraftKind::WithoutReplacement, 22);
    m.target = cfg(1.f);
    expect_lossless("bushy tree, siblings without replacement, T=1", m, kBushy, DraftKind::WithoutReplacement, 23);
    m.target = cfg(0.6f, 4);
    expect_lossless("bushy tree, one-hot top-k proposals, T=0.6 top-k 4", m, kBushy, DraftKind::TopK, 24);
    m.target = cfg(1.2f, 5, 0.9f);
    expect_lossless("star, one-hot top-k proposals, T=1.2 top-k 5 top-p 0.9", m, kStar4, DraftKind::TopK, 25);
    m.target = cfg(1.f, 0, 0.9f);
    m.draft_is_target = true;
    expect_lossless("tree, drafter = target, T=1 top-p 0.9", m, kTree7, DraftKind::Iid, 26);
}

// Bias, penalties and min-p: the target at a node depends on the context and the draft path to
// it. The context repeats tokens and the window (4) is shorter than the history, so the path
// tokens move tokens into and out of the window: a rule that judged nodes with the context's
// counts only would be off (the negative control below).
SamplingConfig with_transforms(SamplingConfig c) {
    c.repetition_penalty = 1.3f;
    c.presence_penalty = 0.3f;
    c.frequency_penalty = 0.2f;
    c.penalty_last_n = 4;
    c.min_p = 0.02f;
    c.logit_bias = {{1, 0.5f}, {5, -0.8f}, {1, 0.2f}};
    return c;
}
const std::vector<int32_t> kRepeatingContext = {3, 3, 1, 0, 3, kCtxA, kCtxB};

TEST_CASE("sampled acceptance is lossless: logit bias, penalties and min-p over the path") {
    Synthetic m(4004);
    m.context = kRepeatingContext;
    m.target = with_transforms(cfg(1.f));
    expect_lossless("chain, bias + penalties + min-p, T=1", m, kChain4, DraftKind::Iid, 41);
    m.target = with_transforms(cfg(0.8f, 5, 0.95f));
    expect_lossless("tree, siblings without replacement, bias + penalties + min-p, T=0.8 top-k 5 top-p 0.95", m,
                    kTree7, DraftKind::WithoutReplacement, 42);
    m.target = with_transforms(cfg(1.2f));
    expect_lossless("bushy tree, one-hot proposals, bias + penalties + min-p, T=1.2", m, kBushy, DraftKind::TopK, 43);
    m.target = with_transforms(cfg(1.f));
    m.draft_is_target = true;  // (the drafter's rows see no history: close to the target, not equal)
    expect_lossless("deep chain, drafter ~ target, bias + penalties + min-p, T=1", m, kChain8, DraftKind::Iid, 44);
}

TEST_CASE("greedy acceptance with penalties and bias equals greedy decoding with them") {
    const uint64_t seed = test::fresh_seed();
    MESSAGE("random greedy trees with penalties: seed " << seed << " (set SPECLA_TEST_SEED to replay)");
    Rng rng(seed);
    auto below = [&](int32_t n) { return int32_t(rng.next() % uint64_t(n)); };
    Synthetic m(seed + 7);
    SamplingConfig g = with_transforms(cfg(0.f));
    g.repetition_penalty = 3.f;  // strong enough to change the argmax often
    for (int trial = 0; trial < 1000; ++trial) {
        std::vector<int32_t> ctx;
        for (int i = 0, n = 2 + below(6); i < n; ++i) ctx.push_back(below(kS));
        const int32_t a = ctx[ctx.size() - 2], b = ctx.back();
        // The greedy continuation with penalties, token by token (the reference loop).
        auto greedy_after = [&](std::vector<int32_t> h, int32_t n) {
            std::vector<int32_t> out;
            for (int32_t k = 0; k < n; ++k) {
                float lg[kS];
                m.target_logits(h[h.size() - 2], h.back(), lg);
                out.push_back(greedy_token(lg, kS, g, History::of(h)));
                h.push_back(out.back());
            }
            return out;
        };
        const std::vector<int32_t> want = greedy_after(ctx, 12);
        // A tree mixing that continuation with random tokens.
        DraftTree tree;
        std::vector<std::vector<int32_t>> hist;  // node i's history (context + path + token)
        std::vector<float> nodes;
        float root[kS];
        m.target_logits(a, b, root);
        for (int32_t i = 0, n = 1 + below(10); i < n; ++i) {
            const int32_t p = below(i + 1) - 1;
            const std::vector<int32_t> h = p < 0 ? ctx : hist[size_t(p)];  // (a copy: hist grows)
            const int32_t tok = below(2) == 0 ? below(kS) : greedy_after(h, 1)[0];
            tree.add(tok, p);
            hist.push_back(h);
            hist.back().push_back(tok);
            nodes.resize(nodes.size() + kS);
            m.target_logits(h.back(), tok, &nodes[nodes.size() - kS]);
        }
        Rng r1(trial);
        const AcceptResult r = accept_sampled(tree, root, nodes.data(), kS, g, r1, History::of(ctx));
        std::vector<int32_t> emitted;
        for (int32_t c : r.path) emitted.push_back(tree.tokens[size_t(c)]);
        emitted.push_back(r.bonus);
        REQUIRE(emitted.size() <= want.size());
        CHECK(emitted == std::vector<int32_t>(want.begin(), want.begin() + long(emitted.size())));
    }
}

// ---- accept_sampled_rows: the rule over a backend's row sampler -----------------------------

namespace {

// The RowSampler a backend provides (engine/backend.h), over host rows: row 0 the root's logits,
// row 1 + i node i's.
class HostRowSampler final : public RowSampler {
public:
    HostRowSampler(const float *root, const float *nodes, int32_t vocab, const SamplingConfig &cfg)
        : root_(root), nodes_(nodes), vocab_(vocab), cfg_(cfg), p_(size_t(vocab)) {}
    void select(int32_t row) override {
        sampling_distribution(row == 0 ? root_ : nodes_ + size_t(row - 1) * size_t(vocab_), vocab_, cfg_, p_.data());
    }
    void probabilities(const int32_t *ids, int32_t n, double &total, double *probs) override {
        total = 0;
        for (float x : p_) total += x;
        for (int32_t i = 0; i < n; ++i) probs[i] = p_[size_t(ids[i])];
    }
    int32_t draw(const int32_t *removed, int32_t n_removed, double u) override {
        std::vector<float> q = p_;
        for (int32_t i = 0; i < n_removed; ++i) q[size_t(removed[i])] = 0.f;
        return sample_from_distribution(q.data(), vocab_, u);
    }

private:
    const float *root_, *nodes_;
    int32_t vocab_;
    SamplingConfig cfg_;
    std::vector<float> p_;
};

AcceptResult accept_over_rows(const DraftTree &tree, const float *root, const float *nodes, int32_t vocab,
                              const SamplingConfig &cfg, Rng &rng, const History &) {
    HostRowSampler rows(root, nodes, vocab, cfg);
    return accept_sampled_rows(tree, rows, vocab, 0, 1, rng);
}

}  // namespace

TEST_CASE("sampled acceptance over a row sampler follows the host rule on the same uniforms") {
    const uint64_t seed = test::fresh_seed();
    INFO("seed ", seed);
    std::mt19937_64 g(seed);
    constexpr int32_t V = 30;
    int walks = 0, differ = 0, streams_differ = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const int32_t n = 1 + int32_t(g() % 12);
        DraftTree tree;
        for (int32_t i = 0; i < n; ++i) {
            // Few distinct tokens, so siblings repeat tokens too.
            const int32_t parent = i == 0 ? -1 : int32_t(g() % uint64_t(i + 1)) - 1;
            tree.add(int32_t(g() % 6), parent);
        }
        std::vector<float> root(static_cast<size_t>(V)), nodes(size_t(n) * size_t(V));
        std::normal_distribution<float> nd(0.f, 2.f);
        for (float &x : root) x = nd(g);
        for (float &x : nodes) x = nd(g);
        const SamplingConfig c = trial % 3 == 0 ? cfg(1.f) : trial % 3 == 1 ? cfg(0.7f, 5) : cfg(1.3f, 0, 0.8f);
        for (int rep = 0; rep < 20; ++rep) {
            const uint64_t s = g();
            Rng a(s), b(s);
            const AcceptResult host = accept_sampled(tree, root.data(), nodes.data(), V, c, a);
            const AcceptResult rows = accept_over_rows(tree, root.data(), nodes.data(), V, c, b, History{});
            ++walks;
            differ += host.path != rows.path || host.bonus != rows.bonus;
            streams_differ += a.next() != b.next();
        }
    }
    MESSAGE("row-sampler acceptance: " << walks << " walks, " << differ << " differ from the host rule, " << streams_differ
                                       << " random streams differ");
    CHECK(streams_differ == 0);
    CHECK(differ <= walks / 1000);  // only a uniform within rounding of a threshold
}

TEST_CASE("sampled acceptance over a row sampler is lossless: one-hot proposals") {
    Synthetic m(5005);
    m.target = cfg(1.4f, 0, 0.85f);
    m.draft = cfg(1.2f);
    for (const auto &[name, shape, seed] : {std::tuple<const char *, const std::vector<int32_t> *, uint64_t>{
                                                "chain over rows, T=1.4 top-p 0.85", &kChain4, 51},
                                            {"bushy tree over rows, T=1.4 top-p 0.85", &kBushy, 52},
                                            {"star over rows, T=1.4 top-p 0.85", &kStar4, 53}}) {
        const Verdict v = run_case(name, m, *shape, DraftKind::TopK, accept_over_rows, seed);
        CHECK(v.first.impossible == 0);
        CHECK(v.joint.impossible == 0);
        CHECK(v.first.p_value > kAlpha);
        CHECK(v.joint.p_value > kAlpha);
    }
}

TEST_CASE("the losslessness test detects biased acceptance rules (negative controls)") {
    // Each wrong rule must be rejected at the level the correct rule passes at (kAlpha), the gross
    // ones far below it: the test has the power to fail.
    Synthetic m(3003);
    m.target = cfg(1.f);
    {
        const Verdict v = run_case("negative control: accept every first child", m, kChain4, DraftKind::Iid,
                                   accept_always, 31);
        CHECK(v.first.p_value < 1e-12);
        CHECK(v.joint.p_value < 1e-12);
    }
    {
        const Verdict v = run_case("negative control: no residual after a rejection", m, kChain4, DraftKind::Iid,
                                   accept_without_residual, 32);
        CHECK(v.first.p_value < 1e-12);
        CHECK(v.joint.p_value < 1e-12);
    }
    {
        m.target = cfg(1.f);
        const Verdict v = run_case("negative control: parent rows for siblings drawn without replacement", m,
                                   kTree7, DraftKind::WithoutReplacement, accept_with_parent_rows, 34);
        CHECK(v.first.p_value < kAlpha);  // a subtle bias: detected, with less margin on one token
        CHECK(v.joint.p_value < 1e-12);
    }
    {
        m.target = cfg(1.f);
        const Verdict v = run_case("negative control: acceptance ratio inflated by 10%", m, kChain4, DraftKind::Iid,
                                   accept_inflated, 35);
        CHECK(v.first.p_value < 1e-12);
        CHECK(v.joint.p_value < 1e-12);
    }
    {
        m.target = cfg(0.9f, 5, 0.7f);
        const Verdict v = run_case("negative control: no residual, one-hot tree", m, kTree7, DraftKind::TopK,
                                   accept_without_residual, 33);
        CHECK(v.first.p_value < 1e-12);
        CHECK(v.joint.p_value < 1e-12);
    }
    {
        // Penalties computed from the context alone at every node (the draft path ignored).
        Synthetic mp(4004);
        mp.context = kRepeatingContext;
        mp.target = with_transforms(cfg(1.f));
        const std::vector<int32_t> context = mp.context;
        const AcceptFn context_only = [&](const DraftTree &tree, const float *root, const float *nodes, int32_t vocab,
                                          const SamplingConfig &c, Rng &rng, const History &) {
            return accept_sampled(tree, root, nodes, vocab, c, rng, History::of(context));
        };
        const Verdict v = run_case("negative control: penalties blind to the draft path and the emitted tokens", mp,
                                   kChain4, DraftKind::Iid, context_only, 36);
        CHECK(v.joint.p_value < 1e-12);
    }
}

TEST_CASE("chi-square helper") {
    // Survival function against known values: P(X >= 3.841) = 0.05 for df 1, P(X >= 18.307) = 0.05
    // for df 10, P(X >= 2) = exp(-1) for df 2.
    CHECK(test::chi_square_sf(3.841458820694124, 1) == doctest::Approx(0.05).epsilon(1e-6));
    CHECK(test::chi_square_sf(18.307038053275146, 10) == doctest::Approx(0.05).epsilon(1e-6));
    CHECK(test::chi_square_sf(2.0, 2) == doctest::Approx(std::exp(-1.0)).epsilon(1e-9));
    CHECK(test::chi_square_sf(0.0, 5) == 1.0);
    CHECK(test::chi_square_sf(1000.0, 5) < 1e-200);
    CHECK(test::chi_square_sf(37.0, 40) == doctest::Approx(0.6060679068898447).epsilon(1e-9));  // even df: closed form
    // Goodness of fit: exact counts give 0; an impossible observation gives p = 0.
    const test::ChiSquareResult same = test::chi_square_gof({100, 200, 700}, {0.1, 0.2, 0.7});
    CHECK(same.statistic == doctest::Approx(0.0));
    CHECK(same.df == 2);
    CHECK(same.p_value == doctest::Approx(1.0));
    const test::ChiSquareResult impossible = test::chi_square_gof({100, 200, 1}, {0.3, 0.7, 0.0});
    CHECK(impossible.impossible == 1);
    CHECK(impossible.p_value == 0.0);
    // Pooling of small bins: expected counts 1, 1, 98 (n = 100) -> bins {98} and {1, 1} pooled
    // (2 < 5, merged into the smallest regular bin): one bin, df 0.
    CHECK(test::chi_square_gof({1, 1, 98}, {0.01, 0.01, 0.98}).df == 0);
    // Homogeneity: identical histograms give 0; different ones a tiny p.
    CHECK(test::chi_square_homogeneity({50, 30, 20}, {100, 60, 40}).statistic == doctest::Approx(0.0));
    CHECK(test::chi_square_homogeneity({500, 300, 200}, {200, 300, 500}).p_value < 1e-20);
}
