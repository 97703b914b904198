// Greedy decoding of gdn-pycode-22m on the GPU against the CPU engine, over every eval prompt.
// The GPU holds bf16 weights (the checkpoint is BF16, so they are the same numbers) but rounds
// activations of multi-token blocks to bf16, so logits differ slightly; a greedy token can only
// be required to agree where the CPU's top-2 logit margin exceeds that uncertainty. Each prompt
// is decoded for kSteps steps on both; a differing token is a failure when the CPU's margin at
// that step is at least kMargin (absolute logit units; logits here reach about 22, and blocks
// differ by up to ~1e-2 of that), and otherwise ends the comparison of that prompt (the two
// trajectories may then legitimately part). The GPU tokens come from its own device-side argmax
// (decode_and_sample), so the comparison also covers that path.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/model.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

#ifdef SPECLA_WITH_CUDA
#include "test_cuda_common.h"

using namespace specla;

namespace {
constexpr float kMargin = 0.5f;
constexpr int kSteps = 32;

float top2_margin(const float *x, int32_t n, int32_t &best) {
    best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    float second = -INFINITY;
    for (int32_t i = 0; i < n; ++i)
        if (i != best) second = std::max(second, x[i]);
    return x[best] - second;
}
}  // namespace

TEST_CASE("cuda backend: greedy tokens equal the CPU engine on gdn-pycode-22m eval prompts where the margin allows") {
    CUDA_TEST_REQUIRE_GPU();
    const std::string dir = std::string(SPECLA_MODELS_DIR) + "/gdn-pycode-22m";
    ModelOptions cpu_opts, gpu_opts;
    gpu_opts.backend = SPECLA_BACKEND_CUDA;
    auto cpu = Model::load(dir, cpu_opts);
    auto gpu = Model::load(dir, gpu_opts);
    auto tok = Tokenizer::load(dir);
    std::ifstream in(dir + "/eval_prompts.json");
    std::stringstream ss;
    ss << in.rdbuf();
    const auto prompts = nlohmann::json::parse(ss.str()).at("prompts");
    const int32_t vocab = cpu->config().vocab_size;
    SessionLimits lim;
    int compared_steps = 0, full_prompts = 0, mismatches = 0;
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (const auto &p : prompts) {
        const auto ids = tok->encode(p.get<std::string>(), false, true);
        Session c(cpu, lim), g(gpu, lim);
        c.eval(ids.data(), ids.size() - 1, LogitsRows::None, nullptr);
        g.eval(ids.data(), ids.size() - 1, LogitsRows::None, nullptr);
        int32_t cur = ids.back();
        int steps = 0;
        for (; steps < kSteps; ++steps) {
            c.eval(&cur, 1, LogitsRows::Last, logits.data());
            int32_t want;
            const float margin = top2_margin(logits.data(), vocab, want);
            const int32_t got = g.decode_and_sample(cur, SamplingConfig{}, 0.5);
            if (got != want) {
                if (margin < kMargin) break;  // too close to call: the trajectories may part here
                ++mismatches;
                MESSAGE("prompt ", &p - &prompts[0], " step ", steps, ": GPU ", got, " CPU ", want, " margin ", margin);
                break;
            }
            cur = want;
        }
        compared_steps += steps;
        full_prompts += steps == kSteps;
    }
    std::printf("[cuda pycode] %d steps compared over %zu prompts, %d prompts compared for all %d steps, %d mismatches\n",
                compared_steps, prompts.size(), full_prompts, kSteps, mismatches);
    CHECK(mismatches == 0);
    // Near-ties are rare (about 1% of steps have a margin below 0.2 on the CPU), so most prompts
    // must be compared for all their steps.
    CHECK(full_prompts >= int(prompts.size()) * 3 / 4);
}
#else
TEST_CASE("cuda backend: pycode greedy vs CPU skipped") { MESSAGE("CUDA tests skipped: this build has no CUDA support"); }
#endif
