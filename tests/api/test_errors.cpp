// Every bad input the public API can be handed: it must come back as the documented status with a
// message that names what was wrong (the file, field or tensor), never as a crash, and it must
// leave the model and its sessions as they were. Broken checkpoints are made from copies of
// tests/fixtures/gdn_tiny_a in a temporary folder.
//
// Tolerances: a sharded copy must give bit-identical logits (same weights, same code path);
// F16 and BF16 copies are compared with the F32 original by max |a - b| / max |b| over all logits
// of the fixture prompt: <= 5e-3 for F16 (10-bit mantissa) and <= 5e-2 for BF16 (7-bit mantissa).
// "State unchanged" checks replay the same calls on a fresh session and compare logits to 1e-6.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"
#include "support/safetensors_writer.h"

namespace {

using json = nlohmann::json;

constexpr const char *kTiny = "gdn_tiny_a";
constexpr int32_t kTinyVocab = 512;
constexpr double kF16Tol = 5e-3;
constexpr double kBF16Tol = 5e-2;
constexpr double kReplayTol = 1e-6;

bool contains(const std::string &hay, const std::string &needle) { return hay.find(needle) != std::string::npos; }

// Leaves a known message in this thread's last-error slot, so that a check afterwards sees the
// message of the call under test and not a stale one. No call under test produces this message
// (it names a path no test uses).
const std::string &prime_last_error() {
    static const char *kPath = "/nonexistent/specla-primer";
    specla_model *m = nullptr;
    specla_model_load(kPath, nullptr, &m);
    thread_local const std::string primed = specla_last_error();
    REQUIRE(contains(primed, kPath));
    return primed;
}

// The call's status is `want` and its fresh message mentions every needle.
void check_error(specla_status got, specla_status want, std::initializer_list<std::string> needles,
                 const std::string &primed) {
    const std::string msg = specla_last_error();
    const std::string got_name = specla_status_string(got), want_name = specla_status_string(want);
    INFO("status ", got_name, ", wanted ", want_name);
    INFO("message: ", msg);
    // SPECLA_TEST_SHOW_ERRORS=1 prints every message checked, to review their wording.
    if (std::getenv("SPECLA_TEST_SHOW_ERRORS")) std::fprintf(stderr, "[%s] %s\n", got_name.c_str(), msg.c_str());
    CHECK(got == want);
    CHECK_FALSE(msg.empty());
    CHECK(msg != primed);
    for (const std::string &n : needles) {
        INFO("the message should mention '", n, "'");
        CHECK(contains(msg, n));
    }
}

// EXPECT_ERROR(call, status, "needle", ...): the call fails with `status`, with a fresh message
// that mentions every needle.
#define EXPECT_ERROR(call, want, ...)                    \
    do {                                                 \
        const std::string &primed_ = prime_last_error(); \
        const specla_status st_ = (call);                \
        check_error(st_, want, {__VA_ARGS__}, primed_);  \
    } while (0)

// Loading `folder` fails with `want`, leaves *out NULL and names every needle.
void expect_load_fails(const std::string &folder, specla_status want, std::initializer_list<std::string> needles,
                       specla_model_params params = specla_model_default_params()) {
    int dummy = 0;
    specla_model *m = reinterpret_cast<specla_model *>(&dummy);
    const std::string &primed = prime_last_error();
    const specla_status st = specla_model_load(folder.c_str(), &params, &m);
    INFO("loading ", folder);
    check_error(st, want, needles, primed);
    CHECK(m == nullptr);
    if (st == SPECLA_OK) specla_model_free(m);
}

// A writable copy of a fixture's checkpoint (config.json + model.safetensors).
struct CheckpointCopy {
    test::TempDir dir;
    explicit CheckpointCopy(const std::string &fixture = kTiny) {
        test::copy_file(test::fixture_dir(fixture) + "/config.json", config());
        test::copy_file(test::fixture_dir(fixture) + "/model.safetensors", weights());
    }
    const std::string &path() const { return dir.path; }
    std::string config() const { return dir.file("config.json"); }
    std::string weights() const { return dir.file("model.safetensors"); }

    void write_weights(const std::string &bytes) const { test::write_file(weights(), bytes); }
    void write_tensors(const std::vector<test::StTensor> &t) const { test::write_safetensors(weights(), t); }
    void edit_config(const std::function<void(json &)> &edit) const {
        json j = json::parse(test::read_file(config()));
        edit(j);
        test::write_file(config(), j.dump(2));
    }
    // Rewrites the safetensors header through `edit`, keeping the data section as it is.
    void edit_header(const std::function<void(json &)> &edit) const {
        const test::StParts parts = test::split_safetensors(test::read_file(weights()));
        json h = json::parse(parts.header);
        edit(h);
        std::string text = h.dump();
        while (text.size() % 8) text += ' ';
        write_weights(test::frame_safetensors(text, parts.data));
    }
};

test::StTensor *find_tensor(std::vector<test::StTensor> &ts, const std::string &name) {
    for (auto &t : ts)
        if (t.name == name) return &t;
    FAIL("no tensor ", name);
    return nullptr;
}

int64_t n_past(specla_session *s) {
    int64_t n = -1;
    REQUIRE(specla_session_n_past(s, &n) == SPECLA_OK);
    return n;
}

// A model with a session that has consumed some context. Each error test pokes at the API and
// then asks the witness whether the model and the session still compute what a fresh session
// given the same calls computes.
struct Witness {
    test::ModelHandle model{test::fixture_dir(kTiny)};
    test::SessionHandle session{model.m};
    std::vector<std::vector<int32_t>> history{{5, 17, 3, 99, 250}, {7}};

    Witness() {
        for (const auto &block : history) session.eval(block, SPECLA_LOGITS_NONE, kTinyVocab);
    }

    // The witness session continues with one more token; a fresh session replaying the history
    // must agree. The token joins the history so the check can be repeated.
    void check_usable(int32_t next = 42) {
        const auto got = session.eval({next}, SPECLA_LOGITS_LAST, kTinyVocab);
        history.push_back({next});
        test::SessionHandle fresh(model.m);
        std::vector<float> want;
        for (const auto &block : history) want = fresh.eval(block, SPECLA_LOGITS_LAST, kTinyVocab);
        CHECK(test::max_rel_error(got.data(), want.data(), want.size()) <= kReplayTol);
        int64_t a = 0;
        for (const auto &block : history) a += int64_t(block.size());
        CHECK(n_past(session.s) == a);
    }
};

// Logits of every position of the fixture prompt.
std::vector<float> prompt_logits(specla_model *m) {
    const test::Expected ex = test::load_expected(kTiny);
    test::SessionHandle s(m);
    return s.eval(ex.i32("input_ids"), SPECLA_LOGITS_ALL, kTinyVocab);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Checkpoint folders and files
// ------------------------------------------------------------------------------------------------

TEST_CASE("load: missing folder, config.json or weights") {
    Witness w;
    test::TempDir tmp;
    SUBCASE("folder does not exist") {
        expect_load_fails(tmp.file("no-such-model"), SPECLA_ERR_IO, {"no-such-model"});
    }
    SUBCASE("path is a file, not a folder") {
        test::write_file(tmp.file("plain"), "x");
        expect_load_fails(tmp.file("plain"), SPECLA_ERR_IO, {"plain"});
    }
    SUBCASE("empty path") { expect_load_fails("", SPECLA_ERR_INVALID_ARGUMENT, {"folder"}); }
    SUBCASE("no config.json") {
        test::copy_file(test::fixture_dir(kTiny) + "/model.safetensors", tmp.file("model.safetensors"));
        expect_load_fails(tmp.path, SPECLA_ERR_IO, {"config.json"});
    }
    SUBCASE("config.json is a folder") {
        REQUIRE(mkdir(tmp.file("config.json").c_str(), 0755) == 0);
        test::copy_file(test::fixture_dir(kTiny) + "/model.safetensors", tmp.file("model.safetensors"));
        expect_load_fails(tmp.path, SPECLA_ERR_IO, {"config.json"});
    }
    SUBCASE("no model.safetensors") {
        test::copy_file(test::fixture_dir(kTiny) + "/config.json", tmp.file("config.json"));
        expect_load_fails(tmp.path, SPECLA_ERR_IO, {"model.safetensors"});
    }
    SUBCASE("empty model.safetensors") {
        test::copy_file(test::fixture_dir(kTiny) + "/config.json", tmp.file("config.json"));
        test::write_file(tmp.file("model.safetensors"), "");
        expect_load_fails(tmp.path, SPECLA_ERR_FORMAT, {"model.safetensors"});
    }
    w.check_usable();
}

TEST_CASE("load: truncated safetensors") {
    Witness w;
    CheckpointCopy ck;
    const std::string full = test::read_file(ck.weights());
    const size_t header_len = test::split_safetensors(full).header.size();
    const size_t data_begin = 8 + header_len;

    SUBCASE("cut inside the 8-byte length") {
        for (size_t cut : {size_t(0), size_t(1), size_t(4), size_t(7)}) {
            CAPTURE(cut);
            ck.write_weights(full.substr(0, cut));
            expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.safetensors", "truncated"});
        }
    }
    SUBCASE("cut inside the header") {
        for (size_t cut : {size_t(8), size_t(9), size_t(8 + header_len / 2), data_begin - 1}) {
            CAPTURE(cut);
            ck.write_weights(full.substr(0, cut));
            expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.safetensors", "header length"});
        }
    }
    SUBCASE("cut inside the data") {
        for (size_t cut : {data_begin, data_begin + 1, data_begin + 1000, (data_begin + full.size()) / 2,
                           full.size() - 1}) {
            CAPTURE(cut);
            ck.write_weights(full.substr(0, cut));
            // The first tensor (in header order) whose bytes are gone is named.
            expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.safetensors", "tensor '", "truncated"});
        }
    }
    SUBCASE("every cut fails cleanly") {
        for (size_t cut = 0; cut < full.size(); cut += 1 + cut / 3) {
            CAPTURE(cut);
            ck.write_weights(full.substr(0, cut));
            expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.safetensors"});
        }
    }
    w.check_usable();
}

TEST_CASE("load: corrupt safetensors header") {
    Witness w;
    CheckpointCopy ck;
    const test::StParts parts = test::split_safetensors(test::read_file(ck.weights()));
    const std::string &data = parts.data;

    SUBCASE("header is not JSON") {
        std::string garbage(parts.header.size(), '#');
        garbage[0] = '{';
        ck.write_weights(test::frame_safetensors(garbage, data));
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.safetensors", "JSON"});
    }
    SUBCASE("header is JSON but not an object") {
        ck.write_weights(test::frame_safetensors("[1, 2, 3]       ", data));
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.safetensors", "JSON object"});
    }
    SUBCASE("header length larger than the file") {
        const int64_t file_size = int64_t(8 + parts.header.size() + data.size());
        for (int64_t len : {file_size - 7, file_size, file_size * 4, int64_t(1) << 40,
                            std::numeric_limits<int64_t>::max()}) {
            CAPTURE(len);
            ck.write_weights(test::frame_safetensors(parts.header, data, len));
            expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.safetensors", "header length"});
        }
    }
    SUBCASE("header length 0") {
        ck.write_weights(test::frame_safetensors(parts.header, data, 0));
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.safetensors", "header length"});
    }
    SUBCASE("an entry without data_offsets") {
        ck.edit_header([](json &h) { h["model.norm.weight"].erase("data_offsets"); });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "data_offsets"});
    }
    SUBCASE("a negative dimension") {
        ck.edit_header([](json &h) { h["model.norm.weight"]["shape"] = {-128}; });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "shape"});
    }
    SUBCASE("offsets that are not numbers") {
        ck.edit_header([](json &h) { h["model.norm.weight"]["data_offsets"] = {"0", "512"}; });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "data_offsets"});
    }
    SUBCASE("an implausibly large shape") {
        ck.edit_header([](json &h) { h["model.norm.weight"]["shape"] = {int64_t(1) << 40, int64_t(1) << 40}; });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "shape"});
    }
    w.check_usable();
}

TEST_CASE("load: header lying about offsets") {
    Witness w;
    CheckpointCopy ck;
    const size_t data_size = test::split_safetensors(test::read_file(ck.weights())).data.size();

    SUBCASE("end beyond the data section") {
        ck.edit_header([&](json &h) {
            const uint64_t begin = h["model.norm.weight"]["data_offsets"][0].get<uint64_t>();
            h["model.norm.weight"]["data_offsets"] = {begin, data_size + 512};
        });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "data_offsets"});
    }
    SUBCASE("begin after end") {
        ck.edit_header([&](json &h) { h["model.norm.weight"]["data_offsets"] = {512, 0}; });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "data_offsets"});
    }
    SUBCASE("byte size does not match dtype x shape") {
        ck.edit_header([](json &h) { h["model.norm.weight"]["shape"] = {127}; });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "127", "bytes"});
    }
    SUBCASE("byte size does not match the dtype") {
        ck.edit_header([](json &h) { h["model.norm.weight"]["dtype"] = "BF16"; });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "BF16"});
    }
    SUBCASE("overlapping tensors") {
        ck.edit_header([](json &h) {
            // Both are [2] F32 (8 bytes): same size, same place.
            h["model.layers.0.attn.A_log"]["data_offsets"] = h["model.layers.0.attn.dt_bias"]["data_offsets"];
        });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT,
                          {"model.layers.0.attn.A_log", "model.layers.0.attn.dt_bias", "overlap"});
    }
    SUBCASE("partly overlapping tensors") {
        ck.edit_header([](json &h) {
            auto off = h["model.layers.0.attn.dt_bias"]["data_offsets"];
            const uint64_t b = off[0].get<uint64_t>() + 4;
            h["model.layers.0.attn.A_log"]["data_offsets"] = {b, b + 8};
        });
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT,
                          {"model.layers.0.attn.A_log", "model.layers.0.attn.dt_bias", "overlap"});
    }
    w.check_usable();
}

TEST_CASE("load: bytes flipped at random in the header never crash") {
    // Deterministic: the same mutations every run. A mutation may happen to keep the file valid
    // (a digit in the metadata, say); then the load succeeds. Anything else is a clean error.
    CheckpointCopy ck;
    const std::string full = test::read_file(ck.weights());
    const size_t header_end = 8 + test::split_safetensors(full).header.size();
    std::mt19937 rng(1234);
    int failed = 0;
    for (int iter = 0; iter < 200; ++iter) {
        std::string bytes = full;
        const int flips = 1 + int(rng() % 3);
        for (int f = 0; f < flips; ++f) {
            const size_t pos = rng() % header_end;
            bytes[pos] = char(bytes[pos] ^ char(1 + rng() % 255));
        }
        ck.write_weights(bytes);
        specla_model *m = nullptr;
        prime_last_error();
        const specla_status st = specla_model_load(ck.path().c_str(), nullptr, &m);
        CAPTURE(iter);
        if (st == SPECLA_OK) {
            CHECK(m != nullptr);
            specla_model_free(m);
        } else {
            ++failed;
            CHECK(m == nullptr);
            CHECK(std::string(specla_last_error()).size() > 10);
            CHECK((st == SPECLA_ERR_FORMAT || st == SPECLA_ERR_SHAPE || st == SPECLA_ERR_UNSUPPORTED));
        }
    }
    CHECK(failed > 100);
}

TEST_CASE("load: wrong shapes, missing tensors, dtypes") {
    Witness w;
    CheckpointCopy ck;
    std::vector<test::StTensor> ts = test::read_tensors(ck.weights());

    SUBCASE("a vector one element too long") {
        test::StTensor *t = find_tensor(ts, "model.layers.1.attn.o_norm.weight");
        t->shape = {65};
        t->data.append(4, '\0');
        ck.write_tensors(ts);
        expect_load_fails(ck.path(), SPECLA_ERR_SHAPE,
                          {"model.layers.1.attn.o_norm.weight", "[65]", "[64]"});
    }
    SUBCASE("a transposed projection") {
        test::StTensor *t = find_tensor(ts, "model.layers.0.attn.q_proj.weight");
        t->shape = {128, 64};
        ck.write_tensors(ts);
        expect_load_fails(ck.path(), SPECLA_ERR_SHAPE, {"model.layers.0.attn.q_proj.weight", "[128, 64]"});
    }
    SUBCASE("a conv weight with a dimension dropped") {
        test::StTensor *t = find_tensor(ts, "model.layers.0.attn.k_conv1d.weight");
        t->shape = {64, 4};
        ck.write_tensors(ts);
        expect_load_fails(ck.path(), SPECLA_ERR_SHAPE, {"model.layers.0.attn.k_conv1d.weight"});
    }
    SUBCASE("config and weights disagree") {
        ck.edit_config([](json &c) { c["hidden_size"] = 96; });
        expect_load_fails(ck.path(), SPECLA_ERR_SHAPE, {"model.embeddings.weight", "[512, 128]"});
    }
    SUBCASE("a missing layer tensor") {
        ts.erase(ts.begin() + (find_tensor(ts, "model.layers.1.mlp.up_proj.weight") - ts.data()));
        ck.write_tensors(ts);
        expect_load_fails(ck.path(), SPECLA_ERR_SHAPE, {"model.layers.1.mlp.up_proj.weight", "missing"});
    }
    SUBCASE("a missing lm_head") {
        ts.erase(ts.begin() + (find_tensor(ts, "lm_head.weight") - ts.data()));
        ck.write_tensors(ts);
        expect_load_fails(ck.path(), SPECLA_ERR_SHAPE, {"lm_head.weight", "missing"});
    }
    SUBCASE("a layer beyond the file") {
        ck.edit_config([](json &c) { c["num_hidden_layers"] = 3; });
        expect_load_fails(ck.path(), SPECLA_ERR_SHAPE, {"model.layers.2.", "missing"});
    }
    SUBCASE("F8_E4M3 weight: a real dtype this engine does not compute with") {
        test::StTensor *t = find_tensor(ts, "model.layers.0.attn_norm.weight");
        t->dtype = "F8_E4M3";
        t->data.resize(128);  // [128] x 1 byte
        ck.write_tensors(ts);
        expect_load_fails(ck.path(), SPECLA_ERR_UNSUPPORTED, {"model.layers.0.attn_norm.weight", "F8_E4M3"});
    }
    SUBCASE("I32 weight") {
        find_tensor(ts, "model.layers.0.mlp.down_proj.weight")->dtype = "I32";
        ck.write_tensors(ts);
        expect_load_fails(ck.path(), SPECLA_ERR_UNSUPPORTED, {"model.layers.0.mlp.down_proj.weight", "I32"});
    }
    SUBCASE("a made-up dtype") {
        find_tensor(ts, "model.norm.weight")->dtype = "Q3_MAGIC";
        ck.write_tensors(ts);
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"model.norm.weight", "Q3_MAGIC"});
    }
    SUBCASE("an extra tensor the model does not use is ignored") {
        ts.push_back({"model.layers.0.attn.unused_bias", "F32", {4}, std::string(16, '\0')});
        ck.write_tensors(ts);
        test::ModelHandle m(ck.path());
        CHECK(prompt_logits(m.m) == prompt_logits(w.model.m));
    }
    w.check_usable();
}

TEST_CASE("load: invalid or unsupported config.json") {
    Witness w;
    CheckpointCopy ck;

    struct Case {
        const char *what;
        std::function<void(json &)> edit;
        specla_status want;
        const char *field;
    };
    const Case cases[] = {
        {"other model_type", [](json &c) { c["model_type"] = "llama"; }, SPECLA_ERR_UNSUPPORTED, "model_type"},
        {"no model_type", [](json &c) { c.erase("model_type"); }, SPECLA_ERR_FORMAT, "model_type"},
        {"hybrid attention layers",
         [](json &c) { c["attn"] = {{"layers", {1}}, {"num_heads", 2}, {"window_size", nullptr}}; },
         SPECLA_ERR_UNSUPPORTED, "attn"},
        {"attention residual blocks", [](json &c) { c["attnres_block_size"] = 4; }, SPECLA_ERR_UNSUPPORTED,
         "attnres_block_size"},
        {"use_l2warp", [](json &c) { c["use_l2warp"] = true; }, SPECLA_ERR_UNSUPPORTED, "use_l2warp"},
        {"use_l2warp not a bool", [](json &c) { c["use_l2warp"] = "yes"; }, SPECLA_ERR_FORMAT, "use_l2warp"},
        {"other activation", [](json &c) { c["hidden_act"] = "gelu"; }, SPECLA_ERR_UNSUPPORTED, "hidden_act"},
        {"num_v_heads not a multiple of num_heads", [](json &c) { c["num_v_heads"] = 3; }, SPECLA_ERR_FORMAT,
         "num_v_heads"},
        {"expand_v x head_dim not an integer", [](json &c) { c["expand_v"] = 1.3; }, SPECLA_ERR_FORMAT,
         "expand_v"},
        {"negative expand_v", [](json &c) { c["expand_v"] = -2; }, SPECLA_ERR_FORMAT, "expand_v"},
        {"no hidden_size", [](json &c) { c.erase("hidden_size"); }, SPECLA_ERR_FORMAT, "hidden_size"},
        {"hidden_size as a string", [](json &c) { c["hidden_size"] = "128"; }, SPECLA_ERR_FORMAT, "hidden_size"},
        {"fractional head_dim", [](json &c) { c["head_dim"] = 32.5; }, SPECLA_ERR_FORMAT, "head_dim"},
        {"negative vocab_size", [](json &c) { c["vocab_size"] = -5; }, SPECLA_ERR_FORMAT, "vocab_size"},
        {"zero num_heads", [](json &c) { c["num_heads"] = 0; }, SPECLA_ERR_FORMAT, "num_heads"},
        {"huge num_hidden_layers", [](json &c) { c["num_hidden_layers"] = int64_t(1) << 33; }, SPECLA_ERR_FORMAT,
         "num_hidden_layers"},
        {"use_gate not a bool", [](json &c) { c["use_gate"] = 1; }, SPECLA_ERR_FORMAT, "use_gate"},
        {"negative norm_eps", [](json &c) { c["norm_eps"] = -1e-6; }, SPECLA_ERR_FORMAT, "norm_eps"},
        {"eos_token_id not an id", [](json &c) { c["eos_token_id"] = "</s>"; }, SPECLA_ERR_FORMAT, "eos_token_id"},
    };
    SUBCASE("fields") {
        for (const Case &c : cases) {
            const std::string what = c.what;
            CAPTURE(what);
            test::copy_file(test::fixture_dir(kTiny) + "/config.json", ck.config());
            ck.edit_config(c.edit);
            expect_load_fails(ck.path(), c.want, {"config.json", c.field});
        }
    }
    SUBCASE("not JSON") {
        test::write_file(ck.config(), "{\"model_type\": \"gated_deltanet\", ");
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"config.json", "JSON"});
    }
    SUBCASE("JSON but not an object") {
        test::write_file(ck.config(), "[\"gated_deltanet\"]");
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"config.json", "object"});
    }
    SUBCASE("empty file") {
        test::write_file(ck.config(), "");
        expect_load_fails(ck.path(), SPECLA_ERR_FORMAT, {"config.json"});
    }
    w.check_usable();
}

// ------------------------------------------------------------------------------------------------
// Shards and precisions
// ------------------------------------------------------------------------------------------------

TEST_CASE("load: sharded checkpoints") {
    Witness w;
    const std::vector<float> want = prompt_logits(w.model.m);
    const auto tensors = test::read_tensors(test::fixture_dir(kTiny) + "/model.safetensors");
    test::TempDir dir;
    test::copy_file(test::fixture_dir(kTiny) + "/config.json", dir.file("config.json"));

    SUBCASE("two and three shards give the single file's logits exactly") {
        for (int n : {2, 3}) {
            CAPTURE(n);
            for (const auto &f : test::write_shards(dir.path, tensors, n)) {
                CHECK(test::read_tensors(dir.file(f)).size() < tensors.size());
            }
            test::ModelHandle m(dir.path);
            CHECK(m.info().num_parameters == w.model.info().num_parameters);
            CHECK(prompt_logits(m.m) == want);
        }
    }
    SUBCASE("an index naming a missing shard") {
        const auto names = test::write_shards(dir.path, tensors, 2);
        REQUIRE(std::remove(dir.file(names[1]).c_str()) == 0);
        expect_load_fails(dir.path, SPECLA_ERR_IO, {names[1]});
    }
    SUBCASE("an index that is not JSON") {
        test::write_shards(dir.path, tensors, 2);
        test::write_file(dir.file("model.safetensors.index.json"), "{\"weight_map\": {");
        expect_load_fails(dir.path, SPECLA_ERR_FORMAT, {"model.safetensors.index.json"});
    }
    SUBCASE("an index without weight_map") {
        test::write_shards(dir.path, tensors, 2);
        test::write_file(dir.file("model.safetensors.index.json"), "{\"metadata\": {}}");
        expect_load_fails(dir.path, SPECLA_ERR_FORMAT, {"model.safetensors.index.json", "weight_map"});
    }
    SUBCASE("an index pointing outside the folder") {
        test::write_shards(dir.path, tensors, 2);
        test::write_file(dir.file("model.safetensors.index.json"),
                         "{\"weight_map\": {\"lm_head.weight\": \"../model-00001-of-00002.safetensors\"}}");
        expect_load_fails(dir.path, SPECLA_ERR_FORMAT, {"model.safetensors.index.json", "../"});
    }
    SUBCASE("a tensor in two shards") {
        test::write_shards(dir.path, tensors, 2);
        std::vector<test::StTensor> extra = {tensors.front()};
        test::write_safetensors(dir.file("model-00003-of-00002.safetensors"), extra);
        json index = json::parse(test::read_file(dir.file("model.safetensors.index.json")));
        index["weight_map"]["unused.extra"] = "model-00003-of-00002.safetensors";
        test::write_file(dir.file("model.safetensors.index.json"), index.dump());
        expect_load_fails(dir.path, SPECLA_ERR_FORMAT, {tensors.front().name, "more than one shard"});
    }
    SUBCASE("a broken shard is named") {
        const auto names = test::write_shards(dir.path, tensors, 2);
        const std::string bytes = test::read_file(dir.file(names[0]));
        test::write_file(dir.file(names[0]), bytes.substr(0, bytes.size() / 2));
        expect_load_fails(dir.path, SPECLA_ERR_FORMAT, {names[0]});
    }
    w.check_usable();
}

TEST_CASE("load: F16 and BF16 copies of gdn_tiny_a are close to F32") {
    Witness w;
    const std::vector<float> want = prompt_logits(w.model.m);
    const auto tensors = test::read_tensors(test::fixture_dir(kTiny) + "/model.safetensors");
    for (const std::string dtype : {"F16", "BF16"}) {
        CAPTURE(dtype);
        CheckpointCopy ck;
        std::vector<test::StTensor> converted;
        for (const auto &t : tensors) converted.push_back(test::convert_f32(t, dtype));
        ck.write_tensors(converted);
        CHECK(test::read_file(ck.weights()).size() < test::read_file(test::fixture_dir(kTiny) + "/model.safetensors").size() / 2 + 8192);
        test::ModelHandle m(ck.path());
        const std::vector<float> got = prompt_logits(m.m);
        REQUIRE(got.size() == want.size());
        const double err = test::max_rel_error(got.data(), want.data(), want.size());
        const double tol = dtype == "F16" ? kF16Tol : kBF16Tol;
        INFO(dtype, " max rel err ", err, " (tolerance ", tol, ")");
        CHECK(err <= tol);
        CHECK(err > 0);  // the copy really is in lower precision

        // Mixed precisions in one file (BF16 matrices next to F32 vectors, as real checkpoints
        // ship) load too.
        std::vector<test::StTensor> mixed;
        for (const auto &t : tensors) mixed.push_back(t.shape.size() >= 2 ? test::convert_f32(t, dtype) : t);
        ck.write_tensors(mixed);
        test::ModelHandle mm(ck.path());
        const std::vector<float> got_mixed = prompt_logits(mm.m);
        CHECK(test::max_rel_error(got_mixed.data(), want.data(), want.size()) <= tol);
    }
    w.check_usable();
}

// ------------------------------------------------------------------------------------------------
// NULL handles and pointers
// ------------------------------------------------------------------------------------------------

TEST_CASE("NULL handles and pointers are refused, *_free(NULL) is a no-op") {
    Witness w;
    specla_model *m = w.model.m;
    specla_session *s = w.session.s;
    const std::string tiny = test::fixture_dir(kTiny);
    const int32_t tok[] = {1, 2, 3};
    float logits[kTinyVocab];
    int32_t out[8];
    size_t n = 0;

    // No-ops.
    specla_model_free(nullptr);
    specla_session_free(nullptr);
    specla_tokenizer_free(nullptr);
    specla_stream_decoder_free(nullptr);
    specla_string_free(nullptr);
    specla_version_numbers(nullptr, nullptr, nullptr);
    CHECK(specla_version() != nullptr);
    CHECK(specla_abi_version() == SPECLA_ABI_VERSION);
    CHECK(std::string(specla_status_string(static_cast<specla_status>(14))).size() > 0);

    // Model.
    EXPECT_ERROR(specla_model_load(nullptr, nullptr, &m), SPECLA_ERR_INVALID_ARGUMENT, "folder");
    CHECK(m == nullptr);
    m = w.model.m;
    EXPECT_ERROR(specla_model_load(tiny.c_str(), nullptr, nullptr), SPECLA_ERR_INVALID_ARGUMENT, "out");
    specla_model_info info = test::info_struct<specla_model_info>();
    EXPECT_ERROR(specla_model_get_info(nullptr, &info), SPECLA_ERR_INVALID_ARGUMENT, "model");
    EXPECT_ERROR(specla_model_get_info(m, nullptr), SPECLA_ERR_INVALID_ARGUMENT, "out");
    specla_memory_stats ms = test::info_struct<specla_memory_stats>();
    EXPECT_ERROR(specla_model_memory_stats(nullptr, &ms), SPECLA_ERR_INVALID_ARGUMENT, "model");
    EXPECT_ERROR(specla_model_memory_stats(m, nullptr), SPECLA_ERR_INVALID_ARGUMENT, "out");

    // Session.
    specla_session *made = reinterpret_cast<specla_session *>(&n);
    EXPECT_ERROR(specla_session_create(nullptr, nullptr, &made), SPECLA_ERR_INVALID_ARGUMENT, "model");
    CHECK(made == nullptr);
    EXPECT_ERROR(specla_session_create(m, nullptr, nullptr), SPECLA_ERR_INVALID_ARGUMENT, "out");
    EXPECT_ERROR(specla_session_reset(nullptr), SPECLA_ERR_INVALID_ARGUMENT, "session");
    int64_t np = 0;
    EXPECT_ERROR(specla_session_n_past(nullptr, &np), SPECLA_ERR_INVALID_ARGUMENT, "session");
    EXPECT_ERROR(specla_session_n_past(s, nullptr), SPECLA_ERR_INVALID_ARGUMENT, "out");
    EXPECT_ERROR(specla_session_eval(nullptr, tok, 3, SPECLA_LOGITS_LAST, logits, kTinyVocab),
                 SPECLA_ERR_INVALID_ARGUMENT, "session");
    EXPECT_ERROR(specla_session_eval(s, nullptr, 3, SPECLA_LOGITS_LAST, logits, kTinyVocab),
                 SPECLA_ERR_INVALID_ARGUMENT, "tokens");
    EXPECT_ERROR(specla_session_eval(s, tok, 3, SPECLA_LOGITS_LAST, nullptr, kTinyVocab),
                 SPECLA_ERR_INVALID_ARGUMENT, "logits");
    EXPECT_ERROR(specla_session_eval(s, tok, 3, SPECLA_LOGITS_ALL, nullptr, 0), SPECLA_ERR_INVALID_ARGUMENT,
                 "logits");
    std::vector<float> state(size_t(64) * 32 * 2);
    EXPECT_ERROR(specla_session_get_state(nullptr, 0, state.data(), state.size()), SPECLA_ERR_INVALID_ARGUMENT,
                 "session");
    EXPECT_ERROR(specla_session_get_state(s, 0, nullptr, state.size()), SPECLA_ERR_INVALID_ARGUMENT, "out");

    // Generation.
    test::GenerateParams gp;
    gp.max_tokens = 8;
    EXPECT_ERROR(specla_generate(nullptr, tok, 3, gp.get(), out, 8, &n), SPECLA_ERR_INVALID_ARGUMENT, "session");
    EXPECT_ERROR(specla_generate(s, nullptr, 3, gp.get(), out, 8, &n), SPECLA_ERR_INVALID_ARGUMENT, "prompt");
    EXPECT_ERROR(specla_generate(s, tok, 3, gp.get(), nullptr, 8, &n), SPECLA_ERR_INVALID_ARGUMENT, "out_tokens");
    gp.n_stop_strings = 1;  // with stop_strings NULL
    EXPECT_ERROR(specla_generate(s, tok, 3, gp.get(), out, 8, &n), SPECLA_ERR_INVALID_ARGUMENT, "stop_strings");
    gp = test::GenerateParams();
    char *text = reinterpret_cast<char *>(&n);
    EXPECT_ERROR(specla_generate_text(nullptr, "def f():", gp.get(), &text, &n), SPECLA_ERR_INVALID_ARGUMENT,
                 "session");
    CHECK(text == nullptr);
    EXPECT_ERROR(specla_generate_text(s, nullptr, gp.get(), &text, &n), SPECLA_ERR_INVALID_ARGUMENT, "prompt");

    // Tokenizer.
    specla_tokenizer *tk = reinterpret_cast<specla_tokenizer *>(&n);
    EXPECT_ERROR(specla_tokenizer_load(nullptr, &tk), SPECLA_ERR_INVALID_ARGUMENT, "folder");
    CHECK(tk == nullptr);
    EXPECT_ERROR(specla_tokenizer_load(tiny.c_str(), nullptr), SPECLA_ERR_INVALID_ARGUMENT, "out");
    const specla_tokenizer *ctk = nullptr;
    EXPECT_ERROR(specla_model_tokenizer(nullptr, &ctk), SPECLA_ERR_INVALID_ARGUMENT, "model");
    EXPECT_ERROR(specla_model_tokenizer(m, nullptr), SPECLA_ERR_INVALID_ARGUMENT, "out");
    specla_tokenizer_info ti = test::info_struct<specla_tokenizer_info>();
    EXPECT_ERROR(specla_tokenizer_get_info(nullptr, &ti), SPECLA_ERR_INVALID_ARGUMENT, "tokenizer");
    int32_t ids[8];
    char buf[64];
    EXPECT_ERROR(specla_tokenize(nullptr, "x", 1, false, false, ids, 8, &n), SPECLA_ERR_INVALID_ARGUMENT,
                 "tokenizer");
    EXPECT_ERROR(specla_detokenize(nullptr, tok, 3, false, buf, sizeof buf, &n), SPECLA_ERR_INVALID_ARGUMENT,
                 "tokenizer");
    EXPECT_ERROR(specla_token_to_string(nullptr, 1, buf, sizeof buf, &n), SPECLA_ERR_INVALID_ARGUMENT,
                 "tokenizer");
    int32_t id = 0;
    EXPECT_ERROR(specla_token_from_string(nullptr, "x", &id), SPECLA_ERR_INVALID_ARGUMENT, "tokenizer");
    specla_stream_decoder *dec = reinterpret_cast<specla_stream_decoder *>(&n);
    EXPECT_ERROR(specla_stream_decoder_create(nullptr, false, &dec), SPECLA_ERR_INVALID_ARGUMENT, "tokenizer");
    CHECK(dec == nullptr);
    const char *piece = nullptr;
    EXPECT_ERROR(specla_stream_decoder_push(nullptr, 1, &piece), SPECLA_ERR_INVALID_ARGUMENT, "decoder");
    EXPECT_ERROR(specla_stream_decoder_flush(nullptr, &piece), SPECLA_ERR_INVALID_ARGUMENT, "decoder");

    // A model without tokenizer.json: its tokenizer is a state error, not a crash.
    EXPECT_ERROR(specla_model_tokenizer(m, &ctk), SPECLA_ERR_STATE, "tokenizer");
    EXPECT_ERROR(specla_generate_text(s, "def f():", gp.get(), &text, &n), SPECLA_ERR_STATE, "tokenizer");
    const char *stops[] = {"\n"};
    gp.max_tokens = 8;
    gp.stop_strings = stops;
    gp.n_stop_strings = 1;
    EXPECT_ERROR(specla_generate(s, tok, 3, gp.get(), out, 8, &n), SPECLA_ERR_STATE, "tokenizer");

    w.check_usable();
}

// ------------------------------------------------------------------------------------------------
// Tokens, lengths, buffers, parameters
// ------------------------------------------------------------------------------------------------

TEST_CASE("token ids out of range are refused and leave the session unchanged") {
    Witness w;
    specla_session *s = w.session.s;
    const int64_t before = n_past(s);
    float logits[3 * kTinyVocab];

    const std::vector<std::vector<int32_t>> bad = {
        {-1}, {kTinyVocab}, {3, kTinyVocab, 4}, {1, 2, -7}, {std::numeric_limits<int32_t>::min()},
        {std::numeric_limits<int32_t>::max()}};
    for (const auto &b : bad) {
        CAPTURE(b.size());
        EXPECT_ERROR(specla_session_eval(s, b.data(), b.size(), SPECLA_LOGITS_ALL, logits, 3 * kTinyVocab),
                     SPECLA_ERR_TOKEN_OUT_OF_RANGE, "token id", "512");
        EXPECT_ERROR(specla_session_eval(s, b.data(), b.size(), SPECLA_LOGITS_NONE, nullptr, 0),
                     SPECLA_ERR_TOKEN_OUT_OF_RANGE, "token id");
        test::GenerateParams gp;
        gp.max_tokens = 4;
        int32_t out[4];
        size_t n = 99;
        EXPECT_ERROR(specla_generate(s, b.data(), b.size(), gp.get(), out, 4, &n), SPECLA_ERR_TOKEN_OUT_OF_RANGE,
                     "token id");
        CHECK(n == 0);
        CHECK(n_past(s) == before);
    }
    w.check_usable();

    SUBCASE("after a generation (a generated token still pending) too") {
        test::GenerateParams gp;
        gp.max_tokens = 5;
        gp.stop_at_eos = false;
        const auto gen = w.session.generate({8, 9}, gp);
        w.history.push_back({8, 9});
        w.history.push_back({gen.begin(), gen.end()});
        const int64_t mid = n_past(s);
        const int32_t b[] = {kTinyVocab + 1};
        EXPECT_ERROR(specla_session_eval(s, b, 1, SPECLA_LOGITS_LAST, logits, kTinyVocab),
                     SPECLA_ERR_TOKEN_OUT_OF_RANGE, "513");
        CHECK(n_past(s) == mid);
        // The witness's replay feeds the generated ids as one block: the same state.
        w.check_usable(11);
    }
}

TEST_CASE("zero-length input and buffers that are too small") {
    Witness w;
    specla_session *s = w.session.s;
    const int64_t before = n_past(s);
    const int32_t tok[] = {4, 5, 6};
    std::vector<float> logits(3 * kTinyVocab);

    EXPECT_ERROR(specla_session_eval(s, tok, 0, SPECLA_LOGITS_LAST, logits.data(), logits.size()),
                 SPECLA_ERR_INVALID_ARGUMENT, "n_tokens");
    EXPECT_ERROR(specla_session_eval(s, tok, 1, SPECLA_LOGITS_LAST, logits.data(), kTinyVocab - 1),
                 SPECLA_ERR_CAPACITY, "511", "512");
    EXPECT_ERROR(specla_session_eval(s, tok, 3, SPECLA_LOGITS_ALL, logits.data(), 3 * kTinyVocab - 1),
                 SPECLA_ERR_CAPACITY, "1535", "1536");
    EXPECT_ERROR(specla_session_eval(s, tok, 3, SPECLA_LOGITS_ALL, logits.data(), kTinyVocab),
                 SPECLA_ERR_CAPACITY, "1536");
    EXPECT_ERROR(specla_session_eval(s, tok, 1, static_cast<specla_logits_mode>(3), logits.data(), logits.size()),
                 SPECLA_ERR_INVALID_ARGUMENT, "mode");
    CHECK(n_past(s) == before);

    const size_t state_floats = size_t(2) * 32 * 64;  // HV x K x V of gdn_tiny_a
    std::vector<float> state(state_floats);
    EXPECT_ERROR(specla_session_get_state(s, 0, state.data(), state_floats - 1), SPECLA_ERR_CAPACITY,
                 std::to_string(state_floats));
    EXPECT_ERROR(specla_session_get_state(s, -1, state.data(), state_floats), SPECLA_ERR_INVALID_ARGUMENT, "layer");
    EXPECT_ERROR(specla_session_get_state(s, 2, state.data(), state_floats), SPECLA_ERR_INVALID_ARGUMENT, "layer");
    CHECK(specla_session_get_state(s, 1, state.data(), state_floats) == SPECLA_OK);

    test::GenerateParams gp;
    gp.max_tokens = 6;
    int32_t out[6];
    size_t n = 0;
    EXPECT_ERROR(specla_generate(s, tok, 3, gp.get(), out, 5, &n), SPECLA_ERR_CAPACITY, "max_tokens");
    CHECK(n_past(s) == before);
    w.check_usable();

    SUBCASE("an empty prompt on a fresh session has nothing to continue from") {
        test::SessionHandle fresh(w.model.m);
        EXPECT_ERROR(specla_generate(fresh.s, nullptr, 0, gp.get(), out, 6, &n), SPECLA_ERR_STATE, "prompt");
        CHECK(n_past(fresh.s) == 0);
        CHECK(n == 0);
    }
    SUBCASE("an empty prompt continues an existing context") {
        gp.stop_at_eos = false;
        REQUIRE(specla_generate(s, nullptr, 0, gp.get(), out, 6, &n) == SPECLA_OK);
        CHECK(n == 6);
        w.history.push_back({out, out + n});
        w.check_usable();
    }
    SUBCASE("max_tokens 0 evaluates the prompt and generates nothing") {
        gp.max_tokens = 0;
        const int64_t start = n_past(s);
        REQUIRE(specla_generate(s, tok, 3, gp.get(), nullptr, 0, &n) == SPECLA_OK);
        CHECK(n == 0);
        CHECK(n_past(s) == start + 3);
        w.history.push_back({tok, tok + 3});
        w.check_usable();
    }
}

TEST_CASE("invalid parameters are refused") {
    Witness w;
    specla_session *s = w.session.s;
    const std::string tiny = test::fixture_dir(kTiny);
    const int64_t before = n_past(s);

    SUBCASE("model params") {
        specla_model_params p = specla_model_default_params();
        p.n_threads = -1;
        expect_load_fails(tiny, SPECLA_ERR_INVALID_ARGUMENT, {"n_threads"}, p);
        p = specla_model_default_params();
        p.device = -3;
        expect_load_fails(tiny, SPECLA_ERR_INVALID_ARGUMENT, {"device"}, p);
    }
    SUBCASE("session params") {
        for (int32_t bad : {0, -1, 65537}) {
            CAPTURE(bad);
            specla_session_params p = specla_session_default_params();
            p.max_batch_tokens = bad;
            specla_session *made = nullptr;
            EXPECT_ERROR(specla_session_create(w.model.m, &p, &made), SPECLA_ERR_INVALID_ARGUMENT, "max_batch_tokens");
            CHECK(made == nullptr);
            p = specla_session_default_params();
            p.max_tree_nodes = bad == 65537 ? 4097 : bad;
            EXPECT_ERROR(specla_session_create(w.model.m, &p, &made), SPECLA_ERR_INVALID_ARGUMENT, "max_tree_nodes");
            CHECK(made == nullptr);
        }
    }
    SUBCASE("sampling and generation params") {
        const int32_t tok[] = {4, 5, 6};
        int32_t out[8];
        size_t n = 0;
        struct Case {
            const char *what;
            std::function<void(test::GenerateParams &)> edit;
            const char *field;
        };
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const Case cases[] = {
            {"top_p 0", [](test::GenerateParams &g) { g.sampling.top_p = 0.f; }, "top_p"},
            {"top_p > 1", [](test::GenerateParams &g) { g.sampling.top_p = 1.5f; }, "top_p"},
            {"top_p negative", [](test::GenerateParams &g) { g.sampling.top_p = -0.5f; }, "top_p"},
            {"top_p NaN", [&](test::GenerateParams &g) { g.sampling.top_p = nan; }, "top_p"},
            {"negative temperature", [](test::GenerateParams &g) { g.sampling.temperature = -0.5f; }, "temperature"},
            {"NaN temperature", [&](test::GenerateParams &g) { g.sampling.temperature = nan; }, "temperature"},
            {"negative top_k", [](test::GenerateParams &g) { g.sampling.top_k = -1; }, "top_k"},
            {"negative max_tokens", [](test::GenerateParams &g) { g.max_tokens = -1; }, "max_tokens"},
        };
        for (const Case &c : cases) {
            const std::string what = c.what;
            CAPTURE(what);
            test::GenerateParams gp;
            gp.max_tokens = 8;
            c.edit(gp);
            n = 99;
            EXPECT_ERROR(specla_generate(s, tok, 3, gp.get(), out, 8, &n), SPECLA_ERR_INVALID_ARGUMENT, c.field);
            CHECK(n == 0);
            CHECK(n_past(s) == before);
        }
    }
    w.check_usable();
}

TEST_CASE("the CUDA backend is refused where it is not available") {
    const bool gpu_present = [] {
        struct stat st {};
        return stat("/dev/nvidiactl", &st) == 0 || stat("/dev/nvidia0", &st) == 0;
    }();
    if (specla_has_cuda() && gpu_present) {
        MESSAGE("this build has CUDA and the machine has a GPU: the refusal cannot be checked here");
        return;
    }
    specla_model_params p = specla_model_default_params();
    p.backend = SPECLA_BACKEND_CUDA;
    expect_load_fails(test::fixture_dir(kTiny), SPECLA_ERR_BACKEND_UNAVAILABLE, {"CUDA"}, p);
    p.device = 3;
    expect_load_fails(test::fixture_dir(kTiny), SPECLA_ERR_BACKEND_UNAVAILABLE, {"CUDA"}, p);
}

TEST_CASE("a progress callback can abort loading") {
    struct Progress {
        std::vector<float> seen;
        float stop_at = 2.f;  // return false once progress reaches this
        static bool cb(float f, void *ud) {
            auto *p = static_cast<Progress *>(ud);
            p->seen.push_back(f);
            return f < p->stop_at;
        }
    };
    specla_model_params params = specla_model_default_params();
    params.progress_callback = Progress::cb;

    SUBCASE("at the first call") {
        Progress p;
        p.stop_at = 0.f;
        params.progress_user_data = &p;
        expect_load_fails(test::fixture_dir(kTiny), SPECLA_ERR_ABORTED, {"abort"}, params);
        CHECK(p.seen.size() == 1);
    }
    SUBCASE("half way") {
        Progress p;
        p.stop_at = 0.5f;
        params.progress_user_data = &p;
        expect_load_fails(test::fixture_dir(kTiny), SPECLA_ERR_ABORTED, {"abort"}, params);
        REQUIRE(p.seen.size() >= 2);
        CHECK(p.seen.back() >= 0.5f);
        CHECK(p.seen.back() < 1.f);
    }
    SUBCASE("a callback that never stops sees 0 .. 1 in order") {
        Progress p;
        params.progress_user_data = &p;
        test::ModelHandle m(test::fixture_dir(kTiny), params);
        REQUIRE(p.seen.size() >= 2);
        CHECK(p.seen.front() == 0.f);
        CHECK(p.seen.back() == 1.f);
        for (size_t i = 1; i < p.seen.size(); ++i) CHECK(p.seen[i] >= p.seen[i - 1]);
    }
}

// ------------------------------------------------------------------------------------------------
// Threads
// ------------------------------------------------------------------------------------------------

TEST_CASE("the last-error message belongs to the thread") {
    specla_session_reset(nullptr);
    const std::string mine = specla_last_error();
    REQUIRE(contains(mine, "session"));

    std::string other_before, other_after;
    std::thread t([&] {
        other_before = specla_last_error();
        specla_model *m = nullptr;
        specla_model_load("/nonexistent/specla/model", nullptr, &m);
        other_after = specla_last_error();
    });
    t.join();
    CHECK(other_before.empty());
    CHECK(contains(other_after, "/nonexistent/specla/model"));
    CHECK(std::string(specla_last_error()) == mine);

    // Successful calls do not clear it.
    Witness w;
    CHECK(std::string(specla_last_error()) == mine);
}

TEST_CASE("sessions of one model on several threads match a single-threaded run") {
    test::ModelHandle model(test::fixture_dir(kTiny));
    const test::Expected ex = test::load_expected(kTiny);
    const std::vector<int32_t> fixture_prompt = ex.i32("input_ids");
    const std::vector<int32_t> fixture_greedy = ex.i32("greedy_tokens");

    constexpr int kThreads = 4;
    std::vector<std::vector<int32_t>> prompts;
    prompts.push_back(fixture_prompt);
    for (int t = 1; t < kThreads; ++t) {
        std::vector<int32_t> p;
        for (int i = 0; i < 10 + 7 * t; ++i) p.push_back((37 * t + 11 * i * i) % kTinyVocab);
        prompts.push_back(p);
    }
    test::GenerateParams gp;
    gp.max_tokens = int32_t(fixture_greedy.size());
    gp.stop_at_eos = false;

    // Reference: one thread, one session after another.
    std::vector<std::vector<int32_t>> want;
    for (const auto &p : prompts) {
        test::SessionHandle s(model.m);
        want.push_back(s.generate(p, gp));
    }
    CHECK(want[0] == fixture_greedy);

    // All at once, several rounds; each thread also resets and reuses its session.
    std::vector<std::vector<std::vector<int32_t>>> got(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            specla_session *s = nullptr;
            if (specla_session_create(model.m, nullptr, &s) != SPECLA_OK) {
                errors[size_t(t)] = specla_last_error();
                return;
            }
            for (int round = 0; round < 3; ++round) {
                std::vector<int32_t> out(size_t(gp.max_tokens));
                size_t n = 0;
                const auto &p = prompts[size_t(t)];
                if (specla_generate(s, p.data(), p.size(), gp.get(), out.data(), out.size(), &n) != SPECLA_OK) {
                    errors[size_t(t)] = specla_last_error();
                    break;
                }
                out.resize(n);
                got[size_t(t)].push_back(out);
                specla_session_reset(s);
            }
            specla_session_free(s);
        });
    }
    for (auto &th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
        CAPTURE(t);
        CHECK(errors[size_t(t)].empty());
        REQUIRE(got[size_t(t)].size() == 3);
        for (const auto &g : got[size_t(t)]) CHECK(g == want[size_t(t)]);
    }
}

// ------------------------------------------------------------------------------------------------
// Speculative decoding entry points
// ------------------------------------------------------------------------------------------------

TEST_CASE("speculative entry points refuse bad handles, trees and parameters") {
    Witness w;
    specla_model *m = w.model.m;
    specla_session *s = w.session.s;
    const int32_t tok[] = {1, 2, 3};
    int32_t out[8];
    size_t n = 0;

    specla_drafter_free(nullptr);
    specla_drafter *d = reinterpret_cast<specla_drafter *>(&n);
    EXPECT_ERROR(specla_drafter_create(nullptr, nullptr, &d), SPECLA_ERR_INVALID_ARGUMENT, "model");
    CHECK(d == nullptr);
    EXPECT_ERROR(specla_drafter_create(m, nullptr, nullptr), SPECLA_ERR_INVALID_ARGUMENT, "out");
    specla_drafter_params dp = specla_drafter_default_params();
    dp.min_ngram = 0;
    EXPECT_ERROR(specla_drafter_create(m, &dp, &d), SPECLA_ERR_INVALID_ARGUMENT, "min_ngram");
    dp = specla_drafter_default_params();
    dp.max_ngram = dp.min_ngram - 1;
    EXPECT_ERROR(specla_drafter_create(m, &dp, &d), SPECLA_ERR_INVALID_ARGUMENT, "max_ngram");
    dp = specla_drafter_default_params();
    dp.max_draft_len = 0;
    EXPECT_ERROR(specla_drafter_create(m, &dp, &d), SPECLA_ERR_INVALID_ARGUMENT, "max_draft_len");
    CHECK(d == nullptr);

    REQUIRE(specla_drafter_create(m, nullptr, &d) == SPECLA_OK);
    const int64_t before = n_past(s);
    test::SpecParams sp;
    sp.generate.max_tokens = 8;
    sp.generate.stop_at_eos = false;
    EXPECT_ERROR(specla_generate_speculative(nullptr, d, tok, 3, sp.get(), out, 8, &n, nullptr),
                 SPECLA_ERR_INVALID_ARGUMENT, "session");
    EXPECT_ERROR(specla_generate_speculative(s, nullptr, tok, 3, sp.get(), out, 8, &n, nullptr),
                 SPECLA_ERR_INVALID_ARGUMENT, "drafter");
    EXPECT_ERROR(specla_generate_speculative(s, d, nullptr, 3, sp.get(), out, 8, &n, nullptr),
                 SPECLA_ERR_INVALID_ARGUMENT, "prompt");
    EXPECT_ERROR(specla_generate_speculative(s, d, tok, 3, sp.get(), nullptr, 8, &n, nullptr),
                 SPECLA_ERR_INVALID_ARGUMENT, "out_tokens");
    EXPECT_ERROR(specla_generate_speculative(s, d, tok, 3, sp.get(), out, 7, &n, nullptr), SPECLA_ERR_CAPACITY,
                 "max_tokens");
    const int32_t bad[] = {1, kTinyVocab};
    EXPECT_ERROR(specla_generate_speculative(s, d, bad, 2, sp.get(), out, 8, &n, nullptr),
                 SPECLA_ERR_TOKEN_OUT_OF_RANGE, "512");
    test::SpecParams neg = sp;
    neg.max_draft_nodes = -1;
    EXPECT_ERROR(specla_generate_speculative(s, d, tok, 3, neg.get(), out, 8, &n, nullptr), SPECLA_ERR_INVALID_ARGUMENT,
                 "max_draft_nodes");
    for (double gain : {-0.5, std::nan(""), HUGE_VAL}) {
        neg = sp;
        neg.speculation_min_gain = gain;
        EXPECT_ERROR(specla_generate_speculative(s, d, tok, 3, neg.get(), out, 8, &n, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "speculation_min_gain");
    }
    neg = sp;
    neg.generate.sampling.top_p = 2.f;
    EXPECT_ERROR(specla_generate_speculative(s, d, tok, 3, neg.get(), out, 8, &n, nullptr), SPECLA_ERR_INVALID_ARGUMENT,
                 "top_p");
    char *text = reinterpret_cast<char *>(&n);
    EXPECT_ERROR(specla_generate_speculative_text(nullptr, d, "x", sp.get(), &text, &n, nullptr),
                 SPECLA_ERR_INVALID_ARGUMENT, "session");
    CHECK(text == nullptr);
    EXPECT_ERROR(specla_generate_speculative_text(s, d, nullptr, sp.get(), &text, &n, nullptr),
                 SPECLA_ERR_INVALID_ARGUMENT, "prompt");
    EXPECT_ERROR(specla_generate_speculative_text(s, d, "x", sp.get(), &text, &n, nullptr), SPECLA_ERR_STATE,
                 "tokenizer");
    CHECK(n_past(s) == before);

    SUBCASE("a drafter of another model") {
        test::ModelHandle other(test::fixture_dir("gdn_tiny_b"));
        specla_drafter *od = nullptr;
        REQUIRE(specla_drafter_create(other.m, nullptr, &od) == SPECLA_OK);
        EXPECT_ERROR(specla_generate_speculative(s, od, tok, 3, sp.get(), out, 8, &n, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "drafter");
        specla_drafter_free(od);
        CHECK(n_past(s) == before);
    }
    SUBCASE("verify_tree: NULL pointers, malformed trees, out-of-range tokens") {
        const specla_sampling_params greedy = specla_sampling_default_params();
        const int32_t tokens[] = {5, 6, 7};
        const int32_t chain[] = {-1, 0, 1};
        int32_t accepted[3];
        size_t n_acc = 0;
        int32_t bonus = -1;
        EXPECT_ERROR(specla_session_verify_tree(nullptr, tokens, chain, 3, nullptr, test::VerifyParams(greedy).get(),
                                                accepted, &n_acc, &bonus, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "session");
        EXPECT_ERROR(specla_session_verify_tree(s, nullptr, chain, 3, nullptr, test::VerifyParams(greedy).get(),
                                                accepted, &n_acc, &bonus, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "tokens");
        EXPECT_ERROR(specla_session_verify_tree(s, tokens, nullptr, 3, nullptr, test::VerifyParams(greedy).get(),
                                                accepted, &n_acc, &bonus, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "parents");
        EXPECT_ERROR(specla_session_verify_tree(s, tokens, chain, 3, nullptr, test::VerifyParams(greedy).get(), nullptr,
                                                &n_acc, &bonus, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "accepted_nodes");
        EXPECT_ERROR(specla_session_verify_tree(s, tokens, chain, 3, nullptr, test::VerifyParams(greedy).get(),
                                                accepted, nullptr, &bonus, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "n_accepted");
        EXPECT_ERROR(specla_session_verify_tree(s, tokens, chain, 3, nullptr, test::VerifyParams(greedy).get(),
                                                accepted, &n_acc, nullptr, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "bonus_token");
        const int32_t forward[] = {-1, 2, 0};   // a parent after its child
        const int32_t self[] = {-1, 1, 0};      // a node its own parent
        const int32_t below[] = {-2, 0, 1};     // no such parent
        for (const int32_t *parents : {forward, self, below}) {
            EXPECT_ERROR(specla_session_verify_tree(s, tokens, parents, 3, nullptr, test::VerifyParams(greedy).get(),
                                                    accepted, &n_acc, &bonus, nullptr),
                         SPECLA_ERR_INVALID_ARGUMENT, "parent");
        }
        const int32_t bad_tokens[] = {5, kTinyVocab, 7};
        EXPECT_ERROR(specla_session_verify_tree(s, bad_tokens, chain, 3, nullptr, test::VerifyParams(greedy).get(),
                                                accepted, &n_acc, &bonus, nullptr),
                     SPECLA_ERR_TOKEN_OUT_OF_RANGE, "512");
        std::vector<int32_t> big_tokens(65, 5), big_parents(65);
        for (int i = 0; i < 65; ++i) big_parents[size_t(i)] = i - 1;
        std::vector<int32_t> big_accepted(65);
        EXPECT_ERROR(
            specla_session_verify_tree(s, big_tokens.data(), big_parents.data(), 65, nullptr,
                                       test::VerifyParams(greedy).get(), big_accepted.data(), &n_acc, &bonus, nullptr),
            SPECLA_ERR_INVALID_ARGUMENT, "max_tree_nodes");
        specla_sampling_params hot = greedy;
        hot.temperature = -1.f;
        EXPECT_ERROR(specla_session_verify_tree(s, tokens, chain, 3, nullptr, test::VerifyParams(hot).get(), accepted,
                                                &n_acc, &bonus, nullptr),
                     SPECLA_ERR_INVALID_ARGUMENT, "temperature");
        CHECK(n_acc == 0);
        CHECK(n_past(s) == before);
    }
    specla_drafter_free(d);
    w.check_usable();
}
