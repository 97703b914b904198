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
    const int32_t have = std::max(0, std::min(k, n_candidates));
    bool any = false;
    for (int32_t i = 0; i < n_candidates && !any; ++i) any = logits[i] > -std::numeric_limits<float>::infinity();
    float unused = 0.f;
    if (any && have > 0) token_logprobs(logits, n_candidates, 0, have, &unused, ids, logp);
    for (int32_t i = 0; i < k; ++i)
        if (i >= have || !any || logits[ids[i]] == -std::numeric_limits<float>::infinity())
            ids[i] = -1, logp[i] = -std::numeric_limits<float>::infinity();
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
