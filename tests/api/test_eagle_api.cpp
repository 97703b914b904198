// The EAGLE drafter through the public API: greedy speculative output equals plain greedy on
// gdn_tiny_a (with the fixture drafter tests/fixtures/eagle_tiny_a) and on gdn-pycode-22m (with a
// drafter of random weights written here), sampled generation runs, and drafter folders that do
// not fit the model are refused with the status and a message naming the file and field.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "model/safetensors.h"
#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/eagle_cases.h"
#include "support/fixture.h"
#include "support/safetensors_writer.h"

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

specla_drafter_params eagle_params(const std::string &folder) {
    specla_drafter_params p = specla_drafter_default_params();
    p.type = SPECLA_DRAFTER_EAGLE;
    p.path = folder.c_str();
    return p;
}

struct EagleHandle {
    specla_drafter *d = nullptr;
    EagleHandle(specla_model *m, const std::string &folder) {
        const specla_drafter_params params = eagle_params(folder);
        const specla_status st = specla_drafter_create(m, &params, &d);
        INFO(folder, ": ", std::string(specla_last_error()));
        REQUIRE(st == SPECLA_OK);
    }
    ~EagleHandle() { specla_drafter_free(d); }
    EagleHandle(const EagleHandle &) = delete;
    EagleHandle &operator=(const EagleHandle &) = delete;
};

test::StTensor f32_tensor(const std::string &name, std::vector<int64_t> shape, const std::vector<float> &v) {
    test::StTensor t;
    t.name = name, t.dtype = "F32", t.shape = std::move(shape);
    t.data.assign(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(float));
    return t;
}

// A drafter folder of random weights for the checkpoint `target` (its config with one layer plus
// the specla_drafter block; fc and the layer's tensors shaped as the target's layer 0).
void write_random_drafter(const std::string &target, const std::string &dir, uint64_t seed) {
    nlohmann::json cfg = nlohmann::json::parse(test::read_file(target + "/config.json"));
    const int64_t D = cfg.at("hidden_size").get<int64_t>();
    nlohmann::json block = {{"kind", "eagle"},
                            {"format_version", 1},
                            {"feature_layer", -1},
                            {"target_hidden_size", D},
                            {"target_vocab_size", cfg.at("vocab_size")},
                            {"target_num_hidden_layers", cfg.at("num_hidden_layers")}};
    cfg["num_hidden_layers"] = 1;
    cfg["specla_drafter"] = block;
    test::write_file(dir + "/config.json", cfg.dump(2));

    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    auto fill = [&](size_t n, float center, float scale) {
        std::vector<float> v(n);
        for (float &x : v) x = center + scale * u(rng);
        return v;
    };
    std::vector<test::StTensor> out;
    out.push_back(f32_tensor("fc.weight", {D, 2 * D}, fill(size_t(2 * D * D), 0.f, std::sqrt(3.f / float(2 * D)))));
    const auto file = specla::SafetensorsFile::open(target + "/model.safetensors");
    for (const auto &kv : file->tensors()) {
        const std::string &name = kv.first;
        if (name.rfind("model.layers.0.", 0) != 0) continue;
        const std::vector<int64_t> &shape = kv.second.shape;
        size_t n = 1;
        for (int64_t s : shape) n *= size_t(s);
        std::vector<float> v;
        if (name.find("norm") != std::string::npos) v = fill(n, 1.f, 0.1f);
        else if (name.find("A_log") != std::string::npos) v = fill(n, 1.f, 1.f);
        else if (name.find("dt_bias") != std::string::npos) v = fill(n, -2.f, 1.f);
        else if (name.find("conv1d") != std::string::npos) v = fill(n, 0.f, 0.5f);
        else v = fill(n, 0.f, std::sqrt(3.f / float(shape.back())));
        out.push_back(f32_tensor(name, shape, v));
    }
    test::write_safetensors(dir + "/model.safetensors", out);
}

// A copy of the fixture drafter with its config edited and/or a tensor replaced or removed.
struct BadDrafter {
    test::TempDir dir;
    nlohmann::json cfg = nlohmann::json::parse(test::read_file(test::fixture_dir("eagle_tiny_a") + "/config.json"));
    std::vector<test::StTensor> tensors =
        test::read_tensors(test::fixture_dir("eagle_tiny_a") + "/model.safetensors");
    void drop(const std::string &name) {
        tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                     [&](const test::StTensor &t) { return t.name == name; }),
                      tensors.end());
    }
    std::string write(bool with_config = true) {
        if (with_config) test::write_file(dir.file("config.json"), cfg.dump());
        test::write_safetensors(dir.file("model.safetensors"), tensors);
        return dir.path;
    }
};

void expect_refused(specla_model *m, const std::string &folder, specla_status status,
                    const std::vector<std::string> &named) {
    specla_drafter *d = reinterpret_cast<specla_drafter *>(1);
    const specla_drafter_params params = eagle_params(folder);
    const specla_status st = specla_drafter_create(m, &params, &d);
    const std::string msg = specla_last_error();
    INFO("message: ", msg);
    CHECK(st == status);
    CHECK(d == nullptr);
    for (const std::string &s : named) CHECK(msg.find(s) != std::string::npos);
}

}  // namespace

TEST_CASE("EAGLE: greedy speculative output equals plain greedy (gdn_tiny_a, fixture drafter)") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    test::Expected ex = test::load_expected("gdn_tiny_a");
    std::mt19937_64 rng(17);
    std::vector<std::vector<int32_t>> prompts = {ex.i32("input_ids")};
    for (int i = 0; i < 3; ++i) {
        std::vector<int32_t> p(size_t(3 + 11 * i));
        for (int32_t &t : p) t = int32_t(rng() % 512);
        prompts.push_back(p);
    }
    for (const auto &prompt : prompts) {
        test::GenerateParams gp;
        gp.max_tokens = 32;
        gp.stop_at_eos = false;
        test::SessionHandle plain(model.m);
        const auto want = plain.generate(prompt, gp);
        test::for_each_eagle_tree_case(gp, [&](test::SpecParams &p, bool fixed_size) {
            test::SessionHandle s(model.m);
            EagleHandle d(model.m, test::fixture_dir("eagle_tiny_a"));
            specla_spec_stats stats = test::info_struct<specla_spec_stats>();
            INFO("prompt of ", prompt.size(), " tokens");
            CHECK(speculative(s.s, d.d, prompt, p, &stats) == want);
            if (fixed_size) CHECK(stats.drafted > 0);
            int64_t a = 0, b = 0;
            specla_session_n_past(plain.s, &a);
            specla_session_n_past(s.s, &b);
            CHECK(a == b);
        });
    }
    // Sampled generation with the drafter's distributions runs and is reproducible from its seed.
    test::SpecParams p;
    p.generate.max_tokens = 24;
    p.generate.stop_at_eos = false;
    p.generate.sampling.temperature = 0.9f;
    p.generate.sampling.seed = 5;
    p.max_draft_nodes = 8;
    p.tree_size_from_cost = false;
    std::vector<int32_t> first;
    for (int run = 0; run < 2; ++run) {
        test::SessionHandle s(model.m);
        EagleHandle d(model.m, test::fixture_dir("eagle_tiny_a"));
        const auto got = speculative(s.s, d.d, prompts[0], p, nullptr);
        CHECK(got.size() == 24);
        if (run == 0) first = got;
        else CHECK(got == first);
    }
    // Sampled generations build dynamic trees whatever the shape asked: the same draws.
    p.tree_shape = SPECLA_TREE_SHAPE_FIXED_WIDTH;
    test::SessionHandle s(model.m);
    EagleHandle d(model.m, test::fixture_dir("eagle_tiny_a"));
    CHECK(speculative(s.s, d.d, prompts[0], p, nullptr) == first);
}

TEST_CASE("EAGLE: greedy speculative output equals plain greedy on gdn-pycode-22m eval prompts (random drafter)") {
    const std::string target = test::models_dir() + "/gdn-pycode-22m";
    test::ModelHandle model(target);
    test::TempDir dir;
    write_random_drafter(target, dir.path, 20261202);
    EagleHandle d(model.m, dir.path);
    const auto j = nlohmann::json::parse(test::read_file(target + "/eval_prompts.json"));
    const auto &prompts = j.at("prompts");
    size_t checked = 0;
    for (size_t i = 0; i < prompts.size(); i += 10) {  // 8 of the 80, spread over the set
        const auto ids = test::tokenize(model.m, prompts[i].get<std::string>());
        test::GenerateParams gp;
        gp.max_tokens = 24;
        test::SessionHandle plain(model.m);
        const auto want = plain.generate(ids, gp);
        // One drafter for every prompt (it restarts on a new sequence), one session each.
        test::SessionHandle s(model.m);
        test::SpecParams p;
        p.generate = gp;
        p.max_draft_nodes = 8;
        p.max_draft_depth = 4;
        p.tree_size_from_cost = i % 20 == 0;
        specla_spec_stats stats = test::info_struct<specla_spec_stats>();
        INFO("eval prompt ", i);
        CHECK(speculative(s.s, d.d, ids, p, &stats) == want);
        ++checked;
    }
    CHECK(checked == 8);
}

TEST_CASE("EAGLE: drafter folders that do not fit the model are refused with a clear status") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    SUBCASE("missing folder, missing config, missing weights") {
        expect_refused(model.m, test::fixture_dir("no_such_drafter"), SPECLA_ERR_IO, {"no_such_drafter"});
        BadDrafter b;
        expect_refused(model.m, b.write(/*with_config=*/false), SPECLA_ERR_IO, {"config.json"});
        test::TempDir only_config;
        test::write_file(only_config.file("config.json"), b.cfg.dump());
        expect_refused(model.m, only_config.path, SPECLA_ERR_IO, {"model.safetensors"});
    }
    SUBCASE("a target model's folder (no specla_drafter block)") {
        expect_refused(model.m, test::fixture_dir("gdn_tiny_a"), SPECLA_ERR_FORMAT, {"config.json", "specla_drafter"});
    }
    SUBCASE("wrong hidden size") {
        BadDrafter b;
        b.cfg["hidden_size"] = 96;
        expect_refused(model.m, b.write(), SPECLA_ERR_SHAPE, {"'hidden_size' = 96", "128"});
        BadDrafter t;
        t.cfg["specla_drafter"]["target_hidden_size"] = 96;
        expect_refused(model.m, t.write(), SPECLA_ERR_SHAPE, {"specla_drafter.target_hidden_size", "96"});
    }
    SUBCASE("vocabulary mismatch") {
        BadDrafter b;
        b.cfg["vocab_size"] = 500;
        expect_refused(model.m, b.write(), SPECLA_ERR_SHAPE, {"'vocab_size' = 500", "512"});
        BadDrafter t;
        t.cfg["specla_drafter"]["target_vocab_size"] = 1024;
        expect_refused(model.m, t.write(), SPECLA_ERR_SHAPE, {"specla_drafter.target_vocab_size"});
        BadDrafter l;
        l.cfg["specla_drafter"]["target_num_hidden_layers"] = 8;
        expect_refused(model.m, l.write(), SPECLA_ERR_SHAPE, {"specla_drafter.target_num_hidden_layers"});
    }
    SUBCASE("missing tensors, wrong shapes") {
        BadDrafter fc;
        fc.drop("fc.weight");
        expect_refused(model.m, fc.write(), SPECLA_ERR_SHAPE, {"'fc.weight'", "missing"});
        BadDrafter q;
        q.drop("model.layers.0.attn.q_proj.weight");
        expect_refused(model.m, q.write(), SPECLA_ERR_SHAPE, {"'model.layers.0.attn.q_proj.weight'", "missing"});
        BadDrafter shape;
        for (test::StTensor &t : shape.tensors)
            if (t.name == "fc.weight") t.shape = {256, 128};
        expect_refused(model.m, shape.write(), SPECLA_ERR_SHAPE, {"'fc.weight'", "[256, 128]", "[128, 256]"});
    }
    SUBCASE("wrong kind, format version, feature layer, layer count") {
        BadDrafter k;
        k.cfg["specla_drafter"]["kind"] = "medusa";
        expect_refused(model.m, k.write(), SPECLA_ERR_UNSUPPORTED, {"specla_drafter.kind", "medusa"});
        BadDrafter v;
        v.cfg["specla_drafter"]["format_version"] = 2;
        expect_refused(model.m, v.write(), SPECLA_ERR_UNSUPPORTED, {"specla_drafter.format_version"});
        BadDrafter f;
        f.cfg["specla_drafter"]["feature_layer"] = 1;
        expect_refused(model.m, f.write(), SPECLA_ERR_UNSUPPORTED, {"specla_drafter.feature_layer"});
        BadDrafter missing;
        missing.cfg["specla_drafter"].erase("kind");
        expect_refused(model.m, missing.write(), SPECLA_ERR_FORMAT, {"specla_drafter.kind", "missing"});
        BadDrafter layers;
        layers.cfg["num_hidden_layers"] = 2;
        expect_refused(model.m, layers.write(), SPECLA_ERR_UNSUPPORTED, {"num_hidden_layers"});
    }
    SUBCASE("a drafter made for another model, or created for another model") {
        test::ModelHandle other(test::fixture_dir("gdn_tiny_b"));
        expect_refused(other.m, test::fixture_dir("eagle_tiny_a"), SPECLA_ERR_SHAPE,
                       {"specla_drafter.target_hidden_size", "another model"});
        // The same drafter folder, created for a second load of the same checkpoint: its
        // sessions are another model's.
        test::ModelHandle twin(test::fixture_dir("gdn_tiny_a"));
        EagleHandle d(twin.m, test::fixture_dir("eagle_tiny_a"));
        test::SessionHandle s(model.m);
        const int32_t prompt[] = {1, 2, 3};
        int32_t out[4];
        size_t n = 0;
        test::SpecParams p;
        p.generate.max_tokens = 4;
        CHECK(specla_generate_speculative(s.s, d.d, prompt, 3, p.get(), out, 4, &n, nullptr) ==
              SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(specla_last_error()).find("another model") != std::string::npos);
    }
    SUBCASE("parameters") {
        specla_drafter_params p = eagle_params("");
        p.path = nullptr;
        specla_drafter *d = nullptr;
        CHECK(specla_drafter_create(model.m, &p, &d) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(specla_last_error()).find("path") != std::string::npos);
        EagleHandle ok(model.m, test::fixture_dir("eagle_tiny_a"));
        test::SessionHandle s(model.m);
        const int32_t prompt[] = {1, 2, 3};
        int32_t out[4];
        size_t n = 0;
        test::SpecParams sp;
        sp.generate.max_tokens = 4;
        sp.tree_top_k = 0;
        CHECK(specla_generate_speculative(s.s, ok.d, prompt, 3, sp.get(), out, 4, &n, nullptr) ==
              SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(specla_last_error()).find("tree_top_k") != std::string::npos);
        sp.tree_top_k = SPECLA_LIMIT_DRAFT_TOP_K + 1;
        CHECK(specla_generate_speculative(s.s, ok.d, prompt, 3, sp.get(), out, 4, &n, nullptr) ==
              SPECLA_ERR_INVALID_ARGUMENT);
        sp.tree_top_k = 4;
        sp.tree_prune_margin = NAN;
        CHECK(specla_generate_speculative(s.s, ok.d, prompt, 3, sp.get(), out, 4, &n, nullptr) ==
              SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(specla_last_error()).find("tree_prune_margin") != std::string::npos);
        // The model, the session and the drafter stay usable.
        sp.tree_prune_margin = 8.f;
        CHECK(specla_generate_speculative(s.s, ok.d, prompt, 3, sp.get(), out, 4, &n, nullptr) == SPECLA_OK);
        CHECK(n == 4);
    }
}
