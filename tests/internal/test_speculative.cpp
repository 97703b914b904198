// Exactness of tree verification and factor commit on the CPU engine, on random models and
// random draft trees (fresh randomness each run; the seed is printed). Tolerances (fp32):
// node logits vs evaluating the node's root path alone, and committed state vs plain decoding
// of the accepted tokens: max |a-b| / max |b| <= 2e-5.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "engine/backend.h"
#include "engine/model.h"
#include "model/weights.h"
#include "session/session.h"
#include "engine/draft_tree.h"
#include "support/random_trees.h"

using namespace specla;

namespace {

constexpr double kTol = 2e-5;

double rel_err(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        d = std::max(d, std::fabs(double(a[i]) - b[i]));
        s = std::max(s, std::fabs(double(b[i])));
    }
    return s > 0 ? d / s : d;
}

ModelConfig small_config(int variant) {
    ModelConfig c;
    c.vocab_size = 97;
    c.hidden_size = 48;
    c.num_layers = 2;
    c.num_heads = 2;
    c.num_v_heads = 2;
    c.head_k_dim = 16;
    c.head_v_dim = 24;
    c.conv_size = 4;
    c.intermediate_size = 64;
    c.norm_eps = 1e-6f;
    switch (variant) {
        case 1:  // grouped value heads, negative eigenvalues, tied embeddings
            c.num_v_heads = 4, c.allow_neg_eigval = true, c.tie_word_embeddings = true, c.head_v_dim = 16;
            break;
        case 2:  // no gate, no short conv
            c.use_gate = false, c.use_short_conv = false, c.num_layers = 3;
            break;
        case 3:  // conv window 2, one head
            c.conv_size = 2, c.num_heads = 1, c.num_v_heads = 1, c.head_k_dim = 32, c.head_v_dim = 32;
            break;
        default: break;
    }
    return c;
}

std::shared_ptr<Model> random_model(int variant, uint64_t seed) {
    ModelOptions o;
    o.n_threads = 2;
    const ModelConfig c = small_config(variant);
    return Model::from_weights(c, random_weights(c, seed, variant % 2 ? WeightType::BF16 : WeightType::F32), o);
}

using Shape = test::TreeShape;

DraftTree random_draft(Shape shape, int32_t n, int32_t vocab, std::mt19937_64 &rng) {
    const test::RandomTree r = test::random_tree(shape, n, vocab, rng);
    DraftTree t;
    t.tokens = r.tokens;
    t.parents = r.parents;
    return t;
}

std::vector<int32_t> path_to(const DraftTree &t, int32_t node) {
    std::vector<int32_t> p;
    for (int32_t v = node; v >= 0; v = t.parents[size_t(v)]) p.push_back(v);
    return {p.rbegin(), p.rend()};
}

std::vector<float> plain_logits(const std::shared_ptr<Model> &m, const std::vector<int32_t> &tokens) {
    SessionLimits lim;
    Session s(m, lim);
    std::vector<float> out(size_t(m->config().vocab_size));
    s.eval(tokens.data(), tokens.size(), LogitsRows::Last, out.data());
    return out;
}

std::vector<float> all_state(Session &s) {
    const ModelConfig &c = s.config();
    const size_t per = size_t(c.recurrent_state_floats_per_layer());
    std::vector<float> out(per * size_t(c.num_layers));
    for (int l = 0; l < c.num_layers; ++l) s.read_state(l, out.data() + per * size_t(l));
    return out;
}

}  // namespace

TEST_CASE("tree verification: every node's logits equal evaluating its root path alone") {
    const uint64_t seed = std::random_device{}();
    std::printf("[test_speculative] node-logits seed %llu\n", (unsigned long long)seed);
    std::mt19937_64 rng(seed);
    for (int variant = 0; variant < 4; ++variant) {
        auto model = random_model(variant, rng());
        const int32_t vocab = model->config().vocab_size;
        for (Shape shape : {Shape::Chain, Shape::Star, Shape::Deep, Shape::Bushy, Shape::Single, Shape::Random}) {
            for (TreeAlgorithm algo : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
                const int32_t n = shape == Shape::Single ? 1 : int32_t(3 + rng() % 14);
                std::vector<int32_t> prompt(size_t(5 + rng() % 9));
                for (auto &t : prompt) t = int32_t(rng() % uint64_t(vocab));
                const DraftTree tree = random_draft(shape, n, vocab, rng);

                SessionLimits lim;
                lim.max_tree_nodes = 32;
                Session s(model, lim);
                std::vector<float> scratch(static_cast<size_t>(vocab));
                s.eval(prompt.data(), prompt.size(), LogitsRows::Last, scratch.data());
                // Half of the cases verify with a pending token leading the pass.
                std::vector<int32_t> base = prompt;
                if (rng() % 2) {
                    const int32_t extra = int32_t(rng() % uint64_t(vocab));
                    s.set_pending(extra);
                    base.push_back(extra);
                }
                std::vector<float> root(static_cast<size_t>(vocab)), nodes(size_t(n) * size_t(vocab));
                Session::VerifyBuffers vb;
                vb.root_logits = root.data(), vb.node_logits = nodes.data();
                s.verify(tree, algo, vb);

                const auto want_root = plain_logits(model, base);
                CHECK(rel_err(root.data(), want_root.data(), size_t(vocab)) <= kTol);
                for (int32_t v = 0; v < n; ++v) {
                    std::vector<int32_t> seq = base;
                    for (int32_t u : path_to(tree, v)) seq.push_back(tree.tokens[size_t(u)]);
                    const auto want = plain_logits(model, seq);
                    const double err = rel_err(nodes.data() + size_t(v) * vocab, want.data(), size_t(vocab));
                    INFO("variant ", variant, " shape ", int(shape), " algo ", int(algo), " node ", v, " err ", err);
                    CHECK(err <= kTol);
                }
            }
        }
    }
}

TEST_CASE("factor commit equals plain decoding of the accepted tokens, deferred or not") {
    const uint64_t seed = std::random_device{}();
    std::printf("[test_speculative] commit seed %llu\n", (unsigned long long)seed);
    std::mt19937_64 rng(seed);
    for (int variant = 0; variant < 4; ++variant) {
        auto model = random_model(variant, rng());
        const ModelConfig &c = model->config();
        const int32_t vocab = c.vocab_size;
        for (bool deferred : {false, true}) {
            for (Shape shape : {Shape::Chain, Shape::Bushy, Shape::Random, Shape::Star}) {
                SessionLimits lim;
                lim.max_tree_nodes = 24;
                Session spec(model, lim), plain(model, lim);
                std::vector<int32_t> prompt(size_t(4 + rng() % 6));
                for (auto &t : prompt) t = int32_t(rng() % uint64_t(vocab));
                std::vector<float> logits(static_cast<size_t>(vocab));
                spec.eval(prompt.data(), prompt.size(), LogitsRows::Last, logits.data());
                plain.eval(prompt.data(), prompt.size(), LogitsRows::Last, logits.data());
                // Several rounds: each verifies a tree, accepts a random root-to-node path.
                for (int round = 0; round < 4; ++round) {
                    const int32_t n = int32_t(2 + rng() % 12);
                    const DraftTree tree = random_draft(shape, n, vocab, rng);
                    std::vector<float> root(static_cast<size_t>(vocab)), nodes(size_t(n) * size_t(vocab));
                    Session::VerifyBuffers vb;
                    vb.root_logits = root.data(), vb.node_logits = nodes.data();
                    spec.verify(tree, rng() % 2 ? TreeAlgorithm::Hybrid : TreeAlgorithm::ParallelWY, vb);
                    const int32_t leaf = int32_t(rng() % uint64_t(n + 1)) - 1;  // -1: accept nothing
                    const std::vector<int32_t> path = leaf < 0 ? std::vector<int32_t>{} : path_to(tree, leaf);
                    const int32_t bonus = int32_t(rng() % uint64_t(vocab));
                    spec.commit(path, bonus, deferred);
                    for (int32_t v : path) {
                        const int32_t t = tree.tokens[size_t(v)];
                        plain.eval(&t, 1, LogitsRows::Last, logits.data());
                    }
                    plain.set_pending(bonus);
                    CHECK(spec.context() == plain.context());
                }
                // The states agree (reading applies pending factors and the pending token).
                const auto a = all_state(spec), b = all_state(plain);
                const double err = rel_err(a.data(), b.data(), a.size());
                INFO("variant ", variant, " deferred ", deferred, " shape ", int(shape), " err ", err);
                CHECK(err <= kTol);
                // And the conv caches: the next token's logits agree.
                const int32_t next = int32_t(rng() % uint64_t(vocab));
                std::vector<float> la(static_cast<size_t>(vocab)), lb(static_cast<size_t>(vocab));
                spec.eval(&next, 1, LogitsRows::Last, la.data());
                plain.eval(&next, 1, LogitsRows::Last, lb.data());
                CHECK(rel_err(la.data(), lb.data(), size_t(vocab)) <= kTol);
            }
        }
    }
}

TEST_CASE("deferred factors are applied inside the next pass, before it reads the state") {
    auto model = random_model(0, 1234);
    const int32_t vocab = model->config().vocab_size;
    SessionLimits lim;
    Session spec(model, lim), plain(model, lim);
    std::vector<int32_t> prompt = {3, 14, 15, 92, 65};
    std::vector<float> l(static_cast<size_t>(vocab));
    spec.eval(prompt.data(), prompt.size(), LogitsRows::Last, l.data());
    plain.eval(prompt.data(), prompt.size(), LogitsRows::Last, l.data());
    std::mt19937_64 rng(7);
    DraftTree chain = random_draft(Shape::Chain, 6, vocab, rng);
    std::vector<float> root(static_cast<size_t>(vocab)), nodes(6 * size_t(vocab));
    Session::VerifyBuffers vb;
    vb.root_logits = root.data(), vb.node_logits = nodes.data();
    spec.verify(chain, TreeAlgorithm::Hybrid, vb);
    spec.commit({0, 1, 2}, 5, /*deferred=*/true);
    for (int i = 0; i < 3; ++i) plain.eval(&chain.tokens[size_t(i)], 1, LogitsRows::Last, l.data());
    plain.set_pending(5);
    // A second verification fuses the pending commit into its pass.
    DraftTree next = random_draft(Shape::Bushy, 7, vocab, rng);
    std::vector<float> r1(static_cast<size_t>(vocab)), n1(7 * size_t(vocab)), r2(static_cast<size_t>(vocab)), n2(7 * size_t(vocab));
    Session::VerifyBuffers b1, b2;
    b1.root_logits = r1.data(), b1.node_logits = n1.data();
    b2.root_logits = r2.data(), b2.node_logits = n2.data();
    spec.verify(next, TreeAlgorithm::Hybrid, b1);
    plain.verify(next, TreeAlgorithm::Hybrid, b2);
    CHECK(rel_err(r1.data(), r2.data(), r1.size()) <= kTol);
    CHECK(rel_err(n1.data(), n2.data(), n1.size()) <= kTol);
}
