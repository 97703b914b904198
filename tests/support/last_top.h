// The check that eval_chain's last-row top tokens (Backend::eval_chain, TopTokens last_top) are
// top_tokens of that row's logits (sampling/logprobs.h, the reference), whatever rows the call
// asks logits for: one definition for the CPU and the CUDA backends.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "sampling/logprobs.h"

namespace test {

// Evaluates `tokens` (input features `in` for a drafter model, else empty) on fresh states of `b`
// with top tokens of the last row asked for, for logits rows None, Last and All, against the
// same call's logits (None: a call asking for the last row, which the backend computes the same
// way); log-probabilities within `logp_tol` (relative, at least 1 absolute unit): 0 where the
// backend takes them on the host.
inline void check_last_top(specla::Backend &b, const std::vector<int32_t> &tokens, const std::vector<float> &in,
                           int32_t k, int32_t n_candidates, float logp_tol) {
    using namespace specla;
    const size_t V = size_t(b.config().vocab_size), n = tokens.size();
    for (LogitsRows rows : {LogitsRows::None, LogitsRows::Last, LogitsRows::All}) {
        const LogitsRows ref_rows = rows == LogitsRows::None ? LogitsRows::Last : rows;
        SessionLimits lim;
        lim.max_batch_tokens = int32_t(n);
        auto ref_state = b.create_state(lim);
        auto state = b.create_state(lim);
        RowFeatures rf;
        rf.in = in.empty() ? nullptr : in.data();
        std::vector<float> ref_logits((ref_rows == LogitsRows::All ? n : 1) * V);
        b.eval_chain(*ref_state, tokens.data(), int32_t(n), ref_rows, ref_logits.data(), rf);
        std::vector<float> logits(rows == LogitsRows::None ? 0 : ref_logits.size(), NAN);
        TopTokens top;
        std::vector<int32_t> ids(size_t(k), -7);
        std::vector<float> logp(size_t(k), NAN);
        top.k = k, top.n_candidates = n_candidates, top.ids = ids.data(), top.logp = logp.data();
        b.eval_chain(*state, tokens.data(), int32_t(n), rows, logits.empty() ? nullptr : logits.data(), rf, top);
        INFO("logits rows ", int(rows), ", ", n, " tokens, k ", k);
        if (rows != LogitsRows::None) CHECK(logits == ref_logits);
        const float *last = ref_logits.data() + (ref_rows == LogitsRows::All ? (n - 1) * V : 0);
        std::vector<int32_t> want_ids(static_cast<size_t>(k));
        std::vector<float> want_logp(static_cast<size_t>(k));
        top_tokens(last, n_candidates, k, want_ids.data(), want_logp.data());
        CHECK(ids == want_ids);
        for (int32_t i = 0; i < k; ++i) {
            const float g = logp[size_t(i)], w = want_logp[size_t(i)];
            INFO("entry ", i, ": ", g, " against ", w);
            if (std::isinf(w)) CHECK(g == w);
            else CHECK(std::fabs(g - w) <= logp_tol * std::max(1.f, std::fabs(w)));
        }
    }
}

// check_last_top on a target and its drafter model (random tokens and input features) for
// 1, 5 and 13 rows and k = 1, 4, 9 (both top-token kernels on the GPU), the drafter with a
// padded vocabulary's candidate count.
inline void check_last_top_grid(specla::Backend &target, specla::Backend &drafter, uint64_t seed, float logp_tol) {
    const int32_t V = target.config().vocab_size;
    const size_t D = size_t(target.config().hidden_size);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (size_t n : {size_t(1), size_t(5), size_t(13)}) {
        std::vector<int32_t> toks(n);
        for (int32_t &t : toks) t = int32_t(rng() % uint64_t(V));
        std::vector<float> in(n * D);
        for (float &x : in) x = normal(rng);
        for (int32_t k : {1, 4, 9}) {
            check_last_top(target, toks, {}, k, V, logp_tol);
            check_last_top(drafter, toks, in, k, V - 3, logp_tol);
        }
    }
}

}  // namespace test
