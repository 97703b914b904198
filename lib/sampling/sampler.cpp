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

namespace {

// w[i] = exp((l[i] - maxv) / T) for n logits, and their sum. In float: the rows are float, and a
// float exp costs about half a double one (the exp over the vocabulary is most of the sampler's
// time: vocab-wide rows per drafted and verified position); the sum in double over four
// independent partial sums (fixed order, so the same inputs always give the same sum). greedy()
// leaves only temperatures >= SPECLA_LIMIT_MIN_TEMPERATURE (FLT_MIN) to sampling, whose
// reciprocal is a finite float; a scaled difference that overflows is -inf and weighs 0, and the
// largest logit weighs exp(0) = 1, so the total is at least 1 and never NaN.
double exp_weights(const float *l, size_t n, float maxv, float inv_t, float *w) {
    double part[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (size_t j = 0; j < 4; ++j) part[j] += double(w[i + j] = std::exp((l[i + j] - maxv) * inv_t));
    for (; i < n; ++i) part[0] += double(w[i] = std::exp((l[i] - maxv) * inv_t));
    return (part[0] + part[1]) + (part[2] + part[3]);
}

// min-p over weights whose top weighs 1: "probability >= min_p x the top probability" is
// w >= min_p whatever the normalisation. Returns the new total.
double apply_min_p(float *w, size_t n, float min_p) {
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
        if (w[i] < min_p) w[i] = 0.f;
        total += double(w[i]);
    }
    return total;
}

}  // namespace

void sampling_distribution(const float *raw_logits, int32_t vocab, const SamplingConfig &cfg, const History &history,
                           float *probs) {
    thread_local std::vector<float> scratch, kept, w;
    thread_local std::vector<int32_t> ids;
    const float *logits = transformed_logits(raw_logits, vocab, cfg, history, scratch);
    const int32_t all = vocab;
    vocab = cfg.candidates(vocab);  // the ids above keep probability 0
    std::fill(probs + vocab, probs + all, 0.f);
    if (cfg.greedy()) {
        std::fill(probs, probs + vocab, 0.f);
        probs[argmax(logits, vocab)] = 1.f;
        return;
    }
    const bool use_k = cfg.top_k > 0 && cfg.top_k < vocab;
    const bool use_p = cfg.top_p < 1.f;
    const float inv_t = 1.f / cfg.temperature;
    const size_t n = size_t(vocab);
    if (!use_k && !use_p) {
        // Every candidate stays: no order needed, the weights are written in place.
        const float maxv = *std::max_element(logits, logits + n);
        double total = exp_weights(logits, n, maxv, inv_t, probs);
        if (cfg.min_p > 0.f) total = apply_min_p(probs, n, cfg.min_p);
        const double inv = 1.0 / total;
        for (size_t i = 0; i < n; ++i) probs[i] = float(double(probs[i]) * inv);
        return;
    }
    // Candidate ids in descending logit order (ties: lower id first), as far as the cut needs: the
    // comparator is a strict total order, so a partial sort's prefix is the full sort's.
    ids.resize(n);
    std::iota(ids.begin(), ids.end(), 0);
    auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    size_t keep = n;
    double total = 0;
    if (use_k) {
        keep = size_t(cfg.top_k);
        std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(keep), ids.end(), before);
        kept.resize(keep);
        for (size_t i = 0; i < keep; ++i) kept[i] = logits[ids[i]];
        w.resize(keep);
        total = exp_weights(kept.data(), keep, kept[0], inv_t, w.data());  // kept[0] is the largest
        if (use_p) {
            // Smallest prefix whose mass reaches top_p (at least one token).
            const double target = double(std::max(cfg.top_p, 0.f)) * total;
            double cum = 0;
            size_t cut = 0;
            while (cut < keep) {
                cum += double(w[cut++]);
                if (cum >= target) break;
            }
            keep = cut;
            total = cum;
        }
    } else {
        // top-p alone: every candidate's weight in id order, then only as much of the descending
        // order as the nucleus takes (growing partial sorts; a full sort of the vocabulary cost
        // ~0.75 ms per row at 8192 ids and 3.5 ms at 32000).
        // The weights in id order go into probs, which is rewritten below.
        const float maxv = *std::max_element(logits, logits + n);
        const double target = double(std::max(cfg.top_p, 0.f)) * exp_weights(logits, n, maxv, inv_t, probs);
        double cum = 0;
        size_t cut = 0;
        for (size_t sorted = 0, k = std::min<size_t>(n, 64);; sorted = k, k = std::min(n, 4 * k)) {
            // ids[0, sorted) already hold the largest, in order; the rest all come after them.
            std::partial_sort(ids.begin() + std::ptrdiff_t(sorted), ids.begin() + std::ptrdiff_t(k), ids.end(), before);
            bool reached = false;
            while (cut < k && !reached) {  // the smallest prefix whose mass reaches top_p
                cum += double(probs[size_t(ids[cut++])]);
                reached = cum >= target;
            }
            if (reached || k == n) break;
        }
        keep = cut;
        total = cum;
        w.resize(keep);
        for (size_t i = 0; i < keep; ++i) w[i] = probs[size_t(ids[i])];
    }
    // w: the kept tokens' weights in descending order.
    if (cfg.min_p > 0.f) total = apply_min_p(w.data(), keep, cfg.min_p);
    std::fill(probs, probs + n, 0.f);
    const double inv = 1.0 / total;
    for (size_t i = 0; i < keep; ++i) probs[ids[i]] = float(double(w[i]) * inv);
}

void sampling_distribution(const float *logits, int32_t vocab, const SamplingConfig &cfg, float *probs) {
    sampling_distribution(logits, vocab, cfg, History{}, probs);
}

int32_t sample_from_distribution(const float *probs, int32_t vocab, double u) {
    double total = 0;
    for (int32_t i = 0; i < vocab; ++i) total += probs[i];
    return sample_from_distribution(probs, vocab, u, total);
}

int32_t sample_from_distribution(const float *probs, int32_t vocab, double u, double total) {
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
