#include "sampling/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

namespace specla {

namespace {

float clamp_finite(float x) { return std::isnan(x) ? x : std::min(std::max(x, -FLT_MAX), FLT_MAX); }

// The window of the penalties: the last `last_n` tokens of context + path (-1: all).
void penalty_window(const History &h, int32_t last_n, std::vector<int32_t> &out) {
    const size_t total = h.n_context + h.n_path;
    const size_t n = last_n < 0 ? total : std::min(total, size_t(last_n));
    out.clear();
    const size_t from_path = std::min(n, h.n_path);
    const size_t from_context = n - from_path;
    out.insert(out.end(), h.context + (h.n_context - from_context), h.context + h.n_context);
    out.insert(out.end(), h.path + (h.n_path - from_path), h.path + h.n_path);
}

}  // namespace

int32_t argmax(const float *logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (logits[i] > logits[best]) best = i;
    return best;
}

const float *transformed_logits(const float *logits, int32_t vocab, const SamplingConfig &cfg, const History &history,
                                std::vector<float> &scratch) {
    if (!cfg.transforms()) return logits;
    scratch.assign(logits, logits + vocab);
    for (const auto &[token, bias] : cfg.logit_bias)
        if (token >= 0 && token < vocab) scratch[size_t(token)] = clamp_finite(scratch[size_t(token)] + bias);
    if (cfg.penalizes()) {
        thread_local std::vector<int32_t> window;
        penalty_window(history, cfg.penalty_last_n, window);
        std::sort(window.begin(), window.end());
        for (size_t i = 0; i < window.size();) {
            const int32_t t = window[i];
            size_t j = i;
            while (j < window.size() && window[j] == t) ++j;
            const float count = float(j - i);
            i = j;
            if (t < 0 || t >= vocab) continue;
            float l = scratch[size_t(t)];
            l = l > 0.f ? l / cfg.repetition_penalty : l * cfg.repetition_penalty;
            l = clamp_finite(l);
            l = clamp_finite(l - clamp_finite(count * cfg.frequency_penalty));
            scratch[size_t(t)] = clamp_finite(l - cfg.presence_penalty);
        }
    }
    return scratch.data();
}

int32_t greedy_token(const float *logits, int32_t vocab, const SamplingConfig &cfg, const History &history) {
    thread_local std::vector<float> scratch;
    return argmax(transformed_logits(logits, vocab, cfg, history, scratch), cfg.candidates(vocab));
}

void sampling_distribution(const float *raw_logits, int32_t vocab, const SamplingConfig &cfg, const History &history,
                           float *probs) {
    std::fill(probs, probs + vocab, 0.f);
    thread_local std::vector<float> scratch;
    const float *logits = transformed_logits(raw_logits, vocab, cfg, history, scratch);
    vocab = cfg.candidates(vocab);  // the ids above keep probability 0
    if (cfg.greedy()) {
        probs[argmax(logits, vocab)] = 1.f;
        return;
    }
    const bool use_k = cfg.top_k > 0 && cfg.top_k < vocab;
    const bool use_p = cfg.top_p < 1.f;
    // Candidate ids in descending logit order (ties: lower id first) when a cut needs the order.
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    size_t keep = size_t(vocab);
    if (use_k) {
        keep = size_t(cfg.top_k);
        std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), before);
    } else if (use_p) {
        std::sort(ids.begin(), ids.end(), before);
    }
    // greedy() leaves only temperatures >= SPECLA_LIMIT_MIN_TEMPERATURE (FLT_MIN) to sampling, whose
    // reciprocal is a finite float; the scaled differences are formed in double, and the largest
    // logit weighs exp(0) = 1, so the total is at least 1 and never NaN.
    const float inv_t = 1.f / cfg.temperature;
    float maxv = -INFINITY;
    for (size_t i = 0; i < keep; ++i) maxv = std::max(maxv, logits[ids[i]]);
    std::vector<double> w(keep);
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += w[i] = std::exp(double(logits[ids[i]] - maxv) * inv_t);
    if (use_p) {
        // Smallest prefix whose mass reaches top_p (at least one token).
        const double target = double(std::max(cfg.top_p, 0.f)) * total;
        double cum = 0;
        size_t cut = 0;
        while (cut < keep) {
            cum += w[cut++];
            if (cum >= target) break;
        }
        keep = cut;
        total = cum;
    }
    if (cfg.min_p > 0.f) {
        // The top token weighs exactly 1 (exp(0)), so "probability >= min_p x the top
        // probability" is w >= min_p, whatever the normalisation.
        total = 0;
        for (size_t i = 0; i < keep; ++i) {
            if (w[i] < double(cfg.min_p)) w[i] = 0;
            total += w[i];
        }
    }
    for (size_t i = 0; i < keep; ++i) probs[ids[i]] = float(w[i] / total);
}

void sampling_distribution(const float *logits, int32_t vocab, const SamplingConfig &cfg, float *probs) {
    sampling_distribution(logits, vocab, cfg, History{}, probs);
}

int32_t sample_from_distribution(const float *probs, int32_t vocab, double u) {
    double total = 0;
    for (int32_t i = 0; i < vocab; ++i) total += probs[i];
    const double target = u * total;
    double cum = 0;
    int32_t last_nonzero = 0;
    for (int32_t i = 0; i < vocab; ++i) {
        if (probs[i] <= 0.f) continue;
        cum += probs[i];
        last_nonzero = i;
        if (cum > target) return i;
    }
    return last_nonzero;  // rounding at u -> 1
}

int32_t sample_token(const float *logits, int32_t vocab, const SamplingConfig &cfg, const History &history, double u) {
    if (cfg.greedy()) return greedy_token(logits, vocab, cfg, history);
    std::vector<float> p(static_cast<size_t>(vocab));
    sampling_distribution(logits, vocab, cfg, history, p.data());
    return sample_from_distribution(p.data(), vocab, u);
}

int32_t sample_token(const float *logits, int32_t vocab, const SamplingConfig &cfg, double u) {
    return sample_token(logits, vocab, cfg, History{}, u);
}

}  // namespace specla
