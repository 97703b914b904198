// The target's features (last hidden state before the final norm, spec/eagle_drafter.md) from the
// passes that already run: prefill rows against fla's hidden states (tests/fixtures/gdn_tiny_a),
// verification rows against chains of the same paths, and the verify_tree first_row window.
// Tolerances: fla 2e-5 as the fixture tests (max |a-b| / max |b|); tree vs chain 2e-5 as the
// verification tests.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "session/session.h"
#include "support/fixture.h"
#include "support/fixture_model.h"
#include "support/random_trees.h"

using namespace specla;

namespace {

constexpr double kTol = 2e-5;

}  // namespace

TEST_CASE("features: prefill rows are fla's last hidden state before the final norm (gdn_tiny_a)") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    const ModelConfig &c = model->config();
    const size_t D = size_t(c.hidden_size), V = size_t(c.vocab_size);
    test::Expected ex = test::load_expected("gdn_tiny_a");
    const std::vector<int32_t> prompt = ex.i32("input_ids");
    // fla's last entry of output_hidden_states is taken after the final norm: compare
    // norm(features) with it, and the logits the same pass returns with fla's.
    const std::vector<float> want_normed = ex.f32("prefill_hidden_" + std::to_string(c.num_layers));
    const std::vector<float> want_logits = ex.f32("prefill_logits");
    REQUIRE(want_normed.size() == prompt.size() * D);

    SessionLimits lim;
    lim.max_batch_tokens = 16;  // several blocks: the rows are placed block by block
    Session s(model, lim);
    std::vector<float> features(prompt.size() * D), logits(prompt.size() * V);
    s.eval(prompt.data(), prompt.size(), LogitsRows::All, logits.data(), features.data());

    test::Expected mw{SafetensorsFile::open(test::fixture_dir("gdn_tiny_a") + "/model.safetensors")};
    const std::vector<float> norm_w = mw.f32("model.norm.weight");
    std::vector<float> normed(features.size());
    for (size_t t = 0; t < prompt.size(); ++t)
        cpu::rmsnorm(features.data() + t * D, norm_w.data(), int64_t(D), c.norm_eps, normed.data() + t * D);
    const double err = test::max_rel_error(normed.data(), want_normed.data(), normed.size());
    INFO("norm(features) vs fla rel err ", err);
    CHECK(err <= kTol);
    CHECK(test::max_rel_error(logits.data(), want_logits.data(), logits.size()) <= kTol);
    // Not normalised already: the features carry the residual stream's own scale.
    double ss = 0;
    for (size_t i = 0; i < D; ++i) ss += double(features[i]) * features[i];
    CHECK(std::fabs(std::sqrt(ss / double(D)) - 1.0) > 0.1);
}

TEST_CASE("features: verification rows equal chain features of the same paths") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    const ModelConfig &c = model->config();
    const size_t D = size_t(c.hidden_size);
    test::Expected ex = test::load_expected("gdn_tiny_a");
    const std::vector<int32_t> prompt = ex.i32("input_ids");
    std::mt19937_64 rng(7);
    for (test::TreeShape shape : {test::TreeShape::Chain, test::TreeShape::Bushy, test::TreeShape::Random}) {
        const test::RandomTree rt = test::random_tree(shape, 9, c.vocab_size, rng);
        DraftTree tree;
        tree.tokens = rt.tokens;
        tree.parents = rt.parents;
        for (TreeAlgorithm alg : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
            Session s(model, SessionLimits());
            s.eval(prompt.data(), prompt.size() - 1, LogitsRows::None, nullptr);
            s.set_pending(prompt.back());
            std::vector<float> root(D), nodes(size_t(tree.size()) * D);
            Session::VerifyBuffers vb;
            vb.root_features = root.data();
            vb.node_features = nodes.data();
            s.verify(tree, alg, vb);

            Session ref(model, SessionLimits());
            std::vector<float> pf(prompt.size() * D);
            ref.eval(prompt.data(), prompt.size(), LogitsRows::None, nullptr, pf.data());
            INFO(test::tree_shape_name(shape), " algorithm ", int(alg));
            CHECK(test::max_rel_error(root.data(), pf.data() + (prompt.size() - 1) * D, D) <= kTol);
            for (int32_t v = 0; v < tree.size(); ++v) {
                std::vector<int32_t> toks = prompt;
                for (int32_t u : rt.path_to(v)) toks.push_back(tree.tokens[size_t(u)]);
                Session chain(model, SessionLimits());
                std::vector<float> f(toks.size() * D);
                chain.eval(toks.data(), toks.size(), LogitsRows::None, nullptr, f.data());
                const double err = test::max_rel_error(nodes.data() + size_t(v) * D, f.data() + (toks.size() - 1) * D, D);
                INFO("node ", v, " rel err ", err);
                CHECK(err <= kTol);
            }
        }
    }
}

TEST_CASE("features: verify_tree writes only the rows from first_row, indexed from it") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    Backend &be = model->backend();
    const ModelConfig &c = model->config();
    const size_t D = size_t(c.hidden_size), V = size_t(c.vocab_size);
    std::mt19937_64 rng(11);
    const test::RandomTree rt = test::random_tree(test::TreeShape::Random, 12, c.vocab_size, rng);
    const int32_t n = rt.size();
    auto st = be.create_state(SessionLimits());
    const std::vector<int32_t> ctx = {5, 17, 200, 3};
    be.eval_chain(*st, ctx.data(), int32_t(ctx.size()), LogitsRows::None, nullptr);

    std::vector<float> all_logits(size_t(n) * V), all_feat(size_t(n) * D);
    std::vector<int32_t> all_arg(static_cast<size_t>(n));
    VerifyOutputs full;
    full.logits = all_logits.data(), full.argmax = all_arg.data(), full.features.out = all_feat.data();
    be.verify_tree(*st, rt.tokens.data(), rt.parents.data(), n, TreeAlgorithm::Hybrid, full);

    const int32_t first = 7, m = n - first;
    // Guard rows around the window catch a write outside it.
    const float guard = 12345.f;
    std::vector<float> logits((size_t(m) + 1) * V, guard), feat((size_t(m) + 1) * D, guard);
    std::vector<int32_t> arg(size_t(m) + 1, -7);
    VerifyOutputs part;
    part.logits = logits.data(), part.argmax = arg.data(), part.features.out = feat.data(), part.first_row = first;
    be.verify_tree(*st, rt.tokens.data(), rt.parents.data(), n, TreeAlgorithm::Hybrid, part);
    CHECK(test::max_rel_error(logits.data(), all_logits.data() + size_t(first) * V, size_t(m) * V) <= 1e-6);
    CHECK(test::max_rel_error(feat.data(), all_feat.data() + size_t(first) * D, size_t(m) * D) <= 1e-6);
    for (int32_t i = 0; i < m; ++i) CHECK(arg[size_t(i)] == all_arg[size_t(first + i)]);
    CHECK(logits[size_t(m) * V] == guard);
    CHECK(feat[size_t(m) * D] == guard);
    CHECK(arg[size_t(m)] == -7);

    VerifyOutputs bad;
    bad.first_row = n;
    CHECK_THROWS(be.verify_tree(*st, rt.tokens.data(), rt.parents.data(), n, TreeAlgorithm::Hybrid, bad));
    // A target model refuses input features (only drafter models take them).
    std::vector<float> in(D, 0.f);
    RowFeatures rf;
    rf.in = in.data();
    CHECK_THROWS(be.eval_chain(*st, ctx.data(), 1, LogitsRows::None, nullptr, rf));
}
