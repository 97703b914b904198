// models/gdn-pycode-22m through the public API: a real trained checkpoint in BF16 (with F32
// A_log and dt_bias) loads, describes itself as its config.json says, and generates
// deterministically. Nothing here depends on its tokenizer: prompts are token ids.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"

namespace {

constexpr int32_t kVocab = 8192;

std::string pycode_dir() { return test::models_dir() + "/gdn-pycode-22m"; }

// Loaded once for the whole file (22M parameters): the model is immutable and shared.
specla_model *pycode() {
    static std::unique_ptr<test::ModelHandle> model;
    if (!model) model = std::make_unique<test::ModelHandle>(pycode_dir());
    return model->m;
}

// Arbitrary in-vocabulary ids; the model continues them like any other context.
const std::vector<int32_t> kPrompt = {0, 318, 1207, 7, 42, 2650, 11, 902, 15, 4100, 3, 77};

test::GenerateParams greedy(int32_t n) {
    test::GenerateParams gp;
    gp.max_tokens = n;
    gp.stop_at_eos = false;
    return gp;
}

test::GenerateParams sampled(int32_t n, uint64_t seed) {
    test::GenerateParams gp = greedy(n);
    gp.sampling.temperature = 1.0f;
    gp.sampling.top_k = 50;
    gp.sampling.top_p = 0.95f;
    gp.sampling.seed = seed;
    return gp;
}

}  // namespace

TEST_CASE("gdn-pycode-22m: info matches its config") {
    specla_model_info info = test::info_struct<specla_model_info>();
    REQUIRE(specla_model_get_info(pycode(), &info) == SPECLA_OK);
    CHECK(info.vocab_size == kVocab);
    CHECK(info.hidden_size == 384);
    CHECK(info.num_layers == 8);
    CHECK(info.num_heads == 2);
    CHECK(info.num_v_heads == 2);
    CHECK(info.head_k_dim == 128);
    CHECK(info.head_v_dim == 256);
    CHECK(info.conv_size == 4);
    CHECK(info.intermediate_size == 1024);
    CHECK(info.bos_token_id == 0);
    CHECK(info.eos_token_id == 0);
    CHECK(info.num_parameters == 22073760);
    CHECK(info.backend == SPECLA_BACKEND_CPU);
    // Recurrent state [HV, K, V] plus conv cache [W-1, 2*H*K + HV*V] per layer, fp32.
    const size_t per_layer = size_t(2) * 128 * 256 + size_t(3) * (2 * 2 * 128 + 2 * 256);
    CHECK(info.state_bytes == 8 * per_layer * sizeof(float));

    specla_memory_stats ms = test::info_struct<specla_memory_stats>();
    REQUIRE(specla_model_memory_stats(pycode(), &ms) == SPECLA_OK);
    CHECK(ms.weight_bytes > 0);
    // BF16 matrices stay BF16: at least 2 bytes per parameter, well under 4.
    CHECK(ms.weight_bytes >= size_t(2) * 22000000);
    CHECK(ms.weight_bytes < size_t(4) * 22073760);
    CHECK(ms.arena_reserved_bytes == 0);  // CPU backend: no device arena
}

TEST_CASE("gdn-pycode-22m: greedy generation is deterministic") {
    const test::GenerateParams gp = greedy(32);
    test::SessionHandle a(pycode());
    test::SessionHandle b(pycode());
    const auto first = a.generate(kPrompt, gp);
    REQUIRE(first.size() == 32);
    for (int32_t t : first) CHECK((t >= 0 && t < kVocab));
    CHECK(b.generate(kPrompt, gp) == first);

    int64_t n_past = 0;
    REQUIRE(specla_session_n_past(a.s, &n_past) == SPECLA_OK);
    CHECK(n_past == int64_t(kPrompt.size() + first.size()));

    REQUIRE(specla_session_reset(a.s) == SPECLA_OK);
    REQUIRE(specla_session_n_past(a.s, &n_past) == SPECLA_OK);
    CHECK(n_past == 0);
    CHECK(a.generate(kPrompt, gp) == first);

    // Greedy generation is the argmax of the logits, step by step.
    test::SessionHandle c(pycode());
    auto row = c.eval(kPrompt, SPECLA_LOGITS_LAST, kVocab);
    for (size_t i = 0; i < 8; ++i) {
        const int32_t next = test::argmax(row.data(), row.size());
        CHECK(next == first[i]);
        row = c.eval({next}, SPECLA_LOGITS_LAST, kVocab);
    }

    // Continuing with an empty prompt picks up where generation stopped.
    const auto more = a.generate({}, greedy(4));
    test::SessionHandle d(pycode());
    const auto longer = d.generate(kPrompt, greedy(36));
    CHECK(std::vector<int32_t>(longer.begin() + 32, longer.end()) == more);
}

TEST_CASE("gdn-pycode-22m: sampling is reproducible per seed") {
    test::SessionHandle s(pycode());
    const auto one = s.generate(kPrompt, sampled(32, 7));
    REQUIRE(specla_session_reset(s.s) == SPECLA_OK);
    CHECK(s.generate(kPrompt, sampled(32, 7)) == one);

    test::SessionHandle other(pycode());
    CHECK(other.generate(kPrompt, sampled(32, 7)) == one);

    REQUIRE(specla_session_reset(s.s) == SPECLA_OK);
    const auto two = s.generate(kPrompt, sampled(32, 8));
    CHECK(two != one);
    REQUIRE(specla_session_reset(s.s) == SPECLA_OK);
    CHECK(s.generate(kPrompt, sampled(32, 1234567)) != one);

    // top_k 1 at any temperature is greedy.
    test::GenerateParams k1 = sampled(16, 99);
    k1.sampling.top_k = 1;
    test::SessionHandle g(pycode());
    const auto want = g.generate(kPrompt, greedy(16));
    REQUIRE(specla_session_reset(s.s) == SPECLA_OK);
    CHECK(s.generate(kPrompt, k1) == want);
}

TEST_CASE("gdn-pycode-22m: recurrent state can be read") {
    specla_model_info info = test::info_struct<specla_model_info>();
    REQUIRE(specla_model_get_info(pycode(), &info) == SPECLA_OK);
    const size_t floats = size_t(info.num_v_heads) * info.head_k_dim * info.head_v_dim;
    test::SessionHandle s(pycode());

    // A fresh session's state is zero.
    for (int32_t layer = 0; layer < info.num_layers; ++layer) {
        const auto st = s.state(layer, floats);
        double sum = 0;
        for (float x : st) sum += std::fabs(x);
        CHECK(sum == 0);
    }
    s.eval(kPrompt, SPECLA_LOGITS_NONE, kVocab);
    std::vector<std::vector<float>> after;
    for (int32_t layer = 0; layer < info.num_layers; ++layer) {
        const auto st = s.state(layer, floats);
        bool finite = true;
        double sum = 0;
        for (float x : st) finite &= std::isfinite(x), sum += std::fabs(x);
        CHECK(finite);
        CHECK(sum > 0);
        after.push_back(st);
    }
    CHECK(after[0] != after[1]);

    // Same context, same state, whether fed in one block or after a generation.
    test::SessionHandle t(pycode());
    const auto gen = t.generate(kPrompt, greedy(4));
    test::SessionHandle u(pycode());
    std::vector<int32_t> all = kPrompt;
    all.insert(all.end(), gen.begin(), gen.end());
    u.eval(all, SPECLA_LOGITS_NONE, kVocab);
    for (int32_t layer = 0; layer < info.num_layers; ++layer) {
        const auto a = t.state(layer, floats);  // applies the pending last token first
        const auto b = u.state(layer, floats);
        CHECK(test::max_rel_error(a.data(), b.data(), floats) <= 1e-5);
    }

    std::vector<float> small(floats - 1);
    CHECK(specla_session_get_state(s.s, 0, small.data(), small.size()) == SPECLA_ERR_CAPACITY);
    CHECK(specla_session_get_state(s.s, info.num_layers, after[0].data(), floats) == SPECLA_ERR_INVALID_ARGUMENT);
}
