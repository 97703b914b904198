// Speculative decoding through the public API: greedy speculative output equals plain greedy
// output token for token (fixtures and every gdn-pycode-22m eval prompt, deferred commit on and
// off, both tree algorithms), and the verification primitive keeps exactly the accepted tokens.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <random>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"

namespace {

std::vector<int32_t> speculative(specla_session *s, specla_drafter *d, const std::vector<int32_t> &prompt,
                                 test::SpecParams p, specla_spec_stats *stats) {
    std::vector<int32_t> out(size_t(p.generate.max_tokens));
    size_t n = 0;
    const specla_status st =
        specla_generate_speculative(s, d, prompt.data(), prompt.size(), p.get(), out.data(), out.size(), &n, stats);
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    out.resize(n);
    return out;
}

}  // namespace

TEST_CASE("greedy speculative generation reproduces the fixtures' greedy tokens") {
    for (const char *name : {"gdn_tiny_a", "gdn_tiny_b"}) {
        test::ModelHandle model(test::fixture_dir(name));
        test::Expected ex = test::load_expected(name);
        const auto prompt = ex.i32("input_ids");
        const auto greedy = ex.i32("greedy_tokens");
        for (bool deferred : {true, false}) {
            for (specla_tree_algorithm algo : {SPECLA_TREE_HYBRID, SPECLA_TREE_PARALLEL_WY}) {
                test::SessionHandle s(model.m);
                test::DrafterHandle d(model.m);
                test::SpecParams p;
                p.generate.max_tokens = int32_t(greedy.size());
                p.generate.stop_at_eos = false;
                p.deferred_commit = deferred;
                p.tree_algorithm = algo;
                specla_spec_stats stats = test::info_struct<specla_spec_stats>();
                INFO(name, " deferred ", deferred, " algo ", int(algo));
                CHECK(speculative(s.s, d.d, prompt, p, &stats) == greedy);
                CHECK(stats.generated == int64_t(greedy.size()));
                CHECK(stats.steps >= 1);
            }
        }
    }
}

TEST_CASE("greedy speculative generation equals plain greedy on every gdn-pycode-22m eval prompt") {
    test::ModelHandle model(test::models_dir() + "/gdn-pycode-22m");
    const auto j = nlohmann::json::parse(test::read_file(test::models_dir() + "/gdn-pycode-22m/eval_prompts.json"));
    const auto &prompts = j.at("prompts");
    REQUIRE(prompts.size() == 80);
    specla_spec_stats total = test::info_struct<specla_spec_stats>();
    size_t n_prompts = 0, mismatches = 0;
    for (const auto &text : prompts) {
        const auto ids = test::tokenize(model.m, text.get<std::string>());
        test::GenerateParams gp;
        gp.max_tokens = 48;
        test::SessionHandle plain(model.m);
        const auto want = plain.generate(ids, gp);
        // Deferred commit on even prompts, off on odd ones: both paths see all kinds of prompts
        // across runs while the suite stays quick.
        const bool deferred = n_prompts % 2 == 0;
        test::SessionHandle s(model.m);
        test::DrafterHandle d(model.m);
        test::SpecParams p;
        p.generate = gp;
        p.deferred_commit = deferred;
        specla_spec_stats stats = test::info_struct<specla_spec_stats>();
        const auto got = speculative(s.s, d.d, ids, p, &stats);
        if (got != want) ++mismatches;
        CHECK(got == want);
        // The sessions hold the same context afterwards.
        int64_t a = 0, b = 0;
        specla_session_n_past(plain.s, &a);
        specla_session_n_past(s.s, &b);
        CHECK(a == b);
        total.steps += stats.steps, total.drafted += stats.drafted, total.accepted += stats.accepted,
            total.generated += stats.generated;
        ++n_prompts;
    }
    std::printf("[speculative] %zu prompts, %zu mismatches; steps %lld, drafted %lld, accepted %lld, "
                "tokens per pass %.2f\n",
                n_prompts, mismatches, (long long)total.steps, (long long)total.drafted, (long long)total.accepted,
                double(total.generated) / double(total.steps));
    CHECK(total.accepted > 0);  // prompt lookup does find repeats in code
}

TEST_CASE("the verification primitive keeps exactly the accepted tokens") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    const int32_t V = model.info().vocab_size;
    test::Expected ex = test::load_expected("gdn_tiny_a");
    const auto prompt = ex.i32("input_ids");
    const auto greedy = ex.i32("greedy_tokens");
    const auto state_floats = size_t(model.info().num_v_heads) * model.info().head_k_dim * model.info().head_v_dim;

    test::SessionHandle s(model.m);
    s.eval(prompt, SPECLA_LOGITS_LAST, V);
    // A tree: the true greedy chain of 4 (nodes 0,2,4,5) with wrong siblings (1,3) interleaved,
    // the last chain token deliberately wrong so that acceptance stops after three.
    const int32_t wrong = (greedy[3] + 1) % V;
    const std::vector<int32_t> tokens = {greedy[0], (greedy[0] + 7) % V, greedy[1], (greedy[1] + 3) % V, greedy[2], wrong};
    const std::vector<int32_t> parents = {-1, -1, 0, 0, 2, 4};
    std::vector<int32_t> accepted(tokens.size());
    size_t n_acc = 0;
    int32_t bonus = -1;
    std::vector<float> node_logits(tokens.size() * size_t(V));
    const specla_status st = specla_session_verify_tree(s.s, tokens.data(), parents.data(), tokens.size(), nullptr,
                                                        nullptr, accepted.data(), &n_acc, &bonus, node_logits.data());
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    REQUIRE(n_acc == 3);
    CHECK(std::vector<int32_t>(accepted.begin(), accepted.begin() + 3) == std::vector<int32_t>{0, 2, 4});
    CHECK(bonus == greedy[3]);
    // Node logits equal plain evaluation of each node's path (nodes 0 and 1 share the root).
    const auto want = ex.f32("greedy_step_logits");
    CHECK(test::max_rel_error(node_logits.data(), want.data(), size_t(V)) <= 2e-5);                      // node 0
    CHECK(test::max_rel_error(node_logits.data() + 2 * V, want.data() + V, size_t(V)) <= 2e-5);          // node 2
    CHECK(test::max_rel_error(node_logits.data() + 4 * V, want.data() + 2 * size_t(V), size_t(V)) <= 2e-5);  // node 4
    // The session now holds prompt + 3 accepted + the pending bonus, and its state equals plain
    // decoding of the same tokens.
    int64_t n_past = 0;
    specla_session_n_past(s.s, &n_past);
    CHECK(n_past == int64_t(prompt.size() + 4));
    test::SessionHandle plain(model.m);
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), greedy.begin(), greedy.begin() + 4);
    plain.eval(seq, SPECLA_LOGITS_NONE, V);
    const auto a = s.state(0, state_floats), b = plain.state(0, state_floats);
    CHECK(test::max_rel_error(a.data(), b.data(), a.size()) <= 2e-5);

    SUBCASE("bad trees are refused and leave the session usable") {
        size_t n = 0;
        int32_t bn = 0;
        std::vector<int32_t> acc(4);
        const std::vector<int32_t> t2 = {1, 2};
        const std::vector<int32_t> bad_parent = {-1, 1};  // not topological
        CHECK(specla_session_verify_tree(s.s, t2.data(), bad_parent.data(), 2, nullptr, nullptr, acc.data(), &n, &bn,
                                         nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(specla_last_error()).find("parent") != std::string::npos);
        const std::vector<int32_t> bad_tok = {1, V};
        const std::vector<int32_t> ok_parent = {-1, 0};
        CHECK(specla_session_verify_tree(s.s, bad_tok.data(), ok_parent.data(), 2, nullptr, nullptr, acc.data(), &n,
                                         &bn, nullptr) == SPECLA_ERR_TOKEN_OUT_OF_RANGE);
        CHECK(specla_session_verify_tree(nullptr, t2.data(), ok_parent.data(), 2, nullptr, nullptr, acc.data(), &n, &bn,
                                         nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
        int64_t after = 0;
        specla_session_n_past(s.s, &after);
        CHECK(after == n_past);
        // Still usable: an empty tree decodes one token (the greedy continuation).
        CHECK(specla_session_verify_tree(s.s, nullptr, nullptr, 0, nullptr, nullptr, nullptr, &n, &bn, nullptr) ==
              SPECLA_OK);
        CHECK(n == 0);
        CHECK(bn == greedy[4]);
    }
}

TEST_CASE("the verification primitive runs the tree algorithm its params name") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    const int32_t V = model.info().vocab_size;
    test::Expected ex = test::load_expected("gdn_tiny_a");
    const auto prompt = ex.i32("input_ids");
    const auto greedy = ex.i32("greedy_tokens");
    // The greedy chain of 3 with a wrong sibling under the root: every algorithm accepts 0, 2, 3.
    const std::vector<int32_t> tokens = {greedy[0], (greedy[0] + 5) % V, greedy[1], greedy[2]};
    const std::vector<int32_t> parents = {-1, -1, 0, 2};
    for (const specla_tree_algorithm algorithm : {SPECLA_TREE_AUTO, SPECLA_TREE_HYBRID, SPECLA_TREE_PARALLEL_WY}) {
        CAPTURE(int(algorithm));
        test::SessionHandle s(model.m);
        s.eval(prompt, SPECLA_LOGITS_NONE, V);
        test::VerifyParams vp;
        vp.tree_algorithm = algorithm;
        std::vector<int32_t> accepted(tokens.size());
        size_t n_acc = 0;
        int32_t bonus = -1;
        REQUIRE(specla_session_verify_tree(s.s, tokens.data(), parents.data(), tokens.size(), nullptr, vp.get(),
                                           accepted.data(), &n_acc, &bonus, nullptr) == SPECLA_OK);
        REQUIRE(n_acc == 3);
        CHECK(std::vector<int32_t>(accepted.begin(), accepted.begin() + 3) == std::vector<int32_t>{0, 2, 3});
        CHECK(bonus == greedy[3]);
    }
    // A value that names no algorithm is refused (it is read, not ignored), the session untouched.
    test::SessionHandle s(model.m);
    s.eval(prompt, SPECLA_LOGITS_NONE, V);
    test::VerifyParams vp;
    vp.tree_algorithm = specla_tree_algorithm(7);
    std::vector<int32_t> accepted(tokens.size());
    size_t n_acc = 0;
    int32_t bonus = -1;
    CHECK(specla_session_verify_tree(s.s, tokens.data(), parents.data(), tokens.size(), nullptr, vp.get(),
                                     accepted.data(), &n_acc, &bonus, nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("tree algorithm") != std::string::npos);
    int64_t n_past = 0;
    specla_session_n_past(s.s, &n_past);
    CHECK(n_past == int64_t(prompt.size()));
}

TEST_CASE("speculative API argument errors") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_b"));
    test::ModelHandle other(test::fixture_dir("gdn_tiny_a"));
    test::SessionHandle s(model.m);
    specla_drafter *d = nullptr;
    CHECK(specla_drafter_create(nullptr, nullptr, &d) == SPECLA_ERR_INVALID_ARGUMENT);
    specla_drafter_params bad = specla_drafter_default_params();
    bad.min_ngram = 5, bad.max_ngram = 2;
    CHECK(specla_drafter_create(model.m, &bad, &d) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(d == nullptr);
    test::DrafterHandle wrong_model(other.m);
    const int32_t prompt[] = {1, 2, 3};
    int32_t out[8];
    size_t n = 0;
    test::SpecParams p;
    p.generate.max_tokens = 8;
    CHECK(specla_generate_speculative(s.s, wrong_model.d, prompt, 3, p.get(), out, 8, &n, nullptr) ==
          SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(specla_generate_speculative(s.s, nullptr, prompt, 3, p.get(), out, 8, &n, nullptr) ==
          SPECLA_ERR_INVALID_ARGUMENT);
    test::DrafterHandle good(model.m);
    CHECK(specla_generate_speculative(s.s, good.d, prompt, 3, p.get(), out, 4, &n, nullptr) == SPECLA_ERR_CAPACITY);
    specla_drafter_free(nullptr);
}
