// The CPU commit of a factor (gdn_apply_factor: S <- exp(g) S + k u^T) must leave bitwise the state
// a plain decoding step (gdn_step) leaves, with the step's own residual u: the commit stands in for
// that step, and greedy equality of speculative and plain decoding relies on the same bits
// (lib/engine/tree_recurrence.md). Both run in the x86-64-v3 clone where the machine has it, whose
// FMAs may fuse a product that the other function rounds, so the order of operations is checked here.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_gdn.h"

using namespace specla;

TEST_CASE("cpu: a committed factor leaves bitwise the state of the plain decoding step") {
    std::mt19937 rng(20261202);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    for (int K : {16, 64, 128}) {
        for (int V : {16, 128, 136}) {
            for (int trial = 0; trial < 8; ++trial) {
                std::vector<float> S(size_t(K) * V), q(K), k(K), v(V), o(V), u(V);
                for (auto &x : S) x = uni(rng);
                for (auto &x : q) x = uni(rng);
                for (auto &x : k) x = uni(rng) * 0.2f;
                for (auto &x : v) x = uni(rng);
                const float beta = 0.5f + 0.5f * uni(rng), g = -0.3f + 0.25f * uni(rng);
                std::vector<float> S_commit = S;
                cpu::gdn_step(S.data(), K, V, q.data(), k.data(), v.data(), beta, g, o.data(), u.data());
                cpu::gdn_apply_factor(S_commit.data(), K, V, k.data(), u.data(), g);
                CAPTURE(K);
                CAPTURE(V);
                CAPTURE(trial);
                CHECK(std::memcmp(S.data(), S_commit.data(), S.size() * sizeof(float)) == 0);
            }
        }
    }
}
