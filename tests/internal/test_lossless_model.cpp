// Losslessness of speculative sampling through the real engine: on a tiny-vocabulary random
// model, the first token and the first two tokens emitted by speculative steps (verification +
// acceptance + commit) follow the target's own sampling distribution, computed exactly from the
// model. Drafts come from a drafter distribution that disagrees with the target, for chains and
// trees, drawn at random (with their distributions passed) or chosen deterministically (one-hot).
// Chi-square goodness of fit at significance 1e-3 with fixed seeds (reproducible verdicts).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>

#include "engine/model.h"
#include "generate/generate.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "session/session.h"
#include "spec/eagle_drafter.h"
#include "spec/speculative.h"
#include "support/stats.h"

using namespace specla;

namespace {

constexpr int32_t kVocab = 6;
constexpr double kAlpha = 1e-3;

std::shared_ptr<Model> tiny_model() {
    ModelConfig c;
    c.vocab_size = kVocab, c.hidden_size = 16, c.num_layers = 1, c.num_heads = 1, c.num_v_heads = 1;
    c.head_k_dim = 8, c.head_v_dim = 8, c.conv_size = 2, c.intermediate_size = 32;
    ModelWeights w = random_weights(c, 20261130, WeightType::F32);
    // Spread the output logits so that the target is far from uniform.
    for (float &x : w.lm_head.f32) x *= 4.f;
    ModelOptions o;
    o.n_threads = 1;
    return Model::from_weights(c, std::move(w), o);
}

// A drafter that disagrees with the target: row `prev` of a fixed table.
struct DraftTable {
    float q[kVocab][kVocab];
    DraftTable() {
        for (int a = 0; a < kVocab; ++a) {
            float s = 0;
            for (int b = 0; b < kVocab; ++b) s += q[a][b] = float(1 + ((a * 5 + b * 3) % kVocab) * ((b + a) % 3 + 1));
            for (int b = 0; b < kVocab; ++b) q[a][b] /= s;
        }
    }
    int32_t draw(int32_t prev, Rng &rng) const {
        return sample_from_distribution(q[prev], kVocab, rng.uniform());
    }
    int32_t top(int32_t prev, int rank) const {
        int32_t order[kVocab];
        for (int i = 0; i < kVocab; ++i) order[i] = i;
        std::sort(order, order + kVocab, [&](int32_t x, int32_t y) { return q[prev][x] > q[prev][y] || (q[prev][x] == q[prev][y] && x < y); });
        return order[rank];
    }
};

enum class DraftKind { ChainSampled, TreeSampled, TreeOneHot };

DraftTree make_draft(DraftKind kind, int32_t last, const DraftTable &t, Rng &rng) {
    DraftTree d;
    auto add = [&](int32_t tok, int32_t parent, int32_t prev, bool with_dist) {
        d.add(tok, parent);
        if (with_dist) d.draft_dists.insert(d.draft_dists.end(), t.q[prev], t.q[prev] + kVocab);
    };
    switch (kind) {
        case DraftKind::ChainSampled: {
            int32_t prev = last;
            for (int i = 0; i < 3; ++i) {
                const int32_t tok = t.draw(prev, rng);
                add(tok, i - 1, prev, true);
                prev = tok;
            }
            break;
        }
        case DraftKind::TreeSampled: {
            // Two root candidates drawn independently from the same row, each with one child.
            const int32_t a = t.draw(last, rng), b = t.draw(last, rng);
            add(a, -1, last, true);
            add(b, -1, last, true);
            add(t.draw(a, rng), 0, a, true);
            add(t.draw(b, rng), 1, b, true);
            break;
        }
        case DraftKind::TreeOneHot: {
            const int32_t a = t.top(last, 0), b = t.top(last, 1);
            add(a, -1, last, false);
            add(b, -1, last, false);
            add(t.top(a, 0), 0, a, false);
            add(t.top(b, 0), 1, b, false);
            break;
        }
    }
    return d;
}

}  // namespace

TEST_CASE("speculative sampling through the engine is distributed exactly as plain sampling") {
    auto model = tiny_model();
    const DraftTable table;
    const std::vector<int32_t> prompt = {1, 4, 2, 5};
    SessionLimits lim;
    lim.max_tree_nodes = 8;

    struct Variant { const char *name; SamplingConfig s; };
    std::vector<Variant> variants = {{"T=1", {1.0f, 0, 1.0f}}, {"T=0.7 top-k 4", {0.7f, 4, 1.0f}},
                                     {"T=1.3 top-p 0.8", {1.3f, 0, 0.8f}}};
    {
        // Bias, penalties (a window of 3: the draft path and the emitted tokens push prompt
        // tokens out of it) and min-p, which make the target depend on each node's path.
        Variant v{"T=1.2 + bias, penalties, min-p", {1.2f, 0, 1.f}};
        v.s.logit_bias = {{0, 0.8f}, {3, -0.6f}};
        v.s.repetition_penalty = 1.4f;
        v.s.presence_penalty = 0.3f;
        v.s.frequency_penalty = 0.2f;
        v.s.penalty_last_n = 3;
        v.s.min_p = 0.03f;
        variants.push_back(v);
    }
    for (const Variant &var : variants) {
        // The exact target: p1 after the prompt, p2 after prompt + a.
        Session ref(model, lim);
        std::vector<float> logits(static_cast<size_t>(kVocab));
        ref.eval(prompt.data(), prompt.size(), LogitsRows::Last, logits.data());
        std::vector<double> p1(kVocab), p12(kVocab * kVocab);
        std::vector<float> dist(static_cast<size_t>(kVocab));
        sampling_distribution(logits.data(), kVocab, var.s, History::of(prompt), dist.data());
        for (int a = 0; a < kVocab; ++a) p1[size_t(a)] = dist[size_t(a)];
        for (int a = 0; a < kVocab; ++a) {
            Session s(model, lim);
            std::vector<int32_t> seq = prompt;
            seq.push_back(a);
            s.eval(seq.data(), seq.size(), LogitsRows::Last, logits.data());
            std::vector<float> d2(static_cast<size_t>(kVocab));
            sampling_distribution(logits.data(), kVocab, var.s, History::of(seq), d2.data());
            for (int b = 0; b < kVocab; ++b) p12[size_t(a * kVocab + b)] = p1[size_t(a)] * d2[size_t(b)];
        }

        // Power check: the drafter's own distribution, sampled as often, is rejected by the same
        // test, so a sampler that leaked the drafter's preferences would be caught.
        {
            Rng q_rng(test::fixed_seed(99));
            std::vector<int64_t> q_first(kVocab, 0);
            for (int i = 0; i < 40000; ++i) ++q_first[size_t(table.draw(prompt.back(), q_rng))];
            const auto rq = test::chi_square_gof(q_first, p1);
            INFO(var.name, " drafter-only control ", rq.str());
            CHECK((rq.p_value < kAlpha || rq.impossible > 0));
        }
        if (var.s.transforms()) {
            // Plain sampling (the generation loop's decoding steps) follows the same p1, p12.
            const uint64_t seed = test::fixed_seed(0x91a1e000u);
            std::vector<int64_t> first(kVocab, 0), pair(kVocab * kVocab, 0);
            Session s(model, lim);
            GenerateOptions g;
            g.sampling = var.s;
            g.max_tokens = 2;
            for (int trial = 0; trial < 40000; ++trial) {
                s.reset();
                g.seed = seed + uint64_t(trial);
                const std::vector<int32_t> out = generate(s, prompt.data(), prompt.size(), g);
                ++first[size_t(out[0])];
                ++pair[size_t(out[0] * kVocab + out[1])];
            }
            const auto r1 = test::chi_square_gof(first, p1);
            const auto r2 = test::chi_square_gof(pair, p12);
            std::printf("[lossless] %s, plain sampling: first token %s; two tokens %s\n", var.name, r1.str().c_str(),
                        r2.str().c_str());
            CHECK(r1.impossible == 0);
            CHECK(r2.impossible == 0);
            CHECK(r1.p_value > kAlpha);
            CHECK(r2.p_value > kAlpha);
        }
        for (DraftKind kind : {DraftKind::ChainSampled, DraftKind::TreeSampled, DraftKind::TreeOneHot}) {
            const uint64_t seed = test::fixed_seed(0x5eed0000u + uint64_t(kind) * 17 + uint64_t(&var - variants.data()));
            Rng rng(seed), draft_rng(seed ^ 0x9e3779b97f4a7c15ull);
            std::vector<int64_t> first(kVocab, 0), pair(kVocab * kVocab, 0);
            const int trials = 40000;
            Session s(model, lim);
            for (int trial = 0; trial < trials; ++trial) {
                s.reset();
                s.eval(prompt.data(), prompt.size() - 1, LogitsRows::None, nullptr);
                s.set_pending(prompt.back());
                std::vector<int32_t> emitted;
                while (emitted.size() < 2) {
                    const int32_t last = s.context().back();
                    const DraftTree d = make_draft(kind, last, table, draft_rng);
                    const StepResult r = verify_accept_commit(s, d, var.s, rng, /*deferred=*/trial % 2 == 0,
                                                              TreeAlgorithm::Auto, false);
                    for (int32_t v : r.accept.path) emitted.push_back(d.tokens[size_t(v)]);
                    emitted.push_back(r.accept.bonus);
                }
                ++first[size_t(emitted[0])];
                ++pair[size_t(emitted[0] * kVocab + emitted[1])];
            }
            const auto r1 = test::chi_square_gof(first, p1);
            const auto r2 = test::chi_square_gof(pair, p12);
            std::printf("[lossless] %s, draft %d: first token %s; two tokens %s\n", var.name, int(kind), r1.str().c_str(),
                        r2.str().c_str());
            INFO(var.name, " draft kind ", int(kind), " seed ", seed);
            CHECK(r1.impossible == 0);
            CHECK(r2.impossible == 0);
            CHECK(r1.p_value > kAlpha);
            CHECK(r2.p_value > kAlpha);
        }
    }
}

// The same check with the learned drafter's real distributions: an EAGLE drafter of random
// weights for the tiny model (its layer, fc and so its distributions disagree with the target's)
// drafts sampled trees inside generate_speculative, which hands its rows to the acceptance rule.
TEST_CASE("speculative sampling with the EAGLE drafter is distributed exactly as plain sampling") {
    auto model = tiny_model();
    const ModelConfig &c = model->config();
    ModelWeights own;
    {
        ModelWeights r = random_weights(c, 4242, WeightType::F32);
        own.layers = std::move(r.layers);
        own.fc.allocate(c.hidden_size, 2 * c.hidden_size, WeightType::F32);
        Rng w(77);
        for (float &x : own.fc.f32) x = float(w.uniform() * 2 - 1) * 0.4f;
    }
    EagleDrafter drafter(model->backend().create_drafter_backend(c, own));
    const std::vector<int32_t> prompt = {1, 4, 2, 5};
    SessionLimits lim;
    lim.max_tree_nodes = 8;

    struct Variant { const char *name; SamplingConfig s; };
    const std::vector<Variant> variants = {{"T=1", {1.0f, 0, 1.0f}}, {"T=0.7 top-k 4", {0.7f, 4, 1.0f}}};
    for (const Variant &var : variants) {
        Session ref(model, lim);
        std::vector<float> logits(static_cast<size_t>(kVocab)), dist(static_cast<size_t>(kVocab));
        std::vector<float> feats((prompt.size() - 1) * size_t(c.hidden_size));
        ref.eval(prompt.data(), prompt.size() - 1, LogitsRows::None, nullptr, feats.data());
        ref.eval(prompt.data() + prompt.size() - 1, 1, LogitsRows::Last, logits.data());
        std::vector<double> p1(kVocab), p12(kVocab * kVocab);
        sampling_distribution(logits.data(), kVocab, var.s, dist.data());
        for (int a = 0; a < kVocab; ++a) p1[size_t(a)] = dist[size_t(a)];
        for (int a = 0; a < kVocab; ++a) {
            Session s(model, lim);
            std::vector<int32_t> seq = prompt;
            seq.push_back(a);
            s.eval(seq.data(), seq.size(), LogitsRows::Last, logits.data());
            sampling_distribution(logits.data(), kVocab, var.s, dist.data());
            for (int b = 0; b < kVocab; ++b) p12[size_t(a * kVocab + b)] = p1[size_t(a)] * dist[size_t(b)];
        }
        // Power check: the drafter's own first-position distribution (its catch-up chain over the
        // prompt's true features), sampled as often, is rejected by the same test.
        {
            Backend &dm = drafter.model();
            auto st = dm.create_state(lim);
            RowFeatures rf;
            rf.in = feats.data();
            dm.eval_chain(*st, prompt.data() + 1, int32_t(prompt.size() - 1), LogitsRows::Last, logits.data(), rf);
            sampling_distribution(logits.data(), kVocab, var.s, dist.data());
            Rng q_rng(test::fixed_seed(98));
            std::vector<int64_t> q_first(kVocab, 0);
            for (int i = 0; i < 40000; ++i) ++q_first[size_t(sample_from_distribution(dist.data(), kVocab, q_rng.uniform()))];
            const auto rq = test::chi_square_gof(q_first, p1);
            INFO(std::string(var.name), " drafter-only control ", rq.str());
            CHECK((rq.p_value < kAlpha || rq.impossible > 0));
        }
        for (const DraftBudget budget : {DraftBudget{3, 3, 1, 0.f, false}, DraftBudget{6, 2, 3, 0.f, false}}) {
            const uint64_t seed = test::fixed_seed(0xea91e000u + uint64_t(budget.top_k) * 31 + uint64_t(&var - variants.data()));
            std::vector<int64_t> first(kVocab, 0), pair(kVocab * kVocab, 0);
            const int trials = 40000;
            Session s(model, lim);
            SpecOptions so;
            so.gen.sampling = var.s;
            so.gen.max_tokens = 3;  // the first step's tree may then be two deep
            so.budget = budget;
            int64_t drafted = 0, accepted = 0;
            for (int trial = 0; trial < trials; ++trial) {
                s.reset();
                so.gen.seed = seed + uint64_t(trial) * 0x9e3779b97f4a7c15ull;
                so.deferred_commit = trial % 2 == 0;
                SpecStats stats;
                const std::vector<int32_t> out = generate_speculative(s, drafter, prompt.data(), prompt.size(), so, stats);
                REQUIRE(out.size() == 3);
                ++first[size_t(out[0])];
                ++pair[size_t(out[0] * kVocab + out[1])];
                drafted += stats.drafted, accepted += stats.accepted;
            }
            const auto r1 = test::chi_square_gof(first, p1);
            const auto r2 = test::chi_square_gof(pair, p12);
            std::printf("[lossless eagle] %s, top-k %d: first token %s; two tokens %s (drafted %lld, accepted %lld)\n",
                        var.name, budget.top_k, r1.str().c_str(), r2.str().c_str(), (long long)drafted,
                        (long long)accepted);
            INFO(std::string(var.name), " top-k ", budget.top_k, " seed ", seed);
            CHECK(drafted >= trials);  // trees were drafted and
            CHECK(accepted > trials / 10);  // their tokens accepted often enough to matter
            CHECK(r1.impossible == 0);
            CHECK(r2.impossible == 0);
            CHECK(r1.p_value > kAlpha);
            CHECK(r2.p_value > kAlpha);
        }
    }
}
