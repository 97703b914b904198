// Log-probabilities of generated tokens (sampling/logprobs.h, GenerateOptions::logprobs): the
// numbers against a direct log-softmax on fresh random rows, and a generation's reported values
// against the logits of an independent evaluation of the same tokens, for plain and speculative
// generation (accepted draft tokens and the target's own token read different rows), greedy and
// sampled; asking for them never changes the tokens.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "engine/model.h"
#include "generate/generation.h"
#include "sampling/logprobs.h"
#include "session/session.h"
#include "support/fixture.h"
#include "support/fixture_model.h"
#include "util/error.h"

using namespace specla;

namespace {

// Proposes the next tokens of a known continuation `ref` (the greedy output after `n_prompt`
// tokens): `good` correct tokens, then one wrong one, as a chain, so that passes accept several
// tokens and then the target's own token comes from the row after the last accepted node.
struct ScriptedDrafter : Drafter {
    std::vector<int32_t> ref;
    size_t n_prompt = 0;
    int32_t vocab = 0;
    int good = 2;
    void propose(const std::vector<int32_t> &context, const DraftBudget &budget, DraftTree &out) override {
        out.clear();
        // The context ends with the pending token: the last one emitted.
        const size_t at = context.size() - n_prompt;
        int32_t parent = -1;
        for (int k = 0; k <= good && k < budget.max_depth && k < budget.max_nodes; ++k) {
            if (at + size_t(k) >= ref.size()) break;
            const int32_t t = k < good ? ref[at + size_t(k)] : (ref[at + size_t(k)] + 1) % vocab;
            parent = out.add(t, parent);
        }
    }
};

// log-softmax of `row` over its first n entries, in double.
std::vector<double> log_softmax(const float *row, int32_t n) {
    double mx = -INFINITY;
    for (int32_t i = 0; i < n; ++i) mx = std::max(mx, double(row[i]));
    double s = 0;
    for (int32_t i = 0; i < n; ++i) s += std::exp(double(row[i]) - mx);
    std::vector<double> out(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) out[size_t(i)] = double(row[i]) - mx - std::log(s);
    return out;
}

// Every reported value against the logits of evaluating prompt + tokens in a fresh session:
// the row before token i is the one that chose it.
void check_against_replay(const std::shared_ptr<Model> &model, const std::vector<int32_t> &prompt,
                          const GenerationResult &r, int32_t n_top, double tol) {
    const int32_t V = model->config().vocab_size;
    REQUIRE(r.logprobs.logprobs.size() == r.tokens.size());
    REQUIRE(r.logprobs.top_ids.size() == r.tokens.size() * size_t(n_top));
    REQUIRE(r.logprobs.top_logprobs.size() == r.tokens.size() * size_t(n_top));
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), r.tokens.begin(), r.tokens.end());
    Session ref(model, SessionLimits());
    std::vector<float> logits(all.size() * size_t(V));
    ref.eval(all.data(), all.size(), LogitsRows::All, logits.data());
    for (size_t i = 0; i < r.tokens.size(); ++i) {
        const float *row = logits.data() + (prompt.size() - 1 + i) * size_t(V);
        const std::vector<double> lp = log_softmax(row, V);
        CAPTURE(i);
        CHECK(std::abs(r.logprobs.logprobs[i] - lp[size_t(r.tokens[i])]) < tol);
        for (int32_t k = 0; k < n_top; ++k) {
            const int32_t id = r.logprobs.top_ids[i * size_t(n_top) + size_t(k)];
            REQUIRE(id >= 0);
            REQUIRE(id < V);
            CHECK(std::abs(r.logprobs.top_logprobs[i * size_t(n_top) + size_t(k)] - lp[size_t(id)]) < tol);
            if (k > 0) CHECK(r.logprobs.top_logprobs[i * size_t(n_top) + size_t(k)] <=
                             r.logprobs.top_logprobs[i * size_t(n_top) + size_t(k) - 1]);
        }
    }
}

}  // namespace

TEST_CASE("logprobs: token_logprobs is the log-softmax, the top entries in order, on random rows") {
    std::mt19937 rng(0x10b9u);
    for (int trial = 0; trial < 50; ++trial) {
        const int32_t n = 1 + int32_t(rng() % 300);
        std::normal_distribution<float> nd(0.f, trial % 2 ? 30.f : 2.f);  // also logits far from 0
        std::vector<float> row(static_cast<size_t>(n));
        for (float &x : row) x = nd(rng);
        // Ties: lower id first.
        if (n > 3) row[size_t(n - 1)] = row[1];
        const int32_t n_top = std::min<int32_t>(n, int32_t(rng() % 21));
        const int32_t token = int32_t(rng() % uint32_t(n));
        float lp = 0;
        std::vector<int32_t> ids(static_cast<size_t>(n_top));
        std::vector<float> tops(static_cast<size_t>(n_top));
        token_logprobs(row.data(), n, token, n_top, &lp, ids.data(), tops.data());
        const std::vector<double> ref = log_softmax(row.data(), n);
        CHECK(std::abs(lp - ref[size_t(token)]) < 1e-5);
        double mass = 0;
        for (double v : ref) mass += std::exp(v);
        CHECK(std::abs(mass - 1.0) < 1e-9);
        std::vector<int32_t> order(static_cast<size_t>(n));
        for (int32_t i = 0; i < n; ++i) order[size_t(i)] = i;
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
        for (int32_t k = 0; k < n_top; ++k) {
            CHECK(ids[size_t(k)] == order[size_t(k)]);
            CHECK(std::abs(tops[size_t(k)] - ref[size_t(order[size_t(k)])]) < 1e-5);
        }
    }
}

TEST_CASE("logprobs: top_tokens gives token_logprobs' top entries, with zero-probability and missing slots marked") {
    std::mt19937 rng(0x70b5u);
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int trial = 0; trial < 50; ++trial) {
        const int32_t n = 1 + int32_t(rng() % 60);
        std::normal_distribution<float> nd(0.f, 3.f);
        std::vector<float> row(static_cast<size_t>(n));
        for (float &x : row) x = nd(rng);
        for (float &x : row)
            if (rng() % 4 == 0) x = ninf;  // masked ids: probability 0
        if (trial % 10 == 0) std::fill(row.begin(), row.end(), ninf);  // nothing to draft
        const int32_t k = 1 + int32_t(rng() % 80);  // also more slots than candidates
        std::vector<int32_t> ids(static_cast<size_t>(k));
        std::vector<float> lp(static_cast<size_t>(k));
        top_tokens(row.data(), n, k, ids.data(), lp.data());
        int32_t finite = 0;
        for (float x : row) finite += x > ninf;
        const int32_t have = std::min(k, finite);
        std::vector<int32_t> ref_ids(static_cast<size_t>(have));
        std::vector<float> ref_lp(static_cast<size_t>(have));
        float unused = 0;
        if (have > 0) token_logprobs(row.data(), n, 0, have, &unused, ref_ids.data(), ref_lp.data());
        for (int32_t i = 0; i < k; ++i) {
            CAPTURE(trial);
            CAPTURE(i);
            if (i < have) {
                CHECK(ids[size_t(i)] == ref_ids[size_t(i)]);
                CHECK(std::abs(lp[size_t(i)] - ref_lp[size_t(i)]) <= 1e-5f * std::max(1.f, std::abs(ref_lp[size_t(i)])));
            } else {
                CHECK(ids[size_t(i)] == -1);
                CHECK(lp[size_t(i)] == ninf);
            }
        }
    }
}

TEST_CASE("logprobs: plain and speculative generation report the model's log-probabilities and keep their tokens") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    const int32_t V = model->config().vocab_size;
    const std::vector<int32_t> prompt = {5, 17, 3, 99, 42, 7};
    for (const bool sampled : {false, true}) {
        CAPTURE(sampled);
        SpecOptions base;
        base.gen.max_tokens = 24;
        base.gen.seed = 1234;
        if (sampled) base.gen.sampling.temperature = 0.8f, base.gen.sampling.top_k = 40;
        SpecOptions with = base;
        with.gen.logprobs = true;
        with.gen.top_logprobs = 5;

        Session s0(model, SessionLimits()), s1(model, SessionLimits());
        const GenerationResult off = run_generation(s0, nullptr, prompt.data(), prompt.size(), base);
        const GenerationResult on = run_generation(s1, nullptr, prompt.data(), prompt.size(), with);
        CHECK(on.tokens == off.tokens);
        CHECK(off.logprobs.logprobs.empty());
        check_against_replay(model, prompt, on, 5, 1e-4);
        if (!sampled)  // greedy picks the most likely token
            for (size_t i = 0; i < on.tokens.size(); ++i) {
                CHECK(on.logprobs.top_ids[i * 5] == on.tokens[i]);
                CHECK(on.logprobs.top_logprobs[i * 5] == on.logprobs.logprobs[i]);
            }

        // Speculative: drafted chains with two right tokens then a wrong one, so the emitted
        // tokens come from the root row, from rows after accepted nodes and as the target's own.
        ScriptedDrafter d;
        d.ref = off.tokens;
        d.n_prompt = prompt.size();
        d.vocab = V;
        Session s2(model, SessionLimits()), s3(model, SessionLimits());
        const GenerationResult spec_off = run_generation(s2, &d, prompt.data(), prompt.size(), base);
        const GenerationResult spec_on = run_generation(s3, &d, prompt.data(), prompt.size(), with);
        CHECK(spec_on.tokens == spec_off.tokens);
        if (!sampled) {
            CHECK(spec_on.tokens == off.tokens);
            CHECK(spec_on.stats.accepted > 0);
        }
        check_against_replay(model, prompt, spec_on, 5, 1e-4);
    }
}

TEST_CASE("logprobs: bad requests are refused before anything is evaluated") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    Session s(model, SessionLimits());
    const std::vector<int32_t> prompt = {1, 2, 3};
    SpecOptions o;
    o.gen.logprobs = true;
    o.gen.top_logprobs = kMaxTopLogprobs + 1;
    CHECK_THROWS_WITH_AS(Generation(s, nullptr, prompt.data(), prompt.size(), o, TextOptions{}),
                         doctest::Contains("top_logprobs must be in [0, 20]"), Error);
    o.gen.top_logprobs = -1;
    CHECK_THROWS_AS(Generation(s, nullptr, prompt.data(), prompt.size(), o, TextOptions{}), Error);
    o.gen.logprobs = false;
    o.gen.top_logprobs = 3;
    CHECK_THROWS_WITH_AS(Generation(s, nullptr, prompt.data(), prompt.size(), o, TextOptions{}),
                         doctest::Contains("needs logprobs"), Error);
    CHECK(s.n_past() == 0);
}
