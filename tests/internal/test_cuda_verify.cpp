// Speculative verification and commit on the CUDA backend, on random models of several shapes
// (grouped value heads, no conv, no gate, GEMV layouts of 1, 2 and 4 chunks per thread, sizes the
// vectorised kernels do not cover) and random draft trees (chain, star, deep, bushy, single node,
// session-like with one root, random), fresh seeds per run (printed).
//
// What is compared, and how closely:
//   * node logits of the hybrid schedule (and of Auto, which picks it for these trees) vs plain
//     GPU decoding of the node's root path, one token per step: BITWISE equal. Both use the same
//     fp32-activation GEMV reductions, conv taps, recurrent tile arithmetic and norms.
//   * node logits of the parallel WY schedule vs the same: max |a-b| / max |b| <= 1e-3 (the tree
//     recurrence is computed in another order, fp32; observed ~1e-6).
//   * node logits vs the CPU backend holding the same bf16 weights, its prompt also decoded token
//     by token: <= 2e-3 (fp32 on both sides, summation orders differ; as test_cuda_backend.cpp).
//   * device argmax of every node == host argmax (lowest id on ties) of the returned logits: exact.
//   * commit of an accepted path (deferred or not, either schedule), then the states and the next
//     step's logits vs plain decoding of the accepted tokens: bitwise for hybrid, <= 1e-3 for WY.
//   * a deferred commit applied inside the next pass (verification, decoding step, recurrent block,
//     chunk-form block) vs an immediate commit followed by the same pass: bitwise.
// SPECLA_CUDA_VERIFY_QUICK=1 (used under compute-sanitizer) keeps three shapes and smaller trees.
#include "support/random_trees.h"
#include "test_cuda_common.h"

#ifndef SPECLA_WITH_CUDA

TEST_CASE("cuda verify: skipped") { MESSAGE("CUDA verification tests skipped: this build has no CUDA support"); }

#else

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "engine/backend.h"
#include "model/safetensors.h"
#include "model/weights.h"

using namespace specla;
using namespace cudatest;

namespace {

constexpr double kWyTol = 1e-3;
constexpr double kCpuTol = 2e-3;


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

// The shapes a run covers: all, or (quick) one with grouped heads, one without conv and gate, and
// one with the generic GEMV fallback.
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

using test::TreeShape;
using Tree = test::RandomTree;
using test::random_tree;
inline const char *tree_name(TreeShape s) { return test::tree_shape_name(s); }

std::vector<int32_t> random_tokens(std::mt19937_64 &g, int n, int vocab) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto &x : t) x = int32_t(g() % uint64_t(vocab));
    return t;
}

// Token-by-token decoding (the plain decoding path) of `toks`; returns the last step's logits.
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

bool bitwise(const float *a, const float *b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }
bool bitwise(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && bitwise(a.data(), b.data(), a.size());
}

int32_t host_argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return best;
}

struct Verified {
    std::vector<float> logits;
    std::vector<int32_t> argmax;
};

Verified verify(Backend &b, SequenceState &s, const Tree &t, TreeAlgorithm a) {
    Verified v;
    const size_t vocab = size_t(b.config().vocab_size);
    v.logits.assign(size_t(t.size()) * vocab, std::nanf(""));
    v.argmax.assign(size_t(t.size()), -7);
    VerifyOutputs o;
    o.logits = v.logits.data();
    o.argmax = v.argmax.data();
    b.verify_tree(s, t.tokens.data(), t.parents.data(), t.size(), a, o);
    return v;
}

const char *algo_name(TreeAlgorithm a) {
    return a == TreeAlgorithm::Hybrid ? "hybrid" : a == TreeAlgorithm::ParallelWY ? "WY" : "auto";
}

}  // namespace

TEST_CASE("cuda verify: node logits equal plain GPU decoding of each root path (hybrid bitwise) and the CPU") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("verify node logits");
    std::mt19937_64 g(seed);
    for (const Shape &s : shapes()) {
        const ModelConfig c = make_config(s);
        const ModelWeights w = random_weights(c, g(), WeightType::BF16);
        auto cpu = create_cpu_backend(c, w, 2);
        auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions());
        const int32_t vocab = c.vocab_size;
        const auto prompt = random_tokens(g, 6 + int(g() % 6), vocab);
        auto gbase = gpu->create_state(limits()), gver = gpu->create_state(limits()), gdec = gpu->create_state(limits());
        auto cbase = cpu->create_state(limits()), cver = cpu->create_state(limits());
        decode(*gpu, *gbase, prompt);
        decode(*cpu, *cbase, prompt);
        int exact_nodes = 0, nodes = 0, argmax_bad = 0;
        double worst_wy = 0, worst_cpu = 0;
        for (TreeShape ts : {TreeShape::Chain, TreeShape::Star, TreeShape::Deep, TreeShape::Bushy, TreeShape::Single,
                             TreeShape::SessionLike, TreeShape::Random}) {
            const int32_t n = ts == TreeShape::Single ? 1 : int32_t(3 + g() % uint64_t(max_nodes()));
            const Tree t = random_tree(ts, n, vocab, g);
            // Plain decoding of every root path.
            std::vector<std::vector<float>> plain(static_cast<size_t>(n));
            for (int32_t v = 0; v < n; ++v) {
                gpu->copy_state(*gbase, *gdec);
                std::vector<int32_t> toks;
                for (int32_t u : t.path_to(v)) toks.push_back(t.tokens[size_t(u)]);
                plain[size_t(v)] = decode(*gpu, *gdec, toks);
            }
            cpu->copy_state(*cbase, *cver);
            const Verified cv = verify(*cpu, *cver, t, TreeAlgorithm::Hybrid);
            for (TreeAlgorithm a : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY, TreeAlgorithm::Auto}) {
                gpu->copy_state(*gbase, *gver);
                const Verified gv = verify(*gpu, *gver, t, a);
                for (int32_t v = 0; v < n; ++v) {
                    const float *row = gv.logits.data() + size_t(v) * size_t(vocab);
                    INFO(std::string(s.name), ", ", std::string(tree_name(ts)), " tree of ", n, ", ", std::string(algo_name(a)), ", node ", v);
                    if (a == TreeAlgorithm::ParallelWY) {
                        const double e = max_rel(row, plain[size_t(v)].data(), size_t(vocab));
                        worst_wy = std::max(worst_wy, e);
                        CHECK(e <= kWyTol);
                    } else {
                        const bool same = bitwise(row, plain[size_t(v)].data(), size_t(vocab));
                        if (!same) MESSAGE("not bitwise: rel err " << max_rel(row, plain[size_t(v)].data(), size_t(vocab)));
                        CHECK(same);
                        exact_nodes += same;
                        ++nodes;
                    }
                    const double ec = max_rel(row, cv.logits.data() + size_t(v) * size_t(vocab), size_t(vocab));
                    worst_cpu = std::max(worst_cpu, ec);
                    CHECK(ec <= kCpuTol);
                    const int32_t want = host_argmax(row, vocab);
                    argmax_bad += gv.argmax[size_t(v)] != want;
                    CHECK(gv.argmax[size_t(v)] == want);
                }
            }
        }
        MESSAGE(std::string(s.name) << ": hybrid/auto nodes bitwise equal to plain decoding " << exact_nodes << "/" << nodes
                       << "; WY max rel err " << worst_wy << "; vs CPU max rel err " << worst_cpu
                       << "; device argmax mismatches " << argmax_bad);
    }
}

// The hybrid chain kernel stages its nodes' inputs on chip a stage at a time (up to 23 nodes at
// K = 256, 32 at K = 128: launch_tree_chains). Chains longer than a stage, and a tree whose branch-point
// snapshots fall in later stages, against plain decoding: every node's logits and the committed
// state after the longest path, bitwise.
TEST_CASE("cuda verify: chains longer than an on-chip stage equal plain decoding (bitwise)") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("verify long chains");
    std::mt19937_64 g(seed);
    SessionLimits lim = limits();
    lim.max_tree_nodes = 64;
    for (const Shape &s : {kShapes[2], kShapes[5]}) {  // K = 128 and K = 256
        const ModelConfig c = make_config(s);
        const ModelWeights w = random_weights(c, g(), WeightType::BF16);
        auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions());
        const int32_t vocab = c.vocab_size;
        const auto prompt = random_tokens(g, 7, vocab);
        auto base = gpu->create_state(lim), ver = gpu->create_state(lim), dec = gpu->create_state(lim);
        gpu->eval_chain(*base, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
        // A 64-node chain (three stages at K = 256, two at K = 128); a 44-node chain with branches
        // at nodes 2, 20 and 37 (the last snapshot taken in the second stage), each a 6-node chain.
        for (int shape = 0; shape < 2; ++shape) {
            Tree t = random_tree(TreeShape::Chain, shape == 0 ? 64 : 44, vocab, g);
            if (shape == 1)
                for (int32_t at : {2, 20, 37})
                    for (int32_t i = 0; i < 6; ++i) {
                        t.parents.push_back(i == 0 ? at : t.size() - 1);
                        t.tokens.push_back(int32_t(g() % uint64_t(vocab)));
                    }
            const int32_t n = t.size();
            const char *tname = shape == 0 ? "chain" : "chain with branches";
            gpu->copy_state(*base, *ver);
            const Verified gv = verify(*gpu, *ver, t, TreeAlgorithm::Hybrid);
            int32_t deepest = 0, exact = 0;
            for (int32_t v = 0; v < n; ++v) {
                if (t.path_to(v).size() > t.path_to(deepest).size()) deepest = v;
                gpu->copy_state(*base, *dec);
                std::vector<int32_t> toks;
                for (int32_t u : t.path_to(v)) toks.push_back(t.tokens[size_t(u)]);
                const auto plain = decode(*gpu, *dec, toks);
                INFO(std::string(s.name), ", ", std::string(tname), " of ", n, ", node ", v);
                const bool same = bitwise(gv.logits.data() + size_t(v) * size_t(vocab), plain.data(), size_t(vocab));
                CHECK(same);
                exact += same;
            }
            const std::vector<int32_t> path = t.path_to(deepest);
            gpu->commit_path(*ver, path.data(), int32_t(path.size()), /*deferred=*/false);
            gpu->copy_state(*base, *dec);
            std::vector<int32_t> toks;
            for (int32_t u : path) toks.push_back(t.tokens[size_t(u)]);
            decode(*gpu, *dec, toks);
            INFO(std::string(s.name), ", ", std::string(tname), ": commit of ", path.size(), " tokens");
            CHECK(bitwise(all_states(*gpu, *ver), all_states(*gpu, *dec)));
            MESSAGE(std::string(s.name) << ", " << std::string(tname) << " of " << n << " nodes (deepest path "
                                        << path.size() << "): " << exact << "/" << n << " nodes bitwise");
        }
    }
}

// A captured verification pass is keyed by its launch shape (node count, chain-length bound,
// chain slots per wave), not by the tree: trees of one shape replay one graph with their own
// tables. Two trees of one shape (a 5-node chain with a sixth node branching off node 2, or off
// node 0), with fresh tokens each pass, then random trees of two node counts; each verified on a
// fresh copy of one state, every node bitwise equal to plain decoding of its path.
TEST_CASE("cuda verify: a captured pass replays other trees of its launch shape (bitwise)") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("verify graph reuse");
    std::mt19937_64 g(seed);
    for (const Shape &s : {kShapes[1], kShapes[2]}) {
        const ModelConfig c = make_config(s);
        const ModelWeights w = random_weights(c, g(), WeightType::BF16);
        auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions());
        const int32_t vocab = c.vocab_size;
        const auto prompt = random_tokens(g, 5, vocab);
        auto base = gpu->create_state(limits()), ver = gpu->create_state(limits()), dec = gpu->create_state(limits());
        gpu->eval_chain(*base, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
        const auto &counts = dynamic_cast<cuda::CudaSequenceState &>(*ver).pass_launches;
        int exact = 0, nodes = 0;
        auto check_tree = [&](const Tree &t, const std::string &what) {
            gpu->copy_state(*base, *ver);
            const Verified gv = verify(*gpu, *ver, t, TreeAlgorithm::Hybrid);
            for (int32_t v = 0; v < t.size(); ++v) {
                gpu->copy_state(*base, *dec);
                std::vector<int32_t> toks;
                for (int32_t u : t.path_to(v)) toks.push_back(t.tokens[size_t(u)]);
                const auto plain = decode(*gpu, *dec, toks);
                INFO(std::string(s.name), ", ", what, ", node ", v);
                const bool same = bitwise(gv.logits.data() + size_t(v) * size_t(vocab), plain.data(), size_t(vocab));
                CHECK(same);
                exact += same, ++nodes;
            }
        };
        // The first tree four times: its launch shape is captured (for each factor set, which
        // alternates between passes and is part of the key); the other tree's two passes then both
        // replay those graphs with its own tables. Then the same with trees whose waves differ.
        const std::vector<int32_t> branch_at_2 = {-1, 0, 1, 2, 3, 2}, branch_at_0 = {-1, 0, 1, 2, 3, 0};
        auto run = [&](const std::vector<int32_t> &parents, int times, const std::string &name) {
            for (int r = 0; r < times; ++r) {
                Tree t;
                t.parents = parents;
                t.tokens = random_tokens(g, int(parents.size()), vocab);
                check_tree(t, name + ", pass " + std::to_string(r));
            }
        };
        run(branch_at_2, 4, "branch at node 2");
        int64_t replays_before = counts.replays;
        run(branch_at_0, 2, "branch at node 0");
        CHECK(counts.replays - replays_before == 2);
        // A wave's chain slots hold more chains than another tree of the shape has: four leaves off
        // a 5-node chain (four chains in the second wave), then three off a 6-node chain (three in
        // the same four slots; the fourth slot's CTAs exit). The first tree also takes the most
        // branch-point states, so the second does not grow their buffer (which clears the graphs).
        run({-1, 0, 1, 2, 3, 0, 1, 2, 3}, 4, "four leaves off a 5-node chain");
        replays_before = counts.replays;
        run({-1, 0, 1, 2, 3, 4, 1, 2, 3}, 2, "three leaves off a 6-node chain");
        CHECK(counts.replays - replays_before == 2);
        const int trees = quick() ? 8 : 24;
        for (int k = 0; k < trees; ++k) {
            const int32_t n = k % 2 ? 6 : 9;
            check_tree(random_tree(k % 3 ? TreeShape::SessionLike : TreeShape::Random, n, vocab, g),
                       "random tree " + std::to_string(k) + " of " + std::to_string(n) + " nodes");
        }
        MESSAGE(std::string(s.name) << ": " << exact << "/" << nodes << " nodes bitwise; passes: " << counts.replays
                                    << " replayed, " << counts.captures << " captured, " << counts.eager << " eager");
    }
}

TEST_CASE("cuda verify: commit (deferred or not) leaves the state of plain decoding of the accepted tokens") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("verify commit");
    std::mt19937_64 g(seed);
    for (const Shape &s : shapes()) {
        const ModelConfig c = make_config(s);
        const ModelWeights w = random_weights(c, g(), WeightType::BF16);
        // The kernel-per-op step applies the deferred commit (the persistent step's own check is
        // in bench/experiments/persistent_step/test_persistent_step.cpp).
        auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions());
        const int32_t vocab = c.vocab_size;
        const auto prompt = random_tokens(g, 5 + int(g() % 5), vocab);
        auto base = gpu->create_state(limits());
        gpu->eval_chain(*base, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
        for (bool deferred : {false, true}) {
            for (TreeAlgorithm a : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
                auto spec = gpu->create_state(limits()), plain = gpu->create_state(limits());
                gpu->copy_state(*base, *spec);
                gpu->copy_state(*base, *plain);
                int accepted = 0;
                for (int round = 0; round < (quick() ? 3 : 5); ++round) {
                    const TreeShape ts = round % 2 ? TreeShape::SessionLike : TreeShape(g() % 7);
                    const int32_t n = ts == TreeShape::Single ? 1 : int32_t(2 + g() % uint64_t(max_nodes() - 2));
                    const Tree t = random_tree(ts, n, vocab, g);
                    std::vector<int32_t> am(static_cast<size_t>(n));
                    VerifyOutputs o;
                    o.argmax = am.data();
                    gpu->verify_tree(*spec, t.tokens.data(), t.parents.data(), n, a, o);
                    const int32_t leaf = int32_t(g() % uint64_t(n + 1)) - 1;  // -1: nothing accepted
                    const std::vector<int32_t> path = leaf < 0 ? std::vector<int32_t>{} : t.path_to(leaf);
                    gpu->commit_path(*spec, path.data(), int32_t(path.size()), deferred);
                    std::vector<int32_t> toks;
                    for (int32_t v : path) toks.push_back(t.tokens[size_t(v)]);
                    if (!toks.empty()) decode(*gpu, *plain, toks);
                    accepted += int(path.size());
                }
                INFO(std::string(s.name), ", deferred ", deferred, ", ",
                     std::string(algo_name(a)), ", ", accepted, " tokens accepted");
                // The next decoding step (the pending factors go into its recurrent kernels).
                const int32_t next = int32_t(g() % uint64_t(vocab));
                const auto la = decode(*gpu, *spec, {next});
                const auto lb = decode(*gpu, *plain, {next});
                const auto sa = all_states(*gpu, *spec), sb = all_states(*gpu, *plain);
                const double el = max_rel(la, lb), es = max_rel(sa, sb);
                MESSAGE(std::string(s.name) << ", "
                                            << std::string(deferred ? "deferred" : "immediate") << " commit, "
                                            << std::string(algo_name(a)) << ": "
                               << accepted << " tokens; next logits rel err " << el << ", states rel err " << es);
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

TEST_CASE("cuda verify: a deferred commit applied inside the next pass equals an immediate commit (bitwise)") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("verify deferred");
    std::mt19937_64 g(seed);
    for (const Shape &s : shapes()) {
        const ModelConfig c = make_config(s);
        const ModelWeights w = random_weights(c, g(), WeightType::BF16);
        auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions());
        const int32_t vocab = c.vocab_size;
        const auto prompt = random_tokens(g, 6, vocab);
        auto base = gpu->create_state(limits(96));
        gpu->eval_chain(*base, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
        // next pass: 0 verification (one root: fused into its chains), 1 verification with two
        // roots (separate commit first), 2 decoding step, 3 recurrent block, 4 chunk-form block.
        for (int next = 0; next < 5; ++next) {
            for (TreeAlgorithm a : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
                auto A = gpu->create_state(limits(96)), B = gpu->create_state(limits(96));
                gpu->copy_state(*base, *A);
                gpu->copy_state(*base, *B);
                const Tree t = random_tree(TreeShape::SessionLike, 12, vocab, g);
                std::vector<int32_t> am(12);
                VerifyOutputs o;
                o.argmax = am.data();
                gpu->verify_tree(*A, t.tokens.data(), t.parents.data(), 12, a, o);
                gpu->verify_tree(*B, t.tokens.data(), t.parents.data(), 12, a, o);
                const auto path = t.path_to(11);
                gpu->commit_path(*A, path.data(), int32_t(path.size()), true);
                gpu->commit_path(*B, path.data(), int32_t(path.size()), false);
                std::vector<float> la, lb;
                if (next <= 1) {
                    const Tree u = random_tree(next == 0 ? TreeShape::SessionLike : TreeShape::Deep, 9, vocab, g);
                    const Verified va = verify(*gpu, *A, u, a), vb = verify(*gpu, *B, u, a);
                    la = va.logits, lb = vb.logits;
                    CHECK(va.argmax == vb.argmax);
                } else {
                    const auto toks = random_tokens(g, next == 2 ? 1 : next == 3 ? 3 : 70, vocab);
                    la.resize(toks.size() * size_t(vocab));
                    lb.resize(toks.size() * size_t(vocab));
                    gpu->eval_chain(*A, toks.data(), int32_t(toks.size()), LogitsRows::All, la.data());
                    gpu->eval_chain(*B, toks.data(), int32_t(toks.size()), LogitsRows::All, lb.data());
                }
                const auto sa = all_states(*gpu, *A), sb = all_states(*gpu, *B);
                INFO(std::string(s.name), ", next pass ", next, ", ", std::string(algo_name(a)));
                if (!bitwise(la, lb) || !bitwise(sa, sb))
                    MESSAGE("differs: logits rel err " << max_rel(la, lb) << ", states " << max_rel(sa, sb));
                CHECK(bitwise(la, lb));
                CHECK(bitwise(sa, sb));
            }
        }
    }
}

TEST_CASE("cuda verify: session memory and the factor buffers") {
    CUDA_TEST_REQUIRE_GPU();
    const ModelConfig c = make_config(kShapes[0]);
    const ModelWeights w = random_weights(c, 5, WeightType::BF16);
    auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions());
    SessionLimits l;
    l.max_tree_nodes = 16;
    l.max_batch_tokens = 16;
    auto st = gpu->create_state(l);
    const SessionMemory m = gpu->session_memory(*st);
    const size_t state = size_t(c.num_layers) * (size_t(c.recurrent_state_floats_per_layer()) +
                                                 size_t(c.conv_cache_floats_per_layer())) * 4;
    CHECK(m.state_bytes >= state);
    CHECK(m.factor_bytes > 0);
    CHECK(m.scratch_bytes > 0);
    MESSAGE("state " << m.state_bytes << " B, factors for 17 nodes " << m.factor_bytes << " B, scratch "
                     << m.scratch_bytes << " B");
    // Verifying more nodes than the session allows is refused.
    std::vector<int32_t> toks(18, 3), par(18);
    for (int i = 0; i < 18; ++i) par[size_t(i)] = i - 1;
    CHECK_THROWS(gpu->verify_tree(*st, toks.data(), par.data(), 18, TreeAlgorithm::Hybrid, VerifyOutputs()));
    // Commit without a verification is refused.
    const int32_t node = 0;
    CHECK_THROWS(gpu->commit_path(*st, &node, 1, true));
}

#endif  // SPECLA_WITH_CUDA
