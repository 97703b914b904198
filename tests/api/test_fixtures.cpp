// The CPU engine against flash-linear-attention's own outputs (tests/fixtures/gdn_tiny_*), through
// the public API. Tolerance: fp32 throughout, max |ours - fla| / max |fla| <= 2e-5 (different but
// exact summation orders; observed ~1e-6).
#include <doctest/doctest.h>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"

namespace {

constexpr double kFixtureTol = 2e-5;

void check_fixture(const std::string &name) {
    test::ModelHandle model(test::fixture_dir(name));
    const specla_model_info info = model.info();
    const int32_t V = info.vocab_size;
    test::Expected ex = test::load_expected(name);
    const std::vector<int32_t> prompt = ex.i32("input_ids");
    const std::vector<int32_t> greedy = ex.i32("greedy_tokens");

    SUBCASE("prefill logits of every position") {
        test::SessionHandle s(model.m);
        const auto logits = s.eval(prompt, SPECLA_LOGITS_ALL, V);
        const auto want = ex.f32("prefill_logits");
        REQUIRE(want.size() == logits.size());
        const double err = test::max_rel_error(logits.data(), want.data(), want.size());
        INFO(name, " prefill rel err ", err);
        CHECK(err <= kFixtureTol);
    }
    SUBCASE("greedy tokens are identical and step logits match") {
        test::SessionHandle s(model.m);
        test::GenerateParams gp;
        gp.max_tokens = int32_t(greedy.size());
        gp.stop_at_eos = false;
        CHECK(s.generate(prompt, gp) == greedy);

        test::SessionHandle s2(model.m);
        s2.eval(prompt, SPECLA_LOGITS_NONE, V);
        const auto want = ex.f32("greedy_step_logits");
        for (size_t i = 0; i + 1 < greedy.size(); ++i) {
            const auto row = s2.eval({greedy[i]}, SPECLA_LOGITS_LAST, V);
            const double err = test::max_rel_error(row.data(), want.data() + i * size_t(V), size_t(V));
            INFO(name, " step ", i, " rel err ", err);
            CHECK(err <= kFixtureTol);
        }
    }
    SUBCASE("chain logits and the layer-0 state after prompt + chain") {
        test::SessionHandle s(model.m);
        s.eval(prompt, SPECLA_LOGITS_NONE, V);
        const auto chain = ex.i32("chain_tokens");
        const auto logits = s.eval(chain, SPECLA_LOGITS_ALL, V);
        const auto want = ex.f32("chain_logits");
        REQUIRE(want.size() == logits.size());
        const double err = test::max_rel_error(logits.data(), want.data(), want.size());
        INFO(name, " chain rel err ", err);
        CHECK(err <= kFixtureTol);

        const auto state_want = ex.f32("state_layer0_recurrent");
        const auto state = s.state(0, state_want.size());
        const double serr = test::max_rel_error(state.data(), state_want.data(), state.size());
        INFO(name, " state rel err ", serr);
        CHECK(serr <= kFixtureTol);
    }
    SUBCASE("one block, token by token and uneven blocks agree") {
        const size_t state_floats = size_t(info.num_v_heads) * info.head_k_dim * info.head_v_dim;
        test::SessionHandle whole(model.m);
        const auto ref = whole.eval(prompt, SPECLA_LOGITS_ALL, V);

        test::SessionHandle one(model.m);
        std::vector<float> stepwise;
        for (int32_t t : prompt) {
            const auto row = one.eval({t}, SPECLA_LOGITS_LAST, V);
            stepwise.insert(stepwise.end(), row.begin(), row.end());
        }
        CHECK(test::max_rel_error(stepwise.data(), ref.data(), ref.size()) <= 1e-6);

        // Uneven blocks, also through the session's internal block split (max_batch_tokens 5).
        specla_session_params sp = specla_session_default_params();
        sp.max_batch_tokens = 5;
        test::SessionHandle uneven(model.m, sp);
        std::vector<float> pieces;
        const size_t cuts[] = {1, 7, 3, 12};
        size_t pos = 0, c = 0;
        while (pos < prompt.size()) {
            const size_t len = std::min(cuts[c++ % 4], prompt.size() - pos);
            const auto part = uneven.eval({prompt.begin() + long(pos), prompt.begin() + long(pos + len)},
                                          SPECLA_LOGITS_ALL, V);
            pieces.insert(pieces.end(), part.begin(), part.end());
            pos += len;
        }
        CHECK(test::max_rel_error(pieces.data(), ref.data(), ref.size()) <= 1e-6);

        for (int32_t layer = 0; layer < info.num_layers; ++layer) {
            const auto a = whole.state(layer, state_floats);
            const auto b = one.state(layer, state_floats);
            const auto d = uneven.state(layer, state_floats);
            CHECK(test::max_rel_error(b.data(), a.data(), a.size()) <= 1e-6);
            CHECK(test::max_rel_error(d.data(), a.data(), a.size()) <= 1e-6);
        }
    }
}

}  // namespace

TEST_CASE("fixture gdn_tiny_a (plain heads) matches fla") { check_fixture("gdn_tiny_a"); }
TEST_CASE("fixture gdn_tiny_b (grouped value heads, neg eigval, tied) matches fla") { check_fixture("gdn_tiny_b"); }
