// Sampled acceptance on the CUDA backend (its RowSampler, cuda_accept.cpp, under spec/accept.cpp's
// accept_sampled_rows): the host rule run where the verification's logits are. On a random
// model's real verification rows:
//   * the same uniforms give the host rule's path and bonus (all but rounding-boundary cases), and
//     exactly as many uniforms are drawn (the two random streams end in the same state);
//   * lossless: the first emitted token is distributed as the target's sampling distribution at
//     the root, the second (after an accepted node) as the distribution at that node (chi-square
//     goodness of fit), for configs with and without top-k / top-p cuts.
#include "test_cuda_common.h"

#ifndef SPECLA_WITH_CUDA

TEST_CASE("cuda accept: skipped") { MESSAGE("CUDA acceptance tests skipped: this build has no CUDA support"); }

#else

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "engine/backend.h"
#include "model/weights.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "spec/accept.h"

using namespace specla;
using namespace cudatest;

namespace {

bool quick() {
    const char *q = std::getenv("SPECLA_CUDA_VERIFY_QUICK");
    return q && *q && *q != '0';
}

// The ids of the k most probable tokens of a distribution (lower id first on ties).
std::vector<int32_t> top_ids(const std::vector<float> &p, int32_t k) {
    std::vector<int32_t> ids(p.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
    ids.resize(size_t(k));
    return ids;
}

SamplingConfig config(float t, int32_t k, float p) {
    SamplingConfig c;
    c.temperature = t, c.top_k = k, c.top_p = p;
    return c;
}

}  // namespace

TEST_CASE("cuda accept: sampled acceptance on the device follows the host rule and is lossless") {
    CUDA_TEST_REQUIRE_GPU();
    // A fixed seed (support/stats.h): the verdicts are statistical.
    const uint64_t seed = test::fixed_seed(0xacce97);
    MESSAGE("device acceptance: seed " << seed);
    std::mt19937_64 g(seed);
    const Shape shape{"tiny", 64, 1, 2, 2, 16, 16, 128, 40};
    const ModelConfig c = make_config(shape);
    const int32_t V = c.vocab_size;
    const ModelWeights w = random_weights(c, g(), WeightType::BF16);
    auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions());
    SessionLimits lim;
    lim.max_batch_tokens = 16, lim.max_tree_nodes = 16;
    auto base = gpu->create_state(lim), st = gpu->create_state(lim);
    const std::vector<int32_t> prompt = {3, 17, 5, 29, 11};
    gpu->eval_chain(*base, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
    const int32_t pending = 7;

    for (const SamplingConfig &cfg : {config(0.8f, 0, 1.f), config(1.f, 6, 0.9f)}) {
        INFO("T=", cfg.temperature, " top_k=", cfg.top_k, " top_p=", cfg.top_p);
        const std::unique_ptr<RowSampler> rows_sampler = gpu->row_sampler(*st, cfg);
        REQUIRE(rows_sampler != nullptr);
        // The pass's rows: the pending token (the root's logits), then the draft. Children are
        // chosen from the target's own distributions so that some are accepted often: the two
        // most probable tokens at the root and one random token, under the first the two most
        // probable after it.
        auto pass = [&](const std::vector<int32_t> &toks, const std::vector<int32_t> &par) {
            gpu->copy_state(*base, *st);
            std::vector<float> logits(toks.size() * size_t(V));
            VerifyOutputs o;
            o.logits = logits.data();
            gpu->verify_tree(*st, toks.data(), par.data(), int32_t(toks.size()), TreeAlgorithm::Hybrid, o);
            return logits;
        };
        auto dist = [&](const float *row) {
            std::vector<float> p(static_cast<size_t>(V));
            sampling_distribution(row, V, cfg, p.data());
            return p;
        };
        const std::vector<float> p_root = dist(pass({pending}, {-1}).data());
        const auto root_top = top_ids(p_root, 2);
        const int32_t a = root_top[0], b = root_top[1], r = int32_t(g() % uint64_t(V));
        const auto l2 = pass({pending, a, b, r}, {-1, 0, 0, 0});
        const auto a_top = top_ids(dist(l2.data() + size_t(V)), 2);
        // Draft tree (parents -1 = children of the root): a, b, r; a1, a2 under a.
        const std::vector<int32_t> tokens = {a, b, r, a_top[0], a_top[1]}, parents = {-1, -1, -1, 0, 0};
        std::vector<int32_t> rows = {pending};
        std::vector<int32_t> row_parents = {-1};
        for (size_t i = 0; i < tokens.size(); ++i) rows.push_back(tokens[i]), row_parents.push_back(parents[i] + 1);
        const std::vector<float> logits = pass(rows, row_parents);  // the pass the walks read
        DraftTree tree;
        tree.tokens = tokens, tree.parents = parents;
        const std::vector<float> p_a = dist(logits.data() + size_t(V));

        const int trials = quick() ? 4000 : 30000;
        std::vector<int64_t> first(size_t(V), 0), second_after_a(size_t(V), 0);
        int disagree = 0, streams_differ = 0, accepted_a = 0;
        for (int i = 0; i < trials; ++i) {
            const uint64_t s = seed + uint64_t(i) * 7919u;
            Rng dev_rng(s), host_rng(s);
            const AcceptResult dev = accept_sampled_rows(tree, *rows_sampler, V, 0, 1, dev_rng);
            const std::vector<int32_t> &path = dev.path;
            const int32_t bonus = dev.bonus;
            const AcceptResult host = accept_sampled(tree, logits.data(), logits.data() + size_t(V), V, cfg, host_rng);
            disagree += host.path != path || host.bonus != bonus;
            streams_differ += dev_rng.next() != host_rng.next();
            REQUIRE(bonus >= 0);
            REQUIRE(bonus < V);
            const int32_t t0 = path.empty() ? bonus : tokens[size_t(path[0])];
            ++first[size_t(t0)];
            if (!path.empty() && path[0] == 0) {
                ++accepted_a;
                ++second_after_a[size_t(path.size() > 1 ? tokens[size_t(path[1])] : bonus)];
            }
        }
        const test::ChiSquareResult f = test::chi_square_gof(first, std::vector<double>(p_root.begin(), p_root.end()), 10.0);
        const test::ChiSquareResult s2 =
            test::chi_square_gof(second_after_a, std::vector<double>(p_a.begin(), p_a.end()), 10.0);
        MESSAGE("device acceptance, T=" << cfg.temperature << " top_k=" << cfg.top_k << " top_p=" << cfg.top_p << ": "
                                        << trials << " walks, " << disagree << " differ from the host rule, " << streams_differ
                                        << " random streams differ; first token " << f.str() << "; second after the first child ("
                                        << accepted_a << " walks) " << s2.str());
        CHECK(streams_differ == 0);
        CHECK(disagree <= trials / 1000);  // only where a uniform lands within rounding of a threshold
        CHECK(f.impossible == 0);
        CHECK(s2.impossible == 0);
        CHECK(f.p_value > 1e-4);
        CHECK(s2.p_value > 1e-4);
    }
}

#endif  // SPECLA_WITH_CUDA
