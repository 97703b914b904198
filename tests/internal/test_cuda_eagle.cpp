// EAGLE drafter models and the target's features on the CUDA backend (spec/eagle_drafter.md):
// the fixture drafter tests/fixtures/eagle_tiny_a on a CUDA target gdn_tiny_a against the CPU
// drafter holding the same bf16 weights and against the training tool's forward, its head shared
// with the target, and the target's feature rows of eval_chain and verify_tree against the CPU's.
//
// Tolerances, max |gpu - ref| / max |ref| per tensor (the bounds of test_cuda_backend.cpp and
// test_cuda_verify.cpp, for the same reasons):
//   * verification passes (multi-row GEMVs, fp32 activations) and decoding steps vs the CPU backend
//     with the same bf16 weights: 2e-3 (only summation orders differ).
//   * blocks (eval_chain, one row included for a drafter: its rows always take the block path)
//     vs the same: 4e-2 (cuBLAS projections with activations rounded to bf16).
//   * vs the fixture's fp32 forward (the GPU holds its F32 weights rounded to bf16): 5e-2.
//   * the drafter's verification pass after its target backend is gone vs before: bitwise.
//   * fixed-width trees drafted in one device call (Backend::draft_fixed_width, catch-up included)
//     vs caught up by eval_chain and drafted level by level through verify_tree on the same
//     backend: equal trees, bitwise the same top-token rows (the host checks every level's
//     frontier against the device's).
//   * eval_chain's last-row top tokens vs the host's top_tokens of the same logits: equal ids,
//     log-probabilities within 1e-5 relative (a float sum on the device, a double one on the host).
#include "test_cuda_common.h"

#ifndef SPECLA_WITH_CUDA

TEST_CASE("cuda eagle: skipped") { MESSAGE("CUDA EAGLE tests skipped: this build has no CUDA support"); }

#else

#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "engine/backend.h"
#include "model/checkpoint.h"
#include "model/drafter_checkpoint.h"
#include "model/weights.h"
#include "session/session.h"
#include "spec/eagle_drafter.h"
#include "support/fixture.h"
#include "support/fixed_width_cases.h"
#include "support/last_top.h"
#include "support/random_trees.h"

using namespace specla;
using namespace cudatest;

namespace {

constexpr double kVerifyTol = 2e-3;
constexpr double kBlockTol = 4e-2;
constexpr double kFixtureTol = 5e-2;

SessionLimits limits() {
    SessionLimits l;
    l.max_batch_tokens = 64;
    l.max_tree_nodes = 32;
    return l;
}

// The target gdn_tiny_a on both backends (the CPU one with the GPU's bf16 weights) and the
// fixture drafter for each.
struct Models {
    ModelConfig tc;
    std::unique_ptr<Backend> gpu_target, cpu_target, gpu_drafter, cpu_drafter;
    Models() {
        auto ck = Checkpoint::open(test::fixture_dir("gdn_tiny_a"));
        tc = ck->config();
        const ModelWeights w = load_weights(*ck, nullptr);
        gpu_target = create_cuda_backend(tc, w, 0, 0);
        cpu_target = create_cpu_backend(tc, bf16_rounded(w), 2);
        DrafterCheckpoint d = load_drafter_checkpoint(test::fixture_dir("eagle_tiny_a"), tc);
        gpu_drafter = gpu_target->create_drafter_backend(d.config, d.own);
        cpu_drafter = cpu_target->create_drafter_backend(d.config, bf16_rounded(d.own));
    }
};

struct Rows {
    std::vector<float> features, logits;
};

Rows chain(Backend &b, SequenceState &s, const std::vector<int32_t> &toks, const std::vector<float> &in) {
    const size_t D = size_t(b.config().hidden_size), V = size_t(b.config().vocab_size), n = toks.size();
    Rows r{std::vector<float>(n * D), std::vector<float>(n * V)};
    RowFeatures rf;
    rf.in = in.empty() ? nullptr : in.data();
    rf.out = r.features.data();
    b.eval_chain(s, toks.data(), int32_t(n), LogitsRows::All, r.logits.data(), rf);
    return r;
}

Rows verify(Backend &b, SequenceState &s, const std::vector<int32_t> &toks, const std::vector<int32_t> &parents,
            const std::vector<float> &in, int32_t first, TreeAlgorithm alg) {
    const size_t D = size_t(b.config().hidden_size), V = size_t(b.config().vocab_size);
    const size_t m = toks.size() - size_t(first);
    Rows r{std::vector<float>(m * D), std::vector<float>(m * V)};
    VerifyOutputs vo;
    vo.logits = r.logits.data();
    vo.features.in = in.empty() ? nullptr : in.data();
    vo.features.out = r.features.data();
    vo.first_row = first;
    b.verify_tree(s, toks.data(), parents.data(), int32_t(toks.size()), alg, vo);
    return r;
}

// Runs `f`, which must throw specla::Error with `status` and a message containing `named`.
template <typename F>
void expect_error(F f, specla_status status, const std::string &named) {
    try {
        f();
        FAIL_CHECK("no error thrown; expected one naming '" << named << "'");
    } catch (const Error &e) {
        INFO("message: ", e.what());
        CHECK(e.status() == status);
        CHECK(std::string(e.what()).find(named) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("cuda eagle: the drafter on eagle_tiny_a equals the CPU drafter and the fixture, chain and tree") {
    CUDA_TEST_REQUIRE_GPU();
    Models m;
    Backend &gd = *m.gpu_drafter, &cd = *m.cpu_drafter;
    const size_t D = size_t(m.tc.hidden_size);
    test::Expected ex = test::load_expected("eagle_tiny_a");
    const std::vector<int32_t> ctoks = ex.i32("chain.tokens");
    const std::vector<float> cin = ex.f32("chain.features_in");
    const std::vector<float> cfo = ex.f32("chain.features_out"), clo = ex.f32("chain.logits");
    const std::vector<int32_t> ttoks = ex.i32("tree.tokens"), tpar = ex.i32("tree.parents");
    const std::vector<float> tin = ex.f32("tree.features_in");
    const std::vector<float> tfo = ex.f32("tree.features_out"), tlo = ex.f32("tree.logits");
    const size_t nc = ctoks.size(), nt = ttoks.size(), V = size_t(m.tc.vocab_size);

    // The head is the target's device tensors, not a copy.
    auto *gdc = dynamic_cast<cuda::CudaBackend *>(&gd);
    auto *gtc = dynamic_cast<cuda::CudaBackend *>(m.gpu_target.get());
    REQUIRE(gdc != nullptr);
    REQUIRE(gtc != nullptr);
    CHECK(gdc->device_weights().embeddings == gtc->device_weights().embeddings);
    CHECK(gdc->device_weights().lm_head == gtc->device_weights().lm_head);
    CHECK(gdc->device_weights().final_norm == gtc->device_weights().final_norm);
    CHECK(gdc->device_weights().fc != nullptr);
    CHECK(gtc->device_weights().fc == nullptr);
    CHECK(gd.memory_stats().weight_bytes < m.gpu_target->memory_stats().weight_bytes);

    // The chain from a zero state through eval_chain (the block path).
    auto gs = gd.create_state(limits());
    auto cs = cd.create_state(limits());
    const Rows g = chain(gd, *gs, ctoks, cin), c = chain(cd, *cs, ctoks, cin);
    {
        const double ef = max_rel(g.features, c.features), el = max_rel(g.logits, c.logits);
        const double xf = max_rel(g.features, cfo), xl = max_rel(g.logits, clo);
        MESSAGE("drafter chain (block): features vs CPU " << ef << ", logits " << el << "; vs fixture " << xf << ", "
                                                          << xl);
        CHECK(ef <= kBlockTol);
        CHECK(el <= kBlockTol);
        CHECK(xf <= kFixtureTol);
        CHECK(xl <= kFixtureTol);
    }
    // One row per call: still the block path (a drafter has no decoding step), same rows.
    {
        auto s1 = gd.create_state(limits());
        double ef = 0, el = 0;
        for (size_t t = 0; t < nc; ++t) {
            const std::vector<float> in(cin.begin() + long(t * D), cin.begin() + long((t + 1) * D));
            const Rows r = chain(gd, *s1, {ctoks[t]}, in);
            ef = std::max(ef, max_rel(r.features.data(), c.features.data() + t * D, D));
            el = std::max(el, max_rel(r.logits.data(), c.logits.data() + t * V, V));
        }
        MESSAGE("drafter chain (one row per call): features vs CPU " << ef << ", logits " << el);
        CHECK(ef <= kBlockTol);
        CHECK(el <= kBlockTol);
    }
    // The draft tree on the state after the chain, against the fixture (which evaluates it so).
    for (TreeAlgorithm alg : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY})
        for (int32_t first : {0, 3}) {
            const Rows r = verify(gd, *gs, ttoks, tpar, tin, first, alg);
            const double xf = max_rel(r.features.data(), tfo.data() + size_t(first) * D, r.features.size());
            const double xl = max_rel(r.logits.data(), tlo.data() + size_t(first) * V, r.logits.size());
            MESSAGE("drafter tree, algorithm " << int(alg) << ", first row " << first << ": vs fixture features " << xf
                                               << ", logits " << xl);
            CHECK(xf <= kFixtureTol);
            CHECK(xl <= kFixtureTol);
        }

    // The exact comparison: the chain as a verified chain (fp32 GEMV passes) committed on both
    // backends, then the tree on that state.
    std::vector<int32_t> chain_parents(nc), path(nc);
    for (size_t t = 0; t < nc; ++t) chain_parents[t] = int32_t(t) - 1, path[t] = int32_t(t);
    auto gv = gd.create_state(limits());
    auto cv = cd.create_state(limits());
    {
        const Rows a = verify(gd, *gv, ctoks, chain_parents, cin, 0, TreeAlgorithm::Hybrid);
        const Rows b = verify(cd, *cv, ctoks, chain_parents, cin, 0, TreeAlgorithm::Hybrid);
        const double ef = max_rel(a.features, b.features), el = max_rel(a.logits, b.logits);
        MESSAGE("drafter chain (verification pass): features vs CPU " << ef << ", logits " << el);
        CHECK(ef <= kVerifyTol);
        CHECK(el <= kVerifyTol);
        CHECK(max_rel(a.features, cfo) <= kFixtureTol);
        gd.commit_path(*gv, path.data(), int32_t(nc), false);
        cd.commit_path(*cv, path.data(), int32_t(nc), false);
    }
    Rows hybrid;
    for (TreeAlgorithm alg : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY})
        for (int32_t first : {0, 3}) {
            const Rows a = verify(gd, *gv, ttoks, tpar, tin, first, alg);
            const Rows b = verify(cd, *cv, ttoks, tpar, tin, first, TreeAlgorithm::Hybrid);
            const double ef = max_rel(a.features, b.features), el = max_rel(a.logits, b.logits);
            MESSAGE("drafter tree after the verified chain, algorithm " << int(alg) << ", first row " << first
                                                                        << ": features vs CPU " << ef << ", logits " << el);
            CHECK(ef <= kVerifyTol);
            CHECK(el <= kVerifyTol);
            if (alg == TreeAlgorithm::Hybrid && first == 0) hybrid = a;
        }

    // What a drafter cannot do, refused clearly; the state stays usable.
    expect_error([&] { gd.decode_and_sample(*gs, 3, SamplingConfig{}, 0.5, nullptr); }, SPECLA_ERR_UNSUPPORTED,
                 "drafter");
    expect_error([&] { gd.eval_chain(*gs, ctoks.data(), 2, LogitsRows::Last, std::vector<float>(V).data()); },
                 SPECLA_ERR_INTERNAL, "input feature");
    VerifyOutputs no_features;
    expect_error([&] { gd.verify_tree(*gs, ttoks.data(), tpar.data(), int32_t(nt), TreeAlgorithm::Hybrid, no_features); },
                 SPECLA_ERR_INTERNAL, "input feature");
    RowFeatures stray;
    stray.in = cin.data();
    auto ts = m.gpu_target->create_state(limits());
    expect_error([&] { m.gpu_target->eval_chain(*ts, ctoks.data(), 3, LogitsRows::None, nullptr, stray); },
                 SPECLA_ERR_INTERNAL, "not a drafter");

    // The shared head outlives the target's backend: the same pass, bitwise, after it is gone.
    ts.reset();
    m.gpu_target.reset();
    const Rows after = verify(gd, *gv, ttoks, tpar, tin, 0, TreeAlgorithm::Hybrid);
    CHECK(after.features == hybrid.features);
    CHECK(after.logits == hybrid.logits);
}

TEST_CASE("cuda eagle: the target's feature rows of eval_chain and verify_tree equal the CPU's (gdn_tiny_a)") {
    CUDA_TEST_REQUIRE_GPU();
    auto ck = Checkpoint::open(test::fixture_dir("gdn_tiny_a"));
    const ModelConfig c = ck->config();
    const ModelWeights w = load_weights(*ck, nullptr);
    auto gpu = create_cuda_backend(c, w, 0, 0);
    auto cpu = create_cpu_backend(c, bf16_rounded(w), 2);
    const size_t D = size_t(c.hidden_size);
    test::Expected ex = test::load_expected("gdn_tiny_a");
    const std::vector<int32_t> prompt = ex.i32("input_ids");
    const size_t n = prompt.size();

    // A block: every row's features.
    {
        auto gs = gpu->create_state(limits());
        auto cs = cpu->create_state(limits());
        const Rows a = chain(*gpu, *gs, prompt, {}), b = chain(*cpu, *cs, prompt, {});
        const double e = max_rel(a.features, b.features);
        MESSAGE("target block features vs CPU " << e);
        CHECK(e <= kBlockTol);
    }
    // Decoding steps (eval_chain of one row), then a verification with first_row > 0 on that state.
    auto gs = gpu->create_state(limits());
    auto cs = cpu->create_state(limits());
    double es = 0;
    for (size_t t = 0; t + 1 < n; ++t) {
        const Rows a = chain(*gpu, *gs, {prompt[t]}, {}), b = chain(*cpu, *cs, {prompt[t]}, {});
        es = std::max(es, max_rel(a.features, b.features));
    }
    MESSAGE("target step features vs CPU " << es);
    CHECK(es <= kVerifyTol);

    std::mt19937_64 rng(29);
    for (test::TreeShape shape : {test::TreeShape::Chain, test::TreeShape::Random}) {
        test::RandomTree rt = test::random_tree(shape, 12, c.vocab_size, rng);
        // The session's form: the pending token is the single root.
        std::vector<int32_t> toks = {prompt.back()}, parents = {-1};
        for (int32_t v = 0; v < rt.size(); ++v) {
            toks.push_back(rt.tokens[size_t(v)]);
            parents.push_back(rt.parents[size_t(v)] + 1);
        }
        const int32_t rows = int32_t(toks.size());
        const Rows full = verify(*gpu, *gs, toks, parents, {}, 0, TreeAlgorithm::Hybrid);
        for (int32_t first : {1, 6}) {
            const Rows a = verify(*gpu, *gs, toks, parents, {}, first, TreeAlgorithm::Hybrid);
            const Rows b = verify(*cpu, *cs, toks, parents, {}, first, TreeAlgorithm::Hybrid);
            const double e = max_rel(a.features, b.features);
            MESSAGE(test::tree_shape_name(shape) << ", first row " << first << " of " << rows << ": features vs CPU "
                                                 << e);
            CHECK(a.features.size() == size_t(rows - first) * D);
            CHECK(e <= kVerifyTol);
            // The window is the full pass's rows from first_row on.
            CHECK(std::equal(a.features.begin(), a.features.end(), full.features.begin() + long(size_t(first) * D)));
        }
    }
}

TEST_CASE("cuda eagle: eval_chain's last-row top tokens (on the device) are top_tokens of that row's logits") {
    CUDA_TEST_REQUIRE_GPU();
    Models m;
    // 1 token: the target's decoding step; more: blocks (the drafter's rows always are). The
    // device sums the softmax in float, the host in double (the kernel test's bound).
    test::check_last_top_grid(*m.gpu_target, *m.gpu_drafter, 23, 1e-5f);
}

TEST_CASE("cuda eagle: fixed-width trees drafted in one device call equal those drafted level by level") {
    CUDA_TEST_REQUIRE_GPU();
    ModelOptions o;
    o.backend = SPECLA_BACKEND_CUDA;
    const int trees = test::check_fixed_width_one_call_equals_level_by_level(
        Model::load(test::fixture_dir("gdn_tiny_a"), o));
    MESSAGE(trees << " fixed-width trees equal, one device call against level by level");
}

#endif  // SPECLA_WITH_CUDA
