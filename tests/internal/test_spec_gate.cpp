// The speculation gate (spec/spec_gate.h): its decisions from given timings, then a generation
// whose drafter is made slow: it backs off to plain steps, probes again, and its greedy output is
// plain greedy's token for token.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "engine/model.h"
#include "generate/generate.h"
#include "generate/generation.h"
#include "session/session.h"
#include "spec/prompt_lookup.h"
#include "spec/spec_gate.h"
#include "support/fixture_model.h"

using namespace specla;

namespace {

SpecGate::Config small_config() {
    SpecGate::Config c;
    c.probe_passes = 3;
    c.plain_probe_steps = 2;
    c.min_backoff_tokens = 4;
    c.max_backoff_tokens = 16;
    c.judge_passes = 6;
    c.hysteresis = 0.1;
    c.quick_loss = 4.0;  // the cases below lose by 2x at most: full probes (quick losses: their own case)
    c.quick_passes = 2;
    return c;
}

// Runs the gate for `steps` steps where a speculative pass takes spec_seconds and emits
// spec_tokens, and a plain step takes plain_seconds; returns how many steps were plain.
int run(SpecGate &gate, int steps, double spec_seconds, int64_t spec_tokens, double plain_seconds) {
    int plain = 0;
    for (int i = 0; i < steps; ++i) {
        if (gate.speculate()) {
            gate.record_speculative(spec_seconds, spec_tokens);
        } else {
            gate.record_plain(plain_seconds);
            ++plain;
        }
    }
    return plain;
}

}  // namespace

TEST_CASE("speculation gate: off, it always speculates") {
    for (double gain : {0.0, -1.0}) {
        SpecGate gate(gain, small_config());
        CHECK(run(gate, 100, 1.0, 1, 0.001) == 0);
    }
}

TEST_CASE("speculation gate: speculation that pays is kept, after one plain probe") {
    SpecGate gate(1.0, small_config());
    // 3 tokens per pass at 1.5 plain steps per pass: 0.5 plain steps per token.
    // The first pass and the first plain step are warm-up and dropped: 4 passes, then 3 plain
    // steps (2 measured), then speculation for good.
    int plain = 0;
    for (int i = 0; i < 4; ++i) {
        REQUIRE(gate.speculate());
        gate.record_speculative(0.015, 3);
    }
    for (int i = 0; i < 3; ++i) {
        REQUIRE_FALSE(gate.speculate());
        gate.record_plain(0.010);
        ++plain;
    }
    CHECK(gate.speculate());
    plain += run(gate, 1000, 0.015, 3, 0.010);
    CHECK(plain == 3);
    CHECK(gate.speculative_seconds_per_token() > 0);
    CHECK(gate.plain_seconds_per_token() == doctest::Approx(0.010));
}

TEST_CASE("speculation gate: speculation slower than plain decoding backs off, doubling, and re-probes") {
    SpecGate gate(1.0, small_config());
    // 2 tokens per pass at 4 plain steps per pass: twice as slow as plain.
    for (int i = 0; i < 4; ++i) gate.record_speculative(0.040, 2);
    for (int i = 0; i < 3; ++i) gate.record_plain(0.010);  // the plain probe
    // Lost: a back-off of 4 plain tokens, then 4 probe passes (the first, where a drafter catches
    // up on the back-off's tokens, dropped), then 8, 16, 16, ... (the cap).
    for (int64_t expected : {4, 8, 16, 16}) {
        int plain = 0;
        while (!gate.speculate()) {
            gate.record_plain(0.010);
            ++plain;
        }
        CHECK(plain == expected);
        for (int i = 0; i < 4; ++i) {
            REQUIRE(gate.speculate());
            gate.record_speculative(0.040, 2);
        }
    }
    // Over a long run, probes are a small share of the steps.
    const int steps = 2000;
    CHECK(run(gate, steps, 0.040, 2, 0.010) >= steps * 3 / 4);
}

TEST_CASE("speculation gate: a probe that wins after back-offs restores speculation and the shortest back-off") {
    SpecGate gate(1.0, small_config());
    for (int i = 0; i < 4; ++i) gate.record_speculative(0.040, 2);
    for (int i = 0; i < 3; ++i) gate.record_plain(0.010);
    run(gate, 40, 0.040, 2, 0.010);  // several lost probes: the back-off has grown
    CHECK(gate.backoff_tokens() > 4);
    while (!gate.speculate()) gate.record_plain(0.010);
    // The text turned repetitive: 4 tokens per pass at 2 plain steps.
    for (int i = 0; i < 4; ++i) gate.record_speculative(0.020, 4);
    CHECK(gate.speculate());
    CHECK(gate.backoff_tokens() == 4);
    CHECK(run(gate, 200, 0.020, 4, 0.010) == 0);
    // Kept, it is judged over longer windows with a margin: 5 % slower is kept, 2x slower is
    // dropped within one window (6 passes), then backs off for 4 plain tokens.
    CHECK(run(gate, 60, 0.0105, 1, 0.010) == 0);
    CHECK(run(gate, 10, 0.020, 1, 0.010) == 4);
}

TEST_CASE("speculation gate: a plain rate known from before spares the plain probe") {
    SpecGate gate(1.0, small_config());
    gate.assume_plain_rate(0.010);
    for (int i = 0; i < 4; ++i) {
        REQUIRE(gate.speculate());
        gate.record_speculative(0.040, 2);
    }
    // Lost at once against the assumed rate: the back-off, measured afresh.
    int plain = 0;
    while (!gate.speculate()) {
        gate.record_plain(0.020);
        ++plain;
    }
    CHECK(plain == 4);
    CHECK(gate.plain_seconds_per_token() == doctest::Approx(0.020));
    // Nonsense rates are ignored.
    SpecGate other(1.0, small_config());
    other.assume_plain_rate(-1.0);
    other.assume_plain_rate(0.0);
    for (int i = 0; i < 4; ++i) other.record_speculative(0.040, 2);
    CHECK_FALSE(other.speculate());  // the plain probe
    CHECK(other.plain_seconds_per_token() == 0);
}

TEST_CASE("speculation gate: a probe losing many times over is decided after its quick passes") {
    SpecGate gate(1.0, small_config());
    gate.assume_plain_rate(0.010);
    // 10x slower than plain: a warm-up pass and 2 counted, not the 3 of a full probe.
    int passes = 0;
    while (gate.speculate()) {
        gate.record_speculative(0.200, 2);
        ++passes;
    }
    CHECK(passes == 3);
    // 3x slower (below quick_loss 4): the full probe of 3 counted passes.
    while (!gate.speculate()) gate.record_plain(0.010);
    passes = 0;
    while (gate.speculate()) {
        gate.record_speculative(0.060, 2);
        ++passes;
    }
    CHECK(passes == 4);
    // Without a plain rate there is nothing to lose against: the full probe, then the plain probe.
    SpecGate fresh(1.0, small_config());
    passes = 0;
    while (fresh.speculate()) {
        fresh.record_speculative(0.200, 2);
        ++passes;
    }
    CHECK(passes == 4);
}

TEST_CASE("speculation gate: a back-off handed on from an earlier generation continues") {
    SpecGate first(1.0, small_config());
    first.assume_plain_rate(0.010);
    for (int i = 0; i < 4; ++i) first.record_speculative(0.040, 2);
    REQUIRE_FALSE(first.speculate());
    for (int i = 0; i < 3; ++i) first.record_plain(0.010);  // the generation ends here
    CHECK(first.plain_tokens_left() == 1);
    CHECK(first.backoff_tokens() == 8);

    SpecGate next(1.0, small_config());
    next.assume_plain_rate(first.plain_seconds_per_token());
    next.resume_backoff(first.plain_tokens_left(), first.backoff_tokens());
    CHECK_FALSE(next.speculate());
    next.record_plain(0.010);
    CHECK(next.speculate());  // the back-off is spent: a probe, which loses, then 8 plain tokens
    for (int i = 0; i < 4; ++i) next.record_speculative(0.040, 2);
    int plain = 0;
    while (!next.speculate()) {
        next.record_plain(0.010);
        ++plain;
    }
    CHECK(plain == 8);
    CHECK(next.plain_tokens_left() == 0);  // probing: nothing to hand on but the back-off
    CHECK(next.backoff_tokens() == 16);

    // Without a plain rate to judge by, a handed-on back-off is not taken; out-of-range values
    // are clamped or ignored.
    SpecGate unmeasured(1.0, small_config());
    unmeasured.resume_backoff(10, 8);
    CHECK(unmeasured.speculate());
    SpecGate clamped(1.0, small_config());
    clamped.assume_plain_rate(0.010);
    clamped.resume_backoff(-3, 1 << 20);
    CHECK(clamped.speculate());
    CHECK(clamped.backoff_tokens() == 16);
}

TEST_CASE("speculation gate: a minimum gain above 1 needs speculation to win by that much") {
    // Speculation 1.25x plain decoding: kept at gain 1.2, dropped at gain 1.3.
    for (auto [gain, kept] : {std::pair{1.2, true}, std::pair{1.3, false}}) {
        SpecGate gate(gain, small_config());
        for (int i = 0; i < 4; ++i) gate.record_speculative(0.016, 2);
        for (int i = 0; i < 3; ++i) gate.record_plain(0.010);
        CHECK(gate.speculate() == kept);
    }
}

namespace {

// Prompt lookup made slow: each proposal sleeps, as a drafter that costs many steps would.
struct SlowLookup : PromptLookupDrafter {
    int proposals = 0;
    void propose(const std::vector<int32_t> &context, const DraftBudget &budget, DraftTree &out) override {
        ++proposals;
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        PromptLookupDrafter::propose(context, budget, out);
    }
};

}  // namespace

TEST_CASE("speculation gate: a slow drafter's generation takes plain steps, and its greedy output is plain greedy's") {
    auto model = test::load_fixture_model("gdn_tiny_a");
    const std::vector<int32_t> prompt = {5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7};
    GenerateOptions plain_opts;
    plain_opts.max_tokens = 300;
    std::vector<int32_t> reference;
    {
        Session s(model, SessionLimits());
        reference = generate(s, prompt.data(), prompt.size(), plain_opts);
    }
    SpecOptions opts;
    opts.gen = plain_opts;
    opts.budget.max_nodes = 4;
    opts.speculation_min_gain = 1.0;
    Session s(model, SessionLimits());
    SlowLookup d;
    SpecStats stats;
    const std::vector<int32_t> got = generate_speculative(s, d, prompt.data(), prompt.size(), opts, stats);
    CHECK(got == reference);
    // A tiny model's step costs microseconds against the drafter's 3 ms: the gate backs off after
    // its first probe (a warm-up pass and 8 measured, then 5 plain probe steps) and stays off but
    // for quick probes of 3 passes (the first dropped; speculation loses many times over) between
    // back-offs of 32, 64, 128, ... plain tokens. At most 5 tokens a pass, 300 tokens hold at most
    // 9 + 3 x 3 passes and so at least 300 - 18 x 5 plain steps.
    CHECK(stats.plain_steps >= 210);
    CHECK(stats.steps <= 18);
    CHECK(stats.generated == int64_t(got.size()));
    CHECK(d.proposals <= stats.steps);
    CHECK(d.proposals >= stats.steps - 1);  // the last pass may have no room for a draft

    // A sampled generation is not gated (its tokens would depend on the timings): every step a
    // pass, and a seeded run repeats.
    {
        SpecOptions sampled = opts;
        sampled.gen.max_tokens = 60;
        sampled.gen.sampling.temperature = 1.f;
        sampled.gen.seed = 99;
        std::vector<int32_t> runs[2];
        for (auto &run : runs) {
            Session fresh(model, SessionLimits());
            SpecStats st;
            run = generate_speculative(fresh, d, prompt.data(), prompt.size(), sampled, st);
            CHECK(st.plain_steps == 0);
        }
        CHECK(runs[0] == runs[1]);
    }

    // The session hands the back-off on: the next generation with this drafter continues it
    // (plain steps, or at most one quick probe where the first ended probing), not a full probe.
    const Session::SpeculationRecord &record = s.speculation_record(false);
    CHECK(record.drafter == &d);
    CHECK(record.backoff_tokens >= 256);
    CHECK(record.plain_seconds_per_token > 0);
    s.reset();
    opts.gen.max_tokens = 40;
    SpecStats again;
    const std::vector<int32_t> got2 = generate_speculative(s, d, prompt.data(), prompt.size(), opts, again);
    CHECK(got2 == std::vector<int32_t>(reference.begin(), reference.begin() + 40));
    CHECK(again.steps <= 3);
    CHECK(again.plain_steps >= 40 - 3 * 5);
}
