// The generation state machine (generate/generation.h) on the CPU engine: a step that throws
// finishes the generation with FinishReason::Error and leaves it refusing further steps; the
// drafter's generation scope ends with it; the prompt's interruptible blocks rest on the CPU
// backend giving bitwise the same logits and state for any block size.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "engine/model.h"
#include "generate/generation.h"
#include "session/session.h"
#include "support/fixture.h"
#include "support/fixture_model.h"
#include "util/error.h"

using namespace specla;

namespace {

// Proposes nothing for `calls_before_failing` passes, then throws.
struct FailingDrafter : Drafter {
    int calls_before_failing = 2;
    int begun = 0, ended = 0;
    void propose(const std::vector<int32_t> &, const DraftBudget &, DraftTree &out) override {
        out.clear();
        if (calls_before_failing-- == 0) fail(SPECLA_ERR_DEVICE, "the drafter's device went away");
    }
    void begin_generation(const SamplingConfig &, Rng *) override { ++begun; }
    void end_generation() override { ++ended; }
};

}  // namespace

TEST_CASE("generation: a failing step finishes it with Error and later steps are refused") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    Session s(model, SessionLimits());
    FailingDrafter d;
    const std::vector<int32_t> prompt = {1, 2, 3};
    SpecOptions opts;
    opts.gen.max_tokens = 10;
    {
        Generation g(s, &d, prompt.data(), prompt.size(), opts, TextOptions{});
        GenerationStep step;
        g.next(step);
        g.next(step);
        CHECK(step.tokens.size() == 1);
        CHECK(!g.finished());
        CHECK_THROWS_WITH_AS(g.next(step), "the drafter's device went away", Error);
        CHECK(g.finished());
        CHECK(g.reason() == FinishReason::Error);
        CHECK(d.begun == 1);
        CHECK(d.ended == 1);  // at once, not only when the object goes
        try {
            g.next(step);
            FAIL("a step after the end ran");
        } catch (const Error &e) {
            CHECK(e.status() == SPECLA_ERR_STATE);
            CHECK(std::string(e.what()).find("finished") != std::string::npos);
        }
        CHECK(g.n_generated() == 2);
    }
    CHECK(d.ended == 1);
    // The session holds the prompt and the two tokens, the last pending: it carries on.
    CHECK(s.n_past() == 5);
    CHECK(s.has_pending());
    const std::vector<int32_t> more = generate(s, nullptr, 0, opts.gen);
    CHECK(more.size() == 10);
}

TEST_CASE("generation: an abort request before the first step stops it before the prompt") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    Session s(model, SessionLimits());
    const std::vector<int32_t> prompt(100, 7);
    std::atomic<bool> abort{true};
    Generation g(s, nullptr, prompt.data(), prompt.size(), SpecOptions{}, TextOptions{}, &abort);
    GenerationStep step;
    g.next(step);
    CHECK(g.reason() == FinishReason::Aborted);
    CHECK(step.tokens.empty());
    CHECK(s.n_past() == 0);
}

TEST_CASE("generation: the CPU's prompt blocks are short, and any block size gives bitwise the same logits and state") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    SessionLimits lim;
    Session ref(model, lim);
    CHECK(prefill_block_tokens(ref) == 8);
    lim.max_batch_tokens = 5;
    CHECK(prefill_block_tokens(Session(model, lim)) == 5);  // never above the session's limit

    std::mt19937 rng(11);
    std::vector<int32_t> prompt(301);
    for (int32_t &t : prompt) t = int32_t(rng() % uint32_t(model->config().vocab_size));
    const size_t V = size_t(model->config().vocab_size);
    const size_t S = size_t(model->config().recurrent_state_floats_per_layer());
    auto run = [&](int32_t block) {
        SessionLimits l;
        l.max_batch_tokens = block;
        Session s(model, l);
        std::vector<float> out(V + S * size_t(model->config().num_layers));
        s.eval(prompt.data(), prompt.size(), LogitsRows::Last, out.data());
        for (int32_t layer = 0; layer < model->config().num_layers; ++layer)
            s.read_state(layer, out.data() + V + S * size_t(layer));
        return out;
    };
    const std::vector<float> want = run(512);
    for (int32_t block : {1, 7, 8, 16, 64}) {
        CAPTURE(block);
        const std::vector<float> got = run(block);
        CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
}
