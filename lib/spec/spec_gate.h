// Whether speculation pays, decided from measurement while a generation runs.
//
// Speculative decoding is a bet: a pass costs a draft plus a verification of n nodes and emits
// the accepted path plus one token. Where the drafter is slow for the backend (a learned drafter
// launched level by level on a GPU) or the text does not match the drafter (prompt lookup on text
// that does not repeat itself), a pass emits fewer tokens per second than plain decoding, and
// nothing in the tree builder sees that: its cost model compares trees with one another, not with
// not speculating. The gate compares the two rates the generation measures, seconds per emitted
// token of its speculative passes and of plain decoding steps, and has the generation take plain
// steps while speculation is slower, probing it again after a back-off that doubles each time
// the probe loses (so a generation where speculation never pays spends a vanishing share of its
// tokens on probes) and resets when it wins.
//
// Greedy output is unchanged by the gate (a plain step emits the token a pass would emit first).
// Sampled output would stay distributed as the target's, but which steps speculate depends on
// timings, and a seeded sampled generation must repeat token for token: the generation gates
// greedy generations only (generate/generation.cpp).
#pragma once

#include <cstdint>

namespace specla {

class SpecGate {
public:
    struct Config {
        int32_t probe_passes = 8;          // speculative passes measured before a decision
        // While speculation is kept it is judged again over windows of this many passes, and
        // dropped only when slower by more than `hysteresis` (0.1: 10 %): acceptance swings from
        // window to window with the text, and a back-off on one bad window would give up the
        // long runs where speculation gains most (prompt lookup on the CPU, 8-pass windows: 1.65x
        // plain decoding without the gate, 1.19x with it, bench/journal/2026-12-03-speculation-gate.md).
        int32_t judge_passes = 32;
        double hysteresis = 0.1;
        // A probe losing by more than this factor is decided after `quick_passes` counted passes
        // rather than probe_passes: a drafter many times slower than plain decoding (a learned
        // drafter launched level by level on a GPU, 0.15x plain) would otherwise spend each
        // probe's passes at that rate.
        double quick_loss = 2.0;
        int32_t quick_passes = 2;
        int32_t plain_probe_steps = 4;     // plain steps measured when no plain rate is known
        int64_t min_backoff_tokens = 32;   // plain tokens after the first lost probe
        int64_t max_backoff_tokens = 2048; // the doubling stops here
        // The first measurement of each kind in a generation is dropped: it carries one-time
        // costs (a captured graph's first launch, a drafter's catch-up on the prompt).
        bool skip_first = true;
    };

    // Speculation is kept while plain seconds per token >= min_gain x speculative seconds per
    // token. min_gain <= 0 (or not finite): the gate is off, speculate() is always true.
    explicit SpecGate(double min_gain) : SpecGate(min_gain, Config{}) {}
    SpecGate(double min_gain, const Config &config);

    // Start from a plain rate measured before (an earlier generation's, seconds per token > 0):
    // the first decision needs no plain probe. Call before recording anything.
    void assume_plain_rate(double seconds_per_token);

    // Continue a back-off an earlier generation left unfinished: `plain_tokens_left` plain
    // tokens before the next probe, `next_backoff` the back-off after that probe if it loses
    // (values <= 0 are ignored). Call after assume_plain_rate, before recording anything.
    void resume_backoff(int64_t plain_tokens_left, int64_t next_backoff);
    // What to hand on to a later generation: plain tokens left of the current back-off (0 unless
    // speculation lost and plain steps are being taken) and the next back-off.
    int64_t plain_tokens_left() const { return mode_ == Mode::Plain ? plain_left_ : 0; }

    // What the generation's next step should be: a speculative pass (true) or a plain step.
    bool speculate() const { return mode_ == Mode::Probe || mode_ == Mode::Speculate; }
    // The step just taken: its seconds (drafting, verification, commit; not the caller's
    // per-token hooks) and the tokens it emitted (>= 1; a step cut short by a stop condition
    // emits fewer than it could and is not recorded by the caller).
    void record_speculative(double seconds, int64_t tokens);
    void record_plain(double seconds, int64_t tokens = 1);

    // Current estimates, seconds per token (0 when unmeasured), for statistics and tests.
    double speculative_seconds_per_token() const { return spec_.rate(); }
    double plain_seconds_per_token() const { return plain_.rate(); }
    int64_t backoff_tokens() const { return backoff_; }

private:
    enum class Mode {
        Probe,       // speculating, measuring speculation
        PlainProbe,  // plain steps, measuring plain decoding (no plain rate known yet)
        Speculate,   // speculation won its probe: speculating, watching its rate
        Plain        // speculation lost: plain steps until the back-off is spent
    };
    // Seconds and tokens summed over a window of steps.
    struct Window {
        double seconds = 0;
        int64_t tokens = 0;
        int32_t steps = 0;
        bool skipped_first = false;
        double rate() const { return tokens > 0 ? seconds / double(tokens) : 0.0; }
        void clear() { seconds = 0, tokens = 0, steps = 0; }
    };
    // Adds a step unless it is the first one of its kind and skip_first is set.
    void add(Window &w, double seconds, int64_t tokens) const;
    // Speculation measured over a full window: keep it or back off; `margin` is how much slower
    // than plain decoding it may be and still be kept.
    void decide(double margin);

    bool enabled_;
    double min_gain_;
    Config cfg_;
    Mode mode_ = Mode::Probe;
    Window spec_, plain_;
    int64_t backoff_ = 0;  // the next back-off (cfg_.min_backoff_tokens .. cfg_.max_backoff_tokens)
    int64_t plain_left_ = 0;  // plain tokens left in the current back-off (or plain probe steps)
};

}  // namespace specla
