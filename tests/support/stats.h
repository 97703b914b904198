// Chi-square tests for the statistical (distributional) checks of the test suites. Header-only so
// that any test program can use it without build changes.
//
//   chi_square_gof(observed counts, expected probabilities): goodness of fit of a histogram to a
//       known distribution (e.g. the speculative sampler's tokens against the target's exact p).
//   chi_square_homogeneity(counts a, counts b): whether two histograms come from the same
//       distribution (e.g. speculative sampling against plain sampling, when p is not known).
//
// Both pool the bins whose expected count is below `min_expected` (5 by default, the usual
// validity rule of the chi-square approximation) into one bin, and report the statistic, the
// degrees of freedom (bins used - 1) and the p-value P(X >= statistic) for X ~ chi-square(df),
// computed from the regularized upper incomplete gamma function Q(df/2, statistic/2).
// An observation in a bin of expected probability zero makes the statistic infinite (p = 0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace test {

// Seeds of randomized tests. The environment variable SPECLA_TEST_SEED, when set, overrides both
// (to reproduce a printed failure or to explore other seeds).
//   fixed_seed(s): s, for tests whose verdict depends on the draw (statistical tests at a
//       significance level), so that a run is reproducible;
//   fresh_seed(): a new seed per run from std::random_device, for tests of exact properties,
//       which must hold for every draw; print it so that a failure can be replayed.
inline bool env_seed(uint64_t &seed) {
    const char *s = std::getenv("SPECLA_TEST_SEED");
    if (!s || !*s) return false;
    seed = std::strtoull(s, nullptr, 0);
    return true;
}
inline uint64_t fixed_seed(uint64_t seed) {
    env_seed(seed);
    return seed;
}
inline uint64_t fresh_seed() {
    uint64_t seed;
    if (env_seed(seed)) return seed;
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}

// Regularized lower incomplete gamma P(a, x) by its power series (converges well for x < a + 1).
inline double gamma_p_series(double a, double x) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000; ++n) {
        term *= x / (a + n);
        sum += term;
        if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
    }
    return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

// Regularized upper incomplete gamma Q(a, x) by its continued fraction (modified Lentz; for
// x >= a + 1).
inline double gamma_q_continued_fraction(double a, double x) {
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; ++i) {
        const double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (std::fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        const double delta = d * c;
        h *= delta;
        if (std::fabs(delta - 1.0) < 1e-16) break;
    }
    return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

// Q(a, x) = Gamma(a, x) / Gamma(a), a > 0, x >= 0.
inline double regularized_gamma_q(double a, double x) {
    if (x <= 0.0) return 1.0;
    if (std::isinf(x)) return 0.0;
    if (x < a + 1.0) return std::max(0.0, 1.0 - gamma_p_series(a, x));
    return gamma_q_continued_fraction(a, x);
}

// P(X >= statistic) for X ~ chi-square with df degrees of freedom.
inline double chi_square_sf(double statistic, int df) {
    if (df <= 0) return 1.0;
    return regularized_gamma_q(0.5 * df, 0.5 * statistic);
}

struct ChiSquareResult {
    double statistic = 0;
    int df = 0;
    double p_value = 1;
    int64_t samples = 0;
    int bins = 0;            // bins after pooling
    int64_t impossible = 0;  // observations in bins of expected probability zero
    std::string str() const {
        std::ostringstream os;
        os << "chi2=" << statistic << " df=" << df << " p=" << p_value << " (n=" << samples << ", bins=" << bins;
        if (impossible) os << ", " << impossible << " impossible observations";
        os << ")";
        return os.str();
    }
};

namespace detail {
// Groups bin indices: every bin with expected count >= min_expected alone, the rest in one pooled
// group (merged into the smallest regular group when it is itself below min_expected).
inline std::vector<std::vector<size_t>> pool_bins(const std::vector<double> &expected_counts, double min_expected) {
    std::vector<std::vector<size_t>> groups;
    std::vector<size_t> pooled;
    double pooled_expected = 0;
    for (size_t i = 0; i < expected_counts.size(); ++i) {
        if (expected_counts[i] <= 0) continue;
        if (expected_counts[i] >= min_expected) groups.push_back({i});
        else pooled.push_back(i), pooled_expected += expected_counts[i];
    }
    if (!pooled.empty()) {
        if (pooled_expected >= min_expected || groups.empty()) {
            groups.push_back(pooled);
        } else {
            size_t smallest = 0;
            for (size_t g = 1; g < groups.size(); ++g)
                if (expected_counts[groups[g][0]] < expected_counts[groups[smallest][0]]) smallest = g;
            groups[smallest].insert(groups[smallest].end(), pooled.begin(), pooled.end());
        }
    }
    return groups;
}
}  // namespace detail

// Goodness of fit of `observed` counts to the distribution `probs` (normalised here).
inline ChiSquareResult chi_square_gof(const std::vector<int64_t> &observed, const std::vector<double> &probs,
                                      double min_expected = 5.0) {
    ChiSquareResult r;
    double total_p = 0;
    for (double p : probs) total_p += p;
    for (int64_t o : observed) r.samples += o;
    std::vector<double> expected(probs.size());
    for (size_t i = 0; i < probs.size(); ++i) {
        expected[i] = total_p > 0 ? double(r.samples) * probs[i] / total_p : 0.0;
        if (probs[i] <= 0 && i < observed.size()) r.impossible += observed[i];
    }
    for (size_t i = probs.size(); i < observed.size(); ++i) r.impossible += observed[i];
    const auto groups = detail::pool_bins(expected, min_expected);
    r.bins = int(groups.size());
    r.df = std::max(0, r.bins - 1);
    if (r.impossible > 0) {
        r.statistic = std::numeric_limits<double>::infinity();
        r.p_value = 0;
        return r;
    }
    for (const auto &g : groups) {
        double o = 0, e = 0;
        for (size_t i : g) o += double(i < observed.size() ? observed[i] : 0), e += expected[i];
        r.statistic += (o - e) * (o - e) / e;
    }
    r.p_value = chi_square_sf(r.statistic, r.df);
    return r;
}

// Homogeneity of two histograms over the same bins (2 x k contingency table, df = k - 1 after
// pooling bins whose smaller expected count is below min_expected).
inline ChiSquareResult chi_square_homogeneity(const std::vector<int64_t> &a, const std::vector<int64_t> &b,
                                              double min_expected = 5.0) {
    ChiSquareResult r;
    const size_t k = std::max(a.size(), b.size());
    auto at = [](const std::vector<int64_t> &v, size_t i) { return i < v.size() ? double(v[i]) : 0.0; };
    double na = 0, nb = 0;
    for (size_t i = 0; i < k; ++i) na += at(a, i), nb += at(b, i);
    r.samples = int64_t(na + nb);
    if (na <= 0 || nb <= 0) return r;
    const double n = na + nb;
    // Expected count of the smaller sample decides pooling.
    std::vector<double> expected_min(k);
    for (size_t i = 0; i < k; ++i) expected_min[i] = (at(a, i) + at(b, i)) * std::min(na, nb) / n;
    const auto groups = detail::pool_bins(expected_min, min_expected);
    r.bins = int(groups.size());
    r.df = std::max(0, r.bins - 1);
    for (const auto &g : groups) {
        double oa = 0, ob = 0;
        for (size_t i : g) oa += at(a, i), ob += at(b, i);
        const double col = oa + ob;
        const double ea = col * na / n, eb = col * nb / n;
        r.statistic += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
    }
    r.p_value = chi_square_sf(r.statistic, r.df);
    return r;
}

}  // namespace test
