// Log-probabilities through the pull API (specla_generate_params.logprobs, top_logprobs;
// specla_generation_step.logprobs, top_ids, top_logprobs, n_top) on gdn-pycode-22m: the values
// against specla_session_eval's logits of the same tokens, plain and speculative (prompt lookup
// accepts several tokens per pass on code), greedy and sampled; the tokens are those of a run
// without them; the calls that run to completion and out-of-range counts are refused.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"
#include "support/params.h"

namespace {

const char *kPrompt =
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return";

struct Run {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs, top_logprobs;
    std::vector<int32_t> top_ids;
    int64_t accepted = 0;
};

Run pull(specla_model *m, bool speculative, test::SpecParams p, const std::vector<int32_t> &prompt) {
    test::SessionHandle s(m);
    test::DrafterHandle d(m);
    specla_generation *gen = nullptr;
    specla_status st = specla_generation_begin(s.s, speculative ? d.d : nullptr, prompt.data(), prompt.size(), p.get(), &gen);
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    Run r;
    specla_generation_step step = test::info_struct<specla_generation_step>();
    do {
        REQUIRE(specla_generation_next(gen, &step) == SPECLA_OK);
        r.tokens.insert(r.tokens.end(), step.tokens, step.tokens + step.n_tokens);
        if (!p.generate.logprobs) {
            CHECK(step.logprobs == nullptr);
            CHECK(step.n_top == 0);
            continue;
        }
        CHECK(step.n_top == p.generate.top_logprobs);
        if (step.n_tokens == 0) continue;
        REQUIRE(step.logprobs != nullptr);
        r.logprobs.insert(r.logprobs.end(), step.logprobs, step.logprobs + step.n_tokens);
        if (step.n_top > 0) {
            REQUIRE(step.top_ids != nullptr);
            REQUIRE(step.top_logprobs != nullptr);
            const size_t n = step.n_tokens * size_t(step.n_top);
            r.top_ids.insert(r.top_ids.end(), step.top_ids, step.top_ids + n);
            r.top_logprobs.insert(r.top_logprobs.end(), step.top_logprobs, step.top_logprobs + n);
        }
    } while (step.finish_reason == SPECLA_FINISH_NONE);
    specla_spec_stats stats = test::info_struct<specla_spec_stats>();
    REQUIRE(specla_generation_stats(gen, &stats) == SPECLA_OK);
    r.accepted = stats.accepted;
    specla_generation_free(gen);
    return r;
}

// Every combination of plain/speculative and greedy/sampled on `m`: the tokens of a run without
// logprobs, and values within `tol` of the log-softmax of the same backend's evaluation of the
// tokens (the GPU's batched evaluation rounds differently from its decoding steps).
void check_logprobs(specla_model *m, double tol) {
    specla_model_info info = test::info_struct<specla_model_info>();
    REQUIRE(specla_model_get_info(m, &info) == SPECLA_OK);
    const int32_t V = info.vocab_size;
    const std::vector<int32_t> prompt = test::tokenize(m, kPrompt);
    constexpr int32_t kTop = 4;
    for (const bool sampled : {false, true}) {
        for (const bool speculative : {false, true}) {
            CAPTURE(sampled);
            CAPTURE(speculative);
            test::SpecParams off;
            off.generate.max_tokens = 40;
            off.generate.stop_at_eos = false;
            off.generate.sampling.seed = 77;
            if (sampled) off.generate.sampling.temperature = 0.7f;
            test::SpecParams on = off;
            on.generate.logprobs = true;
            on.generate.top_logprobs = kTop;
            const Run a = pull(m, speculative, off, prompt);
            const Run b = pull(m, speculative, on, prompt);
            CHECK(b.tokens == a.tokens);
            if (speculative && !sampled) CHECK(b.accepted > 0);
            REQUIRE(b.logprobs.size() == b.tokens.size());
            REQUIRE(b.top_ids.size() == b.tokens.size() * kTop);

            // The replay: the logits before each generated token.
            std::vector<int32_t> all = prompt;
            all.insert(all.end(), b.tokens.begin(), b.tokens.end());
            test::SessionHandle ref(m);
            std::vector<float> logits(all.size() * size_t(V));
            REQUIRE(specla_session_eval(ref.s, all.data(), all.size(), SPECLA_LOGITS_ALL, logits.data(), logits.size()) ==
                    SPECLA_OK);
            for (size_t i = 0; i < b.tokens.size(); ++i) {
                const float *row = logits.data() + (prompt.size() - 1 + i) * size_t(V);
                double mx = -INFINITY, sum = 0;
                for (int32_t t = 0; t < V; ++t) mx = std::max(mx, double(row[t]));
                for (int32_t t = 0; t < V; ++t) sum += std::exp(double(row[t]) - mx);
                const double lse = mx + std::log(sum);
                CAPTURE(i);
                CHECK(std::abs(b.logprobs[i] - (row[b.tokens[i]] - lse)) < tol);
                for (int32_t k = 0; k < kTop; ++k) {
                    const int32_t id = b.top_ids[i * kTop + size_t(k)];
                    REQUIRE(id >= 0);
                    REQUIRE(id < V);
                    CHECK(std::abs(b.top_logprobs[i * kTop + size_t(k)] - (row[id] - lse)) < tol);
                }
                if (!sampled) CHECK(b.top_ids[i * kTop] == b.tokens[i]);
            }
        }
    }
}

}  // namespace

TEST_CASE("logprobs: the pull API reports the model's log-probabilities, plain and speculative, and keeps the tokens") {
    test::ModelHandle model(test::models_dir() + "/gdn-pycode-22m");
    check_logprobs(model.m, 1e-3);
}

TEST_CASE("cuda: logprobs through the pull API, plain and speculative") {
    specla_model_params p = specla_model_default_params();
    p.backend = SPECLA_BACKEND_CUDA;
    specla_model *m = nullptr;
    const specla_status st = specla_model_load((test::models_dir() + "/gdn-pycode-22m").c_str(), &p, &m);
    if (st == SPECLA_ERR_BACKEND_UNAVAILABLE) {
        MESSAGE("CUDA logprobs test skipped: " << std::string(specla_last_error()));
        return;
    }
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    check_logprobs(m, 2e-2);
    specla_model_free(m);
}

TEST_CASE("logprobs: refused where they cannot be reported or are out of range") {
    test::ModelHandle model(test::models_dir() + "/gdn-pycode-22m");
    test::SessionHandle s(model.m);
    test::DrafterHandle d(model.m);
    const std::vector<int32_t> prompt = test::tokenize(model.m, "def f(");
    test::SpecParams p;
    p.generate.max_tokens = 4;
    p.generate.logprobs = true;
    size_t n = 0;
    std::vector<int32_t> out(4);
    CHECK(specla_generate(s.s, prompt.data(), prompt.size(), p.generate.get(), out.data(), out.size(), &n) ==
          SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("pull API") != std::string::npos);
    CHECK(specla_generate_speculative(s.s, d.d, prompt.data(), prompt.size(), p.get(), out.data(), out.size(), &n,
                                      nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
    int64_t past = -1;
    REQUIRE(specla_session_n_past(s.s, &past) == SPECLA_OK);
    CHECK(past == 0);

    specla_generation *gen = nullptr;
    p.generate.top_logprobs = SPECLA_LIMIT_TOP_LOGPROBS + 1;
    CHECK(specla_generation_begin(s.s, nullptr, prompt.data(), prompt.size(), p.get(), &gen) ==
          SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("top_logprobs") != std::string::npos);
    CHECK(gen == nullptr);
    p.generate.logprobs = false;
    p.generate.top_logprobs = 2;
    CHECK(specla_generation_begin(s.s, nullptr, prompt.data(), prompt.size(), p.get(), &gen) ==
          SPECLA_ERR_INVALID_ARGUMENT);
    // The session is usable afterwards.
    p.generate.top_logprobs = 0;
    CHECK(specla_generate(s.s, prompt.data(), prompt.size(), p.generate.get(), out.data(), out.size(), &n) == SPECLA_OK);
    CHECK(n == 4);
}
