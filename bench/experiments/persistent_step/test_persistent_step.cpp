// The persistent decoding step (an experiment, bench/experiments/persistent_step) against the CUDA
// backend's kernel-per-op step, on random models. Moved here from tests/internal with the step:
//   * decoding steps after a prompt block, graph replays included: logits and every layer's state
//     BITWISE equal to the kernel-per-op step on the same weights (the shapes with 8-aligned sizes
//     run it; at least three of them must);
//   * commit of an accepted path (deferred or not, either schedule), the accepted tokens and the
//     next step decoded by the persistent step: states and next logits vs plain (persistent)
//     decoding of the accepted tokens, bitwise for hybrid, <= 1e-3 for WY; the deferred factors
//     are applied inside the persistent step's recurrent phase.
// SPECLA_CUDA_VERIFY_QUICK=1 keeps three shapes and smaller trees. Fresh seeds per run (printed).
#include "support/random_trees.h"
#include "test_cuda_common.h"

#ifndef SPECLA_WITH_CUDA

TEST_CASE("persistent step: skipped") { MESSAGE("persistent step tests skipped: this build has no CUDA support"); }

#else

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "engine/backend.h"
#include "persistent_step.h"

using namespace specla;
using namespace cudatest;
using specla::experiments::PersistentStep;

namespace {

constexpr double kWyTol = 1e-3;

const Shape kShapes[] = {
    {"tiny-a-like", 128, 2, 2, 2, 32, 64, 384, 512},
    {"grouped, neg eigval, tied", 96, 3, 3, 6, 16, 24, 256, 300, true, true, true, true, 1e-5f},
    {"22m-like", 384, 2, 2, 2, 128, 256, 1024, 1000},
    {"no gate, no conv", 64, 2, 1, 1, 64, 64, 128, 100, false, false},
    {"wide MLP (2 chunks per thread)", 64, 2, 2, 2, 32, 32, 4160, 200},
    {"wider MLP (4 chunks per thread), K 256", 64, 1, 1, 1, 256, 32, 8200, 150},
    {"odd sizes (generic kernels)", 100, 2, 2, 2, 20, 20, 200, 77},
};

bool quick() {
    const char *q = std::getenv("SPECLA_CUDA_VERIFY_QUICK");
    return q && *q && *q != '0';
}

std::vector<Shape> shapes() {
    if (!quick()) return std::vector<Shape>(std::begin(kShapes), std::end(kShapes));
    return {kShapes[1], kShapes[3], kShapes[6]};
}

int32_t max_nodes() { return quick() ? 8 : 18; }

SessionLimits limits(int tokens = 32) {
    SessionLimits l;
    l.max_batch_tokens = tokens;
    l.max_tree_nodes = 24;
    return l;
}

std::vector<int32_t> random_tokens(std::mt19937_64 &g, int n, int vocab) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto &x : t) x = int32_t(g() % uint64_t(vocab));
    return t;
}

// Decoding of `toks` through the persistent step; the last step's logits.
std::vector<float> decode(PersistentStep &p, int32_t vocab, const std::vector<int32_t> &toks) {
    std::vector<float> out(static_cast<size_t>(vocab));
    for (int32_t t : toks) p.step(t, out.data());
    return out;
}

// Decoding of `toks` through the backend's kernel-per-op step; the last step's logits.
std::vector<float> decode(Backend &b, SequenceState &s, const std::vector<int32_t> &toks) {
    std::vector<float> out(size_t(b.config().vocab_size));
    for (int32_t t : toks) b.eval_chain(s, &t, 1, LogitsRows::Last, out.data());
    return out;
}

std::vector<float> all_states(Backend &b, SequenceState &s) {
    const ModelConfig &c = b.config();
    const size_t per = size_t(c.recurrent_state_floats_per_layer());
    std::vector<float> out(per * size_t(c.num_layers));
    for (int l = 0; l < c.num_layers; ++l) b.read_recurrent_state(s, l, out.data() + per * size_t(l));
    return out;
}

bool bitwise(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const char *algo_name(TreeAlgorithm a) { return a == TreeAlgorithm::Hybrid ? "hybrid" : "parallel WY"; }

}  // namespace

TEST_CASE("persistent step: bitwise equal to the kernel-per-op step") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("persistent step");
    std::mt19937_64 g(seed);
    int compared = 0;
    for (const Shape &s : kShapes) {
        const ModelConfig c = make_config(s);
        ModelWeights w = random_weights(c, g(), WeightType::BF16);
        auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions{});
        auto &cb = dynamic_cast<cuda::CudaBackend &>(*gpu);
        if (!PersistentStep::supported(cb)) {
            MESSAGE(std::string(s.name) << ": persistent step not supported");
            continue;
        }
        auto fs = gpu->create_state(limits(64));
        auto ps = gpu->create_state(limits(64));
        PersistentStep fused(cb, *fs);
        // A prompt block first (same kernels on both), then decoding steps: graph replays included.
        const auto prompt = random_tokens(g, 7, c.vocab_size);
        gpu->eval_chain(*fs, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
        gpu->eval_chain(*ps, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
        bool same = true;
        for (int32_t t : random_tokens(g, 10, c.vocab_size)) {
            const auto a = decode(fused, c.vocab_size, {t});
            const auto b = decode(*gpu, *ps, {t});
            same = same && bitwise(a, b);
        }
        same = same && bitwise(all_states(*gpu, *fs), all_states(*gpu, *ps));
        MESSAGE(std::string(s.name) << ": persistent step [" << fused.mode() << "] vs kernel per op ["
                                    << cb.decode_mode(*ps) << "]");
        ++compared;
        CHECK(same);
    }
    CHECK(compared >= 3);  // the shapes with 8-aligned sizes run the persistent step
}

TEST_CASE("persistent step: applies a deferred commit, states of plain decoding of the accepted tokens") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("persistent step commit");
    std::mt19937_64 g(seed);
    for (const Shape &s : shapes()) {
        const ModelConfig c = make_config(s);
        const ModelWeights w = random_weights(c, g(), WeightType::BF16);
        auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions());
        auto &cb = dynamic_cast<cuda::CudaBackend &>(*gpu);
        if (!PersistentStep::supported(cb)) continue;
        const int32_t vocab = c.vocab_size;
        const auto prompt = random_tokens(g, 5 + int(g() % 5), vocab);
        auto base = gpu->create_state(limits());
        gpu->eval_chain(*base, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
        for (bool deferred : {false, true}) {
            for (TreeAlgorithm a : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
                auto spec = gpu->create_state(limits()), plain = gpu->create_state(limits());
                gpu->copy_state(*base, *spec);
                gpu->copy_state(*base, *plain);
                PersistentStep spec_step(cb, *spec), plain_step(cb, *plain);
                int accepted = 0;
                for (int round = 0; round < (quick() ? 3 : 5); ++round) {
                    const test::TreeShape ts = round % 2 ? test::TreeShape::SessionLike : test::TreeShape(g() % 7);
                    const int32_t n = ts == test::TreeShape::Single ? 1 : int32_t(2 + g() % uint64_t(max_nodes() - 2));
                    const test::RandomTree t = test::random_tree(ts, n, vocab, g);
                    std::vector<int32_t> am(static_cast<size_t>(n));
                    VerifyOutputs o;
                    o.argmax = am.data();
                    gpu->verify_tree(*spec, t.tokens.data(), t.parents.data(), n, a, o);
                    const int32_t leaf = int32_t(g() % uint64_t(n + 1)) - 1;  // -1: nothing accepted
                    const std::vector<int32_t> path = leaf < 0 ? std::vector<int32_t>{} : t.path_to(leaf);
                    gpu->commit_path(*spec, path.data(), int32_t(path.size()), deferred);
                    std::vector<int32_t> toks;
                    for (int32_t v : path) toks.push_back(t.tokens[size_t(v)]);
                    if (!toks.empty()) decode(plain_step, vocab, toks);
                    accepted += int(path.size());
                }
                INFO(std::string(s.name), ", deferred ", deferred, ", ", std::string(algo_name(a)), ", ", accepted,
                     " tokens accepted");
                // The next decoding step (the pending factors go into its recurrent phase).
                const int32_t next = int32_t(g() % uint64_t(vocab));
                const auto la = decode(spec_step, vocab, {next});
                const auto lb = decode(plain_step, vocab, {next});
                const auto sa = all_states(*gpu, *spec), sb = all_states(*gpu, *plain);
                const double el = max_rel(la, lb), es = max_rel(sa, sb);
                MESSAGE(std::string(s.name) << " [persistent step], " << std::string(deferred ? "deferred" : "immediate")
                                            << " commit, " << std::string(algo_name(a)) << ": " << accepted
                                            << " tokens; next logits rel err " << el << ", states rel err " << es);
                if (a == TreeAlgorithm::Hybrid) {
                    CHECK(bitwise(la, lb));
                    CHECK(bitwise(sa, sb));
                } else {
                    CHECK(el <= kWyTol);
                    CHECK(es <= kWyTol);
                }
            }
        }
    }
}

#endif  // SPECLA_WITH_CUDA
