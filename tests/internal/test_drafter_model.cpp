// The drafter model on the CPU engine against the training tool's PyTorch forward
// (tests/fixtures/eagle_tiny_a, written by tools/drafter/make_fixture.py for gdn_tiny_a):
// the target's features, the drafter's chain from a zero state, and a draft tree on the state
// after the chain, features and logits. Tolerance as eagle_drafter.md states: max |a-b| / max |b|
// <= 1e-4 per tensor.
#include <doctest/doctest.h>

#include "engine/backend.h"
#include "engine/model.h"
#include "model/drafter_checkpoint.h"
#include "session/session.h"
#include "support/fixture.h"
#include "support/fixture_model.h"

using namespace specla;

namespace {

constexpr double kTol = 1e-4;

}  // namespace

TEST_CASE("drafter model: eagle_tiny_a matches the training tool's forward") {
    auto target = test::load_fixture_model("gdn_tiny_a");
    const size_t D = size_t(target->config().hidden_size), V = size_t(target->config().vocab_size);
    test::Expected ex = test::load_expected("eagle_tiny_a");

    SUBCASE("the target's features") {
        const std::vector<int32_t> toks = ex.i32("target.tokens");
        const std::vector<float> want = ex.f32("target.features");
        Session s(target, SessionLimits());
        std::vector<float> f(toks.size() * D);
        s.eval(toks.data(), toks.size(), LogitsRows::None, nullptr, f.data());
        const double err = test::max_rel_error(f.data(), want.data(), want.size());
        INFO("target features rel err ", err);
        CHECK(err <= kTol);
    }

    std::unique_ptr<Backend> drafter = load_drafter_model(test::fixture_dir("eagle_tiny_a"), *target);
    REQUIRE(drafter->config().num_layers == 1);
    auto st = drafter->create_state(SessionLimits());
    const std::vector<int32_t> ctoks = ex.i32("chain.tokens");
    const std::vector<float> cin = ex.f32("chain.features_in");
    const int32_t nc = int32_t(ctoks.size());
    std::vector<float> cout(size_t(nc) * D), clog(size_t(nc) * V);
    RowFeatures rf;
    rf.in = cin.data(), rf.out = cout.data();
    drafter->eval_chain(*st, ctoks.data(), nc, LogitsRows::All, clog.data(), rf);
    const double ferr = test::max_rel_error(cout.data(), ex.f32("chain.features_out").data(), cout.size());
    const double lerr = test::max_rel_error(clog.data(), ex.f32("chain.logits").data(), clog.size());
    INFO("chain features rel err ", ferr, ", logits rel err ", lerr);
    CHECK(ferr <= kTol);
    CHECK(lerr <= kTol);

    const std::vector<int32_t> ttoks = ex.i32("tree.tokens"), tpar = ex.i32("tree.parents");
    const std::vector<float> tin = ex.f32("tree.features_in");
    const std::vector<float> tfo = ex.f32("tree.features_out"), tlo = ex.f32("tree.logits");
    const int32_t nt = int32_t(ttoks.size());
    for (TreeAlgorithm alg : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
        // All rows, then only the rows from 3 on (the deeper levels), as a drafter's level passes ask.
        for (int32_t first : {0, 3}) {
            std::vector<float> fo(size_t(nt - first) * D), lo(size_t(nt - first) * V);
            VerifyOutputs vo;
            vo.logits = lo.data(), vo.features.in = tin.data(), vo.features.out = fo.data(), vo.first_row = first;
            drafter->verify_tree(*st, ttoks.data(), tpar.data(), nt, alg, vo);
            const double tf = test::max_rel_error(fo.data(), tfo.data() + size_t(first) * D, fo.size());
            const double tl = test::max_rel_error(lo.data(), tlo.data() + size_t(first) * V, lo.size());
            INFO("algorithm ", int(alg), " first row ", first, ": tree features rel err ", tf, ", logits ", tl);
            CHECK(tf <= kTol);
            CHECK(tl <= kTol);
        }
    }
    // The drafter needs its input features; a pass without them is refused.
    CHECK_THROWS(drafter->eval_chain(*st, ctoks.data(), 1, LogitsRows::Last, clog.data()));
}
