#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace specla {

int32_t argmax(const float *logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (logits[i] > logits[best]) best = i;
    return best;
}

void sampling_distribution(const float *logits, int32_t vocab, const SamplingConfig &cfg, float *probs) {
    std::fill(probs, probs + vocab, 0.f);
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
    for (size_t i = 0; i < keep; ++i) probs[ids[i]] = float(w[i] / total);
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

int32_t sample_token(const float *logits, int32_t vocab, const SamplingConfig &cfg, double u) {
    if (cfg.greedy()) return argmax(logits, cfg.candidates(vocab));
    std::vector<float> p(static_cast<size_t>(vocab));
    sampling_distribution(logits, vocab, cfg, p.data());
    return sample_from_distribution(p.data(), vocab, u);
}

}  // namespace specla
