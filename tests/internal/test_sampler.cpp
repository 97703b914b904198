// The sampler's transformations (lib/sampling/sampler.h) against hand-computed values: logit bias,
// repetition / presence / frequency penalties over the history window, min-p, their order, greedy
// on the transformed logits, and the clamping that keeps extreme settings finite.
#include <doctest/doctest.h>

#include <cfloat>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/sampler.h"

using namespace specla;

namespace {

std::vector<float> transformed(const std::vector<float> &logits, const SamplingConfig &c, const History &h) {
    std::vector<float> scratch;
    const float *out = transformed_logits(logits.data(), int32_t(logits.size()), c, h, scratch);
    return std::vector<float>(out, out + logits.size());
}

std::vector<float> dist(const std::vector<float> &logits, const SamplingConfig &c, const History &h = {}) {
    std::vector<float> p(logits.size());
    sampling_distribution(logits.data(), int32_t(logits.size()), c, h, p.data());
    return p;
}

void check_close(const std::vector<float> &got, const std::vector<double> &want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("index ", i);
        CHECK(double(got[i]) == doctest::Approx(want[i]).epsilon(1e-6));
    }
}

}  // namespace

TEST_CASE("sampler: logit bias adds, duplicates add up") {
    SamplingConfig c;
    c.logit_bias = {{0, 1.5f}, {3, 2.f}, {3, 0.5f}};
    check_close(transformed({1.f, 2.f, 0.f, -1.f}, c, {}), {2.5, 2.0, 0.0, 1.5});
    // Without transformations the logits are used in place.
    SamplingConfig plain;
    std::vector<float> l = {1.f, 2.f}, scratch;
    CHECK(transformed_logits(l.data(), 2, plain, {}, scratch) == l.data());
}

TEST_CASE("sampler: penalties over the history window") {
    const std::vector<float> l = {2.f, -1.f, 3.f, 0.5f};
    const std::vector<int32_t> ctx = {0, 1, 1};
    SUBCASE("repetition: divide a positive logit, multiply a negative one, once per seen token") {
        SamplingConfig c;
        c.repetition_penalty = 2.f;
        check_close(transformed(l, c, History::of(ctx)), {1.0, -2.0, 3.0, 0.5});
    }
    SUBCASE("frequency per occurrence, presence once") {
        SamplingConfig c;
        c.frequency_penalty = 0.5f;
        c.presence_penalty = 0.25f;
        check_close(transformed(l, c, History::of(ctx)), {2.0 - 0.5 - 0.25, -1.0 - 1.0 - 0.25, 3.0, 0.5});
    }
    SUBCASE("repetition before frequency and presence") {
        SamplingConfig c;
        c.repetition_penalty = 2.f;
        c.frequency_penalty = 0.5f;
        c.presence_penalty = 0.25f;
        check_close(transformed(l, c, History::of(ctx)), {1.0 - 0.75, -2.0 - 1.25, 3.0, 0.5});
    }
    SUBCASE("the window: the last n tokens of context + path; -1 all; 0 none") {
        const std::vector<int32_t> context = {0, 1}, path = {2};
        const History h{context.data(), context.size(), path.data(), path.size()};
        SamplingConfig c;
        c.presence_penalty = 1.f;
        c.penalty_last_n = 2;  // {1, 2}: token 0 is out of the window
        check_close(transformed(l, c, h), {2.0, -2.0, 2.0, 0.5});
        c.penalty_last_n = 1;  // {2}: the path only
        check_close(transformed(l, c, h), {2.0, -1.0, 2.0, 0.5});
        c.penalty_last_n = -1;  // everything
        check_close(transformed(l, c, h), {1.0, -2.0, 2.0, 0.5});
        c.penalty_last_n = 100;  // more than there is
        check_close(transformed(l, c, h), {1.0, -2.0, 2.0, 0.5});
        c.penalty_last_n = 0;  // none: no transformation at all
        CHECK_FALSE(c.transforms());
        check_close(transformed(l, c, h), {2.0, -1.0, 3.0, 0.5});
    }
}

TEST_CASE("sampler: bias comes before the penalties") {
    SamplingConfig c;
    c.logit_bias = {{0, 1.f}};
    c.repetition_penalty = 2.f;
    const std::vector<int32_t> ctx = {0};
    // (1 + 1) / 2 = 1, not 1 / 2 + 1 = 1.5.
    check_close(transformed({1.f, 0.f}, c, History::of(ctx)), {1.0, 0.0});
}

TEST_CASE("sampler: min-p keeps tokens with at least min_p x the top probability, after top-k/top-p") {
    const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
    SamplingConfig c;
    c.temperature = 1.f;
    c.min_p = 0.2f;  // threshold 0.1: token 3 goes
    check_close(dist(l, c), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0});
    c.min_p = 0.7f;  // threshold 0.35: the top token alone
    check_close(dist(l, c), {1.0, 0.0, 0.0, 0.0});
    c.min_p = 0.5f;  // threshold 0.25 after top-k 2 (relative to the top, unchanged by renormalising)
    c.top_k = 2;
    check_close(dist(l, c), {0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0});
    // After temperature: T = 2 flattens to p ~ sqrt(p): 0.707, 0.548, 0.387, 0.224 (relative);
    // min_p 0.5 keeps those >= 0.354.
    c.top_k = 0;
    c.temperature = 2.f;
    const double w[] = {std::sqrt(0.5), std::sqrt(0.3), std::sqrt(0.15), std::sqrt(0.05)};
    const double total = w[0] + w[1] + w[2];
    check_close(dist(l, c), {w[0] / total, w[1] / total, w[2] / total, 0.0});
}

TEST_CASE("sampler: the full chain, hand-computed") {
    // bias, penalties, temperature, min-p on four tokens.
    const std::vector<float> l = {1.f, 2.f, 0.5f, -0.5f};
    const std::vector<int32_t> ctx = {1, 1, 3};
    SamplingConfig c;
    c.temperature = 0.5f;
    c.logit_bias = {{2, 1.f}};            // {1, 2, 1.5, -0.5}
    c.repetition_penalty = 1.25f;         // token 1: 2 / 1.25 = 1.6; token 3: -0.5 * 1.25 = -0.625
    c.frequency_penalty = 0.1f;           // token 1: -0.2; token 3: -0.1
    c.presence_penalty = 0.05f;           // token 1: 1.35; token 3: -0.775
    c.min_p = 0.1f;
    const double t[] = {1.0, 1.35, 1.5, -0.775};
    double e[4], top = 0;
    for (int i = 0; i < 4; ++i) top = std::max(top, e[i] = std::exp((t[i] - 1.5) / 0.5));
    double total = 0;
    for (double &x : e) total += x = x >= 0.1 * top ? x : 0.0;
    check_close(dist(l, c, History::of(ctx)), {e[0] / total, e[1] / total, e[2] / total, e[3] / total});
    CHECK(e[3] == 0.0);  // min-p removed token 3 (exp(-4.55) < 0.1)
}

TEST_CASE("sampler: greedy picks the largest transformed logit") {
    const std::vector<float> l = {3.f, 2.9f, 0.f};
    const std::vector<int32_t> ctx = {0};
    SamplingConfig c;  // temperature 0: greedy
    CHECK(sample_token(l.data(), 3, c, History::of(ctx), 0.5) == 0);
    c.repetition_penalty = 1.5f;  // 3 -> 2
    CHECK(greedy_token(l.data(), 3, c, History::of(ctx)) == 1);
    CHECK(sample_token(l.data(), 3, c, History::of(ctx), 0.5) == 1);
    check_close(dist(l, c, History::of(ctx)), {0.0, 1.0, 0.0});
    c.repetition_penalty = 1.f;
    c.logit_bias = {{2, 5.f}};
    CHECK(sample_token(l.data(), 3, c, History{}, 0.5) == 2);
    // Candidates still bound the choice: a biased padding id is never picked.
    c.n_candidates = 2;
    CHECK(sample_token(l.data(), 3, c, History{}, 0.5) == 0);
}

TEST_CASE("sampler: extreme settings stay finite") {
    const std::vector<float> l = {1e38f, -1e38f, 0.f};
    const std::vector<int32_t> ctx = {0, 1, 1, 1};
    SamplingConfig c;
    c.temperature = 1.f;
    c.logit_bias = {{0, FLT_MAX}, {1, -FLT_MAX}};
    c.repetition_penalty = 1e-30f;  // dividing 2e38 by it overflows
    c.frequency_penalty = FLT_MAX;  // 3 x FLT_MAX overflows
    const std::vector<float> t = transformed(l, c, History::of(ctx));
    for (float x : t) CHECK(std::isfinite(x));
    const std::vector<float> p = dist(l, c, History::of(ctx));
    double total = 0;
    for (float x : p) {
        CHECK(std::isfinite(x));
        total += x;
    }
    CHECK(total == doctest::Approx(1.0));
}

TEST_CASE("sampler: top-p keeps the smallest prefix of the descending order, on vocabularies past one partial sort") {
    // Random rows of 300-20000 ids (the nucleus search sorts 64 ids, then 256, 1024... of them),
    // with tied logits: the kept set must be a prefix of the descending order (ties: lower id
    // first), the smallest whose mass reaches top_p, renormalised; checked against weights
    // computed here in double.
    std::mt19937 g(20261204);
    for (int trial = 0; trial < 24; ++trial) {
        const int32_t V = int32_t(300 + g() % 20000);
        std::normal_distribution<float> nd(0.f, trial % 3 == 0 ? 6.f : 2.f);
        std::vector<float> l(static_cast<size_t>(V));
        for (float &x : l) x = std::round(nd(g) * 8.f) / 8.f;  // coarse values: many ties
        SamplingConfig c;
        c.temperature = trial % 2 ? 0.7f : 1.3f;
        c.top_p = trial % 4 == 0 ? 0.5f : trial % 4 == 1 ? 0.9f : trial % 4 == 2 ? 0.99f : 0.999f;
        if (trial % 5 == 4) c.top_k = 2000;  // top-k first, then top-p within it
        INFO("trial ", trial, " V ", V, " T ", c.temperature, " top_p ", c.top_p, " top_k ", c.top_k);
        const std::vector<float> p = dist(l, c);
        std::vector<int32_t> order(static_cast<size_t>(V));
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
        const size_t limit = c.top_k > 0 ? std::min<size_t>(size_t(c.top_k), size_t(V)) : size_t(V);
        std::vector<double> w(limit);
        double total = 0;
        for (size_t i = 0; i < limit; ++i) total += w[i] = std::exp(double(l[order[i]] - l[order[0]]) / c.temperature);
        size_t kept = 0;
        while (kept < size_t(V) && p[size_t(order[kept])] > 0.f) ++kept;
        for (size_t i = kept; i < size_t(V); ++i) REQUIRE(p[size_t(order[i])] == 0.f);  // a prefix
        REQUIRE(kept >= 1);
        REQUIRE(kept <= limit);
        double mass = 0;
        for (size_t i = 0; i < kept; ++i) mass += w[i];
        const double target = double(c.top_p) * total, slack = 1e-5 * total;
        CHECK(mass >= target - slack);                // reaches top_p
        CHECK(mass - w[kept - 1] < target + slack);   // and is the smallest prefix that does
        for (size_t i = 0; i < kept; ++i)
            REQUIRE(double(p[size_t(order[i])]) == doctest::Approx(w[i] / mass).epsilon(1e-5));
    }
}
