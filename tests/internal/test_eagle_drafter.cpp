// The EAGLE drafter inside speculative generation on the CPU engine (eagle_tiny_a for gdn_tiny_a):
// greedy output equals plain greedy decoding, the drafter follows the committed features (its
// drafts are accepted: a drafter that ignored them would not be), and proposals after a context
// without features are empty until features arrive.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/model.h"
#include "generate/generate.h"
#include "session/session.h"
#include "spec/eagle_drafter.h"
#include "spec/speculative.h"
#include "support/fixture.h"
#include "support/fixed_width_cases.h"
#include "support/fixture_model.h"
#include "support/last_top.h"

using namespace specla;

TEST_CASE("EAGLE drafter: greedy speculative output equals plain greedy (gdn_tiny_a + eagle_tiny_a)") {
    auto target = test::load_fixture_model("gdn_tiny_a");
    auto drafter = EagleDrafter::load(test::fixture_dir("eagle_tiny_a"), *target);
    std::mt19937_64 rng(3);
    for (int p = 0; p < 4; ++p) {
        std::vector<int32_t> prompt(size_t(5 + 7 * p));
        for (int32_t &t : prompt) t = int32_t(rng() % 512);
        GenerateOptions g;
        g.max_tokens = 40;
        Session plain(target, SessionLimits());
        const std::vector<int32_t> want = generate(plain, prompt.data(), prompt.size(), g);

        for (const DraftBudget budget : {DraftBudget{8, 4, 2, 8.f, false}, DraftBudget{16, 6, 4, 4.f, true}}) {
            Session s(target, SessionLimits());
            SpecOptions so;
            so.gen = g;
            so.budget = budget;
            SpecStats stats;
            const std::vector<int32_t> got = generate_speculative(s, *drafter, prompt.data(), prompt.size(), so, stats);
            INFO("prompt ", p, " budget ", budget.max_nodes, "/", budget.max_depth, "/", budget.top_k);
            CHECK(got == want);
            MESSAGE("drafted ", stats.drafted, " accepted ", stats.accepted, " steps ", stats.steps);
            // Sized from cost, a random drafter's low probabilities may not pay for any node.
            if (!budget.size_from_cost) CHECK(stats.drafted > 0);
            CHECK(s.context().size() == prompt.size() + want.size());
        }
    }
}

TEST_CASE("EAGLE drafter: proposals need the features of the consumed tokens") {
    auto target = test::load_fixture_model("gdn_tiny_a");
    auto drafter = EagleDrafter::load(test::fixture_dir("eagle_tiny_a"), *target);
    const std::vector<int32_t> ctx = {1, 2, 3, 4, 5, 6};
    DraftTree tree;
    DraftBudget b;
    b.size_from_cost = false;  // the budget decides (a random drafter's trees may not pay)
    drafter->propose(ctx, b, tree);
    CHECK(tree.empty());  // no features given: nothing to draft from

    Session s(target, SessionLimits());
    std::vector<float> f((ctx.size() - 1) * size_t(target->config().hidden_size));
    s.eval(ctx.data(), ctx.size() - 1, LogitsRows::None, nullptr, f.data());
    drafter->observe_features(0, f.data(), int32_t(ctx.size() - 1));
    drafter->propose(ctx, b, tree);
    CHECK(!tree.empty());
    CHECK(tree.size() <= b.max_nodes);
    CHECK(tree.draft_dists.empty());  // greedy: one-hot proposals
}

TEST_CASE("EAGLE drafter: eval_chain's last-row top tokens are top_tokens of that row's logits (CPU)") {
    auto target = test::load_fixture_model("gdn_tiny_a");
    auto drafter = EagleDrafter::load(test::fixture_dir("eagle_tiny_a"), *target);
    test::check_last_top_grid(target->backend(), drafter->model(), 17, 0.f);  // the host's own top_tokens
}

TEST_CASE("EAGLE drafter: a proposal without new rows drafts from the root it kept, or nothing") {
    auto target = test::load_fixture_model("gdn_tiny_a");
    auto drafter = EagleDrafter::load(test::fixture_dir("eagle_tiny_a"), *target);
    const std::vector<int32_t> ctx = {3, 1, 4, 1, 5, 9, 2};
    Session s(target, SessionLimits());
    std::vector<float> f((ctx.size() - 1) * size_t(target->config().hidden_size));
    s.eval(ctx.data(), ctx.size() - 1, LogitsRows::None, nullptr, f.data());
    drafter->observe_features(0, f.data(), int32_t(ctx.size() - 1));
    DraftBudget b;
    b.size_from_cost = false;
    b.top_k = 3;
    DraftTree first, again, other_k, sampled;
    drafter->propose(ctx, b, first);
    drafter->propose(ctx, b, again);  // nothing to catch up: the kept root, the same tree
    CHECK(!first.empty());
    CHECK(again.tokens == first.tokens);
    CHECK(again.parents == first.parents);
    // A greedy catch-up kept top tokens, not logits: another k, or sampled drafting, has no root.
    b.top_k = 2;
    drafter->propose(ctx, b, other_k);
    CHECK(other_k.empty());
    SamplingConfig sc;
    sc.temperature = 0.8f;
    Rng r(5);
    drafter->begin_generation(sc, &r);
    drafter->propose(ctx, b, sampled);
    CHECK(sampled.empty());
    drafter->end_generation();
}

TEST_CASE("EAGLE drafter: its committed state is the chain over the true features of the accepted path") {
    auto target = test::load_fixture_model("gdn_tiny_a");
    const size_t D = size_t(target->config().hidden_size);
    std::mt19937_64 rng(5);
    for (bool sampled : {false, true}) {
        auto drafter = EagleDrafter::load(test::fixture_dir("eagle_tiny_a"), *target);
        std::vector<int32_t> prompt(13);
        for (int32_t &t : prompt) t = int32_t(rng() % 512);
        Session s(target, SessionLimits());
        SpecOptions so;
        so.gen.max_tokens = 30;
        so.gen.seed = 9;
        if (sampled) so.gen.sampling.temperature = 0.8f;
        so.budget = DraftBudget{8, 4, 3, 8.f, false};
        SpecStats stats;
        generate_speculative(s, *drafter, prompt.data(), prompt.size(), so, stats);
        // Catch up on the last step's rows, then compare with a chain from a zero state over
        // (x_{i+1}, f_i), f from one plain pass of the target over the whole context.
        const std::vector<int32_t> ctx = s.context();
        DraftTree tree;
        drafter->propose(ctx, DraftBudget{}, tree);
        REQUIRE(drafter->consumed_positions() == int64_t(ctx.size()) - 1);
        const size_t rows = ctx.size() - 1;
        Session ref(target, SessionLimits());
        std::vector<float> f(rows * D);
        ref.eval(ctx.data(), rows, LogitsRows::None, nullptr, f.data());
        Backend &dm = drafter->model();
        SessionLimits lim;
        lim.max_batch_tokens = int32_t(rows);
        auto st = dm.create_state(lim);
        RowFeatures rf;
        rf.in = f.data();
        dm.eval_chain(*st, ctx.data() + 1, int32_t(rows), LogitsRows::None, nullptr, rf);
        const ModelConfig &dc = dm.config();
        const size_t S = size_t(dc.recurrent_state_floats_per_layer());
        std::vector<float> a(S), b(S);
        dm.read_recurrent_state(drafter->state(), 0, a.data());
        dm.read_recurrent_state(*st, 0, b.data());
        const double err = test::max_rel_error(a.data(), b.data(), S);
        INFO("sampled ", sampled, ": drafter state rel err ", err, " after ", stats.steps, " steps");
        CHECK(err <= 1e-4);
    }
}

namespace {

// Forwards to a drafter and records the features it is handed, by context position.
struct FeatureLog final : Drafter {
    Drafter &inner;
    size_t D;
    std::vector<int64_t> positions;
    std::vector<float> rows;
    FeatureLog(Drafter &d, size_t hidden) : inner(d), D(hidden) {}
    void propose(const std::vector<int32_t> &c, const DraftBudget &b, DraftTree &out) override { inner.propose(c, b, out); }
    void observe_accepted(const std::vector<int32_t> &c) override { inner.observe_accepted(c); }
    bool wants_features() const override { return inner.wants_features(); }
    void observe_features(int64_t first, const float *f, int32_t n) override {
        for (int32_t i = 0; i < n; ++i) positions.push_back(first + i);
        rows.insert(rows.end(), f, f + size_t(n) * D);
        inner.observe_features(first, f, n);
    }
    void begin_generation(const SamplingConfig &s, Rng *rng) override { inner.begin_generation(s, rng); }
    void end_generation() override { inner.end_generation(); }
    void observe_verify_pass(int32_t n, double s) override { inner.observe_verify_pass(n, s); }
};

}  // namespace

TEST_CASE("EAGLE drafter: plain steps the gate takes hand the drafter every token's true feature") {
    auto target = test::load_fixture_model("gdn_tiny_a");
    auto eagle = EagleDrafter::load(test::fixture_dir("eagle_tiny_a"), *target);
    const size_t D = size_t(target->config().hidden_size);
    std::mt19937_64 rng(5);
    std::vector<int32_t> prompt(12);
    for (int32_t &t : prompt) t = int32_t(rng() % 512);
    GenerateOptions g;
    g.max_tokens = 120;
    Session plain(target, SessionLimits());
    const std::vector<int32_t> want = generate(plain, prompt.data(), prompt.size(), g);

    SpecOptions so;
    so.gen = g;
    so.budget = DraftBudget{8, 4, 2, 8.f, false};
    so.speculation_min_gain = 1e6;  // speculation never pays: probes between plain back-offs
    Session s(target, SessionLimits());
    FeatureLog log(*eagle, D);
    SpecStats stats;
    const std::vector<int32_t> got = generate_speculative(s, log, prompt.data(), prompt.size(), so, stats);
    CHECK(got == want);
    CHECK(stats.plain_steps >= 60);
    CHECK(stats.steps >= 9);  // the first probe, then at least one after a back-off

    // Every consumed position once, in order: the prompt's, then each step's.
    REQUIRE(!log.positions.empty());
    for (size_t i = 0; i < log.positions.size(); ++i) CHECK(log.positions[i] == int64_t(i));
    const size_t n = log.positions.size();
    CHECK(n == prompt.size() + got.size() - 1);  // the last emitted token is not consumed yet
    // ... and each is the target's feature there (a block evaluation of the same tokens).
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), got.begin(), got.end() - 1);
    Session ref(target, SessionLimits());
    std::vector<float> want_f(seq.size() * D), logits(size_t(target->config().vocab_size));
    ref.eval(seq.data(), seq.size(), LogitsRows::Last, logits.data(), want_f.data());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n * D; ++i) {
        worst = std::max(worst, double(std::fabs(log.rows[i] - want_f[i])));
        scale = std::max(scale, double(std::fabs(want_f[i])));
    }
    MESSAGE("features of " << n << " positions, max abs error " << worst << " of max " << scale);
    CHECK(worst <= 1e-4 * scale);
}

TEST_CASE("EAGLE drafter: fixed-width trees drafted in one backend call equal those drafted level by level (CPU)") {
    // The CPU backend drafts the one call as the level passes (engine/fixed_width_draft.h), so the
    // one-call path of the drafter (catch-up folded in, levels replayed and checked against the
    // builder's rule) runs here as it does on the GPU.
    const int trees = test::check_fixed_width_one_call_equals_level_by_level(test::load_fixture_model("gdn_tiny_a"));
    MESSAGE(trees << " fixed-width trees equal, one call against level by level");
}
