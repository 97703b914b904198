// Speculative decoding on the CUDA backend through the public API: greedy speculative output equals
// plain greedy output of the same backend token for token, on both fixtures and on every
// gdn-pycode-22m eval prompt, with deferred commit on and off. The GPU verifies every node with the
// arithmetic of its plain decoding step (see tests/internal/test_cuda_verify.cpp), so equality is
// exact, not up to near-ties. Skipped (with the reason printed) where no CUDA backend is available.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"

namespace {

// Loads `dir` on the CUDA backend; null (and a printed reason) when there is none.
specla_model *load_cuda(const std::string &dir) {
    specla_model_params p = specla_model_default_params();
    p.backend = SPECLA_BACKEND_CUDA;
    specla_model *m = nullptr;
    const specla_status st = specla_model_load(dir.c_str(), &p, &m);
    if (st == SPECLA_ERR_BACKEND_UNAVAILABLE || st == SPECLA_ERR_UNSUPPORTED) {
        MESSAGE("CUDA speculative API test skipped: " << std::string(specla_last_error()));
        return nullptr;
    }
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    return m;
}

struct Model {
    specla_model *m;
    explicit Model(const std::string &dir) : m(load_cuda(dir)) {}
    ~Model() { specla_model_free(m); }
    Model(const Model &) = delete;
    Model &operator=(const Model &) = delete;
};

std::vector<int32_t> speculative(specla_model *m, const std::vector<int32_t> &prompt, test::GenerateParams gp,
                                 bool deferred, specla_tree_algorithm algo, specla_spec_stats *stats) {
    test::SessionHandle s(m);
    specla_drafter *d = nullptr;
    REQUIRE(specla_drafter_create(m, nullptr, &d) == SPECLA_OK);
    test::SpecParams p;
    p.generate = gp;
    p.deferred_commit = deferred;
    p.tree_algorithm = algo;
    std::vector<int32_t> out(size_t(gp.max_tokens));
    size_t n = 0;
    const specla_status st =
        specla_generate_speculative(s.s, d, prompt.data(), prompt.size(), p.get(), out.data(), out.size(), &n, stats);
    specla_drafter_free(d);
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    out.resize(n);
    return out;
}

}  // namespace

TEST_CASE("cuda: greedy speculative generation equals plain greedy generation on the fixtures") {
    for (const char *name : {"gdn_tiny_a", "gdn_tiny_b"}) {
        Model model(test::fixture_dir(name));
        if (!model.m) return;
        test::Expected ex = test::load_expected(name);
        const auto prompt = ex.i32("input_ids");
        test::GenerateParams gp;
        gp.max_tokens = 40;
        gp.stop_at_eos = false;
        test::SessionHandle plain(model.m);
        const auto want = plain.generate(prompt, gp);
        REQUIRE(want.size() == 40u);
        for (bool deferred : {true, false}) {
            for (specla_tree_algorithm algo : {SPECLA_TREE_AUTO, SPECLA_TREE_HYBRID, SPECLA_TREE_PARALLEL_WY}) {
                specla_spec_stats stats = test::info_struct<specla_spec_stats>();
                const auto got = speculative(model.m, prompt, gp, deferred, algo, &stats);
                INFO(name, " deferred ", deferred, " algo ", int(algo));
                if (algo == SPECLA_TREE_PARALLEL_WY) {
                    // WY is exact in exact arithmetic but not bitwise: a near-tie may flip. Reported only.
                    if (got != want) MESSAGE(name << ": WY speculative output differs from plain greedy");
                } else {
                    CHECK(got == want);
                }
                CHECK(stats.generated == 40);
            }
        }
    }
}

TEST_CASE("cuda: greedy speculative generation equals plain greedy on every gdn-pycode-22m eval prompt") {
    Model model(test::models_dir() + "/gdn-pycode-22m");
    if (!model.m) return;
    const auto j = nlohmann::json::parse(test::read_file(test::models_dir() + "/gdn-pycode-22m/eval_prompts.json"));
    const auto &prompts = j.at("prompts");
    REQUIRE(prompts.size() == 80);
    size_t n_prompts = 0, mismatches = 0;
    specla_spec_stats total[2] = {};
    for (const auto &text : prompts) {
        const auto ids = test::tokenize(model.m, text.get<std::string>());
        test::GenerateParams gp;
        gp.max_tokens = 48;
        test::SessionHandle plain(model.m);
        const auto want = plain.generate(ids, gp);
        for (int deferred = 0; deferred < 2; ++deferred) {
            specla_spec_stats stats = test::info_struct<specla_spec_stats>();
            const auto got = speculative(model.m, ids, gp, deferred == 1, SPECLA_TREE_AUTO, &stats);
            INFO("prompt ", n_prompts, " deferred ", deferred);
            if (got != want) ++mismatches;
            CHECK(got == want);
            total[deferred].steps += stats.steps, total[deferred].drafted += stats.drafted;
            total[deferred].accepted += stats.accepted, total[deferred].generated += stats.generated;
        }
        ++n_prompts;
    }
    for (int d = 0; d < 2; ++d)
        std::printf("[speculative cuda] deferred %d: %zu prompts; steps %lld, drafted %lld, accepted %lld, tokens per "
                    "pass %.2f\n",
                    d, n_prompts, (long long)total[d].steps, (long long)total[d].drafted, (long long)total[d].accepted,
                    double(total[d].generated) / double(total[d].steps));
    std::printf("[speculative cuda] %zu mismatches with plain greedy over %zu runs\n", mismatches, 2 * n_prompts);
    CHECK(total[1].accepted > 0);
}
