#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace specla {

void token_logprobs(const float *logits, int32_t n_candidates, int32_t token, int32_t n_top, float *logprob,
                    int32_t *top_ids, float *top_logprobs) {
    // log-sum-exp with the maximum taken out, so that large logits do not overflow. A logit of
    // -inf (a masked id) contributes nothing; every candidate -inf would make the row empty,
    // which a model's output head does not produce (its logits are finite).
    double mx = -std::numeric_limits<double>::infinity();
    for (int32_t i = 0; i < n_candidates; ++i) mx = std::max(mx, double(logits[i]));
    double sum = 0.0;
    for (int32_t i = 0; i < n_candidates; ++i) sum += std::exp(double(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    *logprob = float(double(logits[token]) - lse);
    if (n_top <= 0) return;
    std::vector<int32_t> ids(static_cast<size_t>(n_candidates));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n_top, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int32_t k = 0; k < n_top; ++k) {
        top_ids[k] = ids[size_t(k)];
        top_logprobs[k] = float(double(logits[ids[size_t(k)]]) - lse);
    }
}

void top_tokens(const float *logits, int32_t n_candidates, int32_t k, int32_t *ids, float *logp) {
    // One pass keeping the best k so far in order (k is a tree's top_k: a handful), then the
    // log-sum-exp with exponentials in float summed in double: about 10x faster than
    // token_logprobs' sort and double exponentials over a 32000-id row, where greedy drafting
    // calls this once per pass, and within float rounding of it.
    const float ninf = -std::numeric_limits<float>::infinity();
    int32_t have = 0;
    for (int32_t t = 0; t < n_candidates; ++t) {
        const float x = logits[t];
        if (!(x > ninf)) continue;  // probability 0 (or NaN): not a token to draft
        if (have == k && !(x > logp[have - 1])) continue;  // ties keep the lower id
        int32_t at = have < k ? have++ : k - 1;
        for (; at > 0 && x > logp[at - 1]; --at) ids[at] = ids[at - 1], logp[at] = logp[at - 1];
        ids[at] = t, logp[at] = x;
    }
    if (have > 0) {
        const float mx = logp[0];
        double sum = 0.0;
        for (int32_t t = 0; t < n_candidates; ++t) sum += double(std::exp(logits[t] - mx));
        const float lse = float(double(mx) + std::log(sum));
        for (int32_t i = 0; i < have; ++i) logp[i] -= lse;
    }
    for (int32_t i = have; i < k; ++i) ids[i] = -1, logp[i] = ninf;
}

void LogprobRows::append(const float *logits, int32_t n_candidates, int32_t token, int32_t n_top) {
    logprobs.push_back(0.f);
    top_ids.resize(top_ids.size() + size_t(n_top));
    top_logprobs.resize(top_logprobs.size() + size_t(n_top));
    token_logprobs(logits, n_candidates, token, n_top, &logprobs.back(), top_ids.data() + top_ids.size() - size_t(n_top),
                   top_logprobs.data() + top_logprobs.size() - size_t(n_top));
}

void LogprobRows::extend(const LogprobRows &other) {
    logprobs.insert(logprobs.end(), other.logprobs.begin(), other.logprobs.end());
    top_ids.insert(top_ids.end(), other.top_ids.begin(), other.top_ids.end());
    top_logprobs.insert(top_logprobs.end(), other.top_logprobs.begin(), other.top_logprobs.end());
}

}  // namespace specla
