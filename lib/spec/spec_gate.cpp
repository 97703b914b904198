#include "spec/spec_gate.h"

#include <algorithm>
#include <cmath>

namespace specla {

SpecGate::SpecGate(double min_gain, const Config &config)
    : enabled_(std::isfinite(min_gain) && min_gain > 0),
      min_gain_(min_gain),
      cfg_(config) {
    cfg_.min_backoff_tokens = std::max<int64_t>(1, cfg_.min_backoff_tokens);
    backoff_ = cfg_.min_backoff_tokens;
    cfg_.probe_passes = std::max(1, cfg_.probe_passes);
    cfg_.plain_probe_steps = std::max(1, cfg_.plain_probe_steps);
    cfg_.judge_passes = std::max(1, cfg_.judge_passes);
    cfg_.quick_passes = std::max(1, cfg_.quick_passes);
    cfg_.quick_loss = std::max(1.0, cfg_.quick_loss);
    cfg_.hysteresis = std::max(0.0, cfg_.hysteresis);
    cfg_.max_backoff_tokens = std::max(backoff_, cfg_.max_backoff_tokens);
}

void SpecGate::assume_plain_rate(double seconds_per_token) {
    if (!(seconds_per_token > 0) || !std::isfinite(seconds_per_token)) return;
    plain_.seconds = seconds_per_token;
    plain_.tokens = 1;
    plain_.steps = 1;
    plain_.skipped_first = true;  // later plain steps are past any warm-up
}

void SpecGate::resume_backoff(int64_t plain_tokens_left, int64_t next_backoff) {
    if (!enabled_) return;
    if (next_backoff > 0)
        backoff_ = std::clamp(next_backoff, cfg_.min_backoff_tokens, cfg_.max_backoff_tokens);
    if (plain_tokens_left <= 0 || plain_.tokens == 0) return;
    mode_ = Mode::Plain;
    plain_left_ = plain_tokens_left;
}

void SpecGate::add(Window &w, double seconds, int64_t tokens) const {
    if (cfg_.skip_first && !w.skipped_first) {
        w.skipped_first = true;
        return;
    }
    w.seconds += seconds;
    w.tokens += tokens;
    ++w.steps;
}

void SpecGate::record_speculative(double seconds, int64_t tokens) {
    if (!enabled_ || mode_ == Mode::Plain || mode_ == Mode::PlainProbe || tokens <= 0) return;
    add(spec_, seconds, tokens);
    const bool kept = mode_ == Mode::Speculate;
    const bool quick = !kept && spec_.steps >= cfg_.quick_passes && plain_.tokens > 0 &&
                       spec_.rate() * min_gain_ > plain_.rate() * cfg_.quick_loss;
    if (!quick && spec_.steps < (kept ? cfg_.judge_passes : cfg_.probe_passes)) return;
    if (plain_.tokens == 0) {
        // Nothing to compare with yet: measure plain decoding now (once per session: later
        // generations start from the rate measured, assume_plain_rate).
        mode_ = Mode::PlainProbe;
        plain_left_ = cfg_.plain_probe_steps;
        return;
    }
    decide(kept ? 1.0 + cfg_.hysteresis : 1.0);
}

void SpecGate::record_plain(double seconds, int64_t tokens) {
    if (!enabled_ || tokens <= 0) return;
    if (mode_ != Mode::Plain && mode_ != Mode::PlainProbe) return;
    const bool counted = !cfg_.skip_first || plain_.skipped_first;
    add(plain_, seconds, tokens);
    if (counted) plain_left_ -= tokens;
    if (plain_left_ > 0) return;
    if (mode_ == Mode::PlainProbe) return decide(1.0);
    // The back-off is spent: probe speculation afresh. Its first pass is dropped like a
    // generation's first: a drafter that reads features catches up on every token of the
    // back-off there, a cost of having stepped plainly, not of speculating.
    mode_ = Mode::Probe;
    spec_.clear();
    spec_.skipped_first = false;
}

void SpecGate::decide(double margin) {
    if (spec_.rate() * min_gain_ <= plain_.rate() * margin) {
        // Speculation pays: keep it, and judge it again window by window (the text, and with it
        // acceptance, changes as the generation goes).
        mode_ = Mode::Speculate;
        backoff_ = cfg_.min_backoff_tokens;
        spec_.clear();
        return;
    }
    mode_ = Mode::Plain;
    plain_left_ = backoff_;
    backoff_ = std::min(backoff_ * 2, cfg_.max_backoff_tokens);
    // The plain rate is measured afresh over the back-off, so that it follows the generation
    // (the next decision compares two measurements of about the same time).
    plain_.clear();
}

}  // namespace specla
