// Session state through the public API: save -> restore (memory and file) and fork -> continue give
// exactly the tokens of an uninterrupted greedy run (plain and speculative with prompt lookup),
// into fresh sessions and into sessions that ran other text, across loads with other thread
// counts; states of other models, truncated, corrupted, future-version and trailing-byte states are
// refused with their status and a message naming the problem, leaving the session usable; the
// per-session memory query. The CUDA cases (CUDA <-> CPU states) are skipped without a GPU.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"

namespace {

std::string pycode_dir() { return test::models_dir() + "/gdn-pycode-22m"; }

std::vector<int32_t> pycode_prompt(specla_model *m, int i) {
    const auto j = nlohmann::json::parse(test::read_file(pycode_dir() + "/eval_prompts.json"));
    return test::tokenize(m, j.at("prompts").at(size_t(i)).get<std::string>());
}

test::GenerateParams greedy(int32_t n) {
    test::GenerateParams gp;
    gp.max_tokens = n;
    gp.stop_at_eos = false;
    return gp;
}

std::vector<unsigned char> save(specla_session *s) {
    size_t needed = 0;
    REQUIRE(specla_session_save_state(s, nullptr, 0, &needed) == SPECLA_ERR_CAPACITY);
    std::vector<unsigned char> buf(needed);
    size_t again = 0;
    const specla_status st = specla_session_save_state(s, buf.data(), buf.size(), &again);
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    CHECK(again == needed);
    return buf;
}

void load(specla_session *s, const std::vector<unsigned char> &buf) {
    const specla_status st = specla_session_load_state(s, buf.data(), buf.size());
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
}

std::vector<int32_t> speculative(specla_session *s, specla_model *m, const std::vector<int32_t> &prompt, int32_t n) {
    test::DrafterHandle d(m);
    test::SpecParams p;
    p.generate = greedy(n);
    std::vector<int32_t> out(static_cast<size_t>(n));
    size_t got = 0;
    const specla_status st = specla_generate_speculative(s, d.d, prompt.data(), prompt.size(), p.get(), out.data(),
                                                         out.size(), &got, nullptr);
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    out.resize(got);
    return out;
}

int64_t n_past(specla_session *s) {
    int64_t n = -1;
    REQUIRE(specla_session_n_past(s, &n) == SPECLA_OK);
    return n;
}

// The refusal of `buf` by `s`: its status, a message naming `words`, and the session unchanged.
void expect_refused(specla_session *s, const std::vector<unsigned char> &buf, specla_status want, const char *words) {
    const int64_t before = n_past(s);
    const specla_status st = specla_session_load_state(s, buf.data(), buf.size());
    const std::string msg = specla_last_error();
    INFO(msg);
    CHECK(st == want);
    CHECK(msg.find(words) != std::string::npos);
    CHECK(n_past(s) == before);
}

// A pycode session in the middle of a generation: prompt 3, 24 greedy tokens, and the 24 that an
// uninterrupted run generates next.
struct Reference {
    std::vector<int32_t> prompt, first, next;
};

Reference reference(specla_model *m) {
    Reference r;
    r.prompt = pycode_prompt(m, 3);
    test::SessionHandle s(m);
    r.first = s.generate(r.prompt, greedy(24));
    r.next = s.generate({}, greedy(24));
    REQUIRE(r.next.size() == 24);
    return r;
}

}  // namespace

TEST_CASE("session state: save -> restore continues exactly as the uninterrupted run") {
    test::ModelHandle model(pycode_dir());
    const Reference ref = reference(model.m);

    test::SessionHandle src(model.m);
    REQUIRE(src.generate(ref.prompt, greedy(24)) == ref.first);
    const std::vector<unsigned char> state = save(src.s);

    {
        INFO("into a fresh session, plain");
        test::SessionHandle dst(model.m);
        load(dst.s, state);
        CHECK(n_past(dst.s) == n_past(src.s));
        CHECK(dst.generate({}, greedy(24)) == ref.next);
    }
    {
        INFO("into a session that has run other text, speculative with prompt lookup");
        test::SessionHandle dst(model.m);
        dst.generate(pycode_prompt(model.m, 7), greedy(20));
        load(dst.s, state);
        CHECK(n_past(dst.s) == n_past(src.s));
        CHECK(speculative(dst.s, model.m, {}, 24) == ref.next);
    }
    {
        INFO("into a session of another load of the model with another thread count and params");
        specla_model_params mp = specla_model_default_params();
        mp.n_threads = 1;
        test::ModelHandle other(pycode_dir(), mp);
        specla_session_params sp = specla_session_default_params();
        sp.max_batch_tokens = 7;
        sp.max_tree_nodes = 3;
        test::SessionHandle dst(other.m, sp);
        load(dst.s, state);
        CHECK(dst.generate({}, greedy(24)) == ref.next);
    }
    {
        INFO("through a file");
        test::TempDir dir;
        const std::string path = dir.file("pycode.state");
        REQUIRE(specla_session_save_state_file(src.s, path.c_str()) == SPECLA_OK);
        CHECK(test::read_file(path).size() == state.size());
        test::SessionHandle dst(model.m);
        const specla_status st = specla_session_load_state_file(dst.s, path.c_str());
        INFO(std::string(specla_last_error()));
        REQUIRE(st == SPECLA_OK);
        CHECK(speculative(dst.s, model.m, {}, 24) == ref.next);
    }
    INFO("the saved session itself is unchanged by saving");
    CHECK(src.generate({}, greedy(24)) == ref.next);
}

TEST_CASE("session state: a state saved right after an eval keeps the logits generation starts from") {
    test::ModelHandle model(pycode_dir());
    const auto prompt = pycode_prompt(model.m, 5);
    const int32_t vocab = model.info().vocab_size;
    test::SessionHandle plain(model.m);
    const auto want = plain.generate(prompt, greedy(16));

    test::SessionHandle src(model.m);
    src.eval(prompt, SPECLA_LOGITS_NONE, vocab);
    const auto state = save(src.s);
    test::SessionHandle dst(model.m);
    load(dst.s, state);
    CHECK(dst.generate({}, greedy(16)) == want);
}

TEST_CASE("session state: fork -> both sessions continue as the uninterrupted run") {
    test::ModelHandle model(pycode_dir());
    const Reference ref = reference(model.m);

    test::SessionHandle src(model.m);
    REQUIRE(speculative(src.s, model.m, ref.prompt, 24) == ref.first);  // leaves deferred factors
    {
        INFO("same model handle");
        test::SessionHandle fork(model.m);
        fork.generate(pycode_prompt(model.m, 9), greedy(5));
        const specla_status st = specla_session_copy_state(fork.s, src.s);
        INFO(std::string(specla_last_error()));
        REQUIRE(st == SPECLA_OK);
        CHECK(n_past(fork.s) == n_past(src.s));
        CHECK(fork.generate({}, greedy(24)) == ref.next);
    }
    {
        INFO("another load of the model");
        specla_model_params mp = specla_model_default_params();
        mp.n_threads = 1;
        test::ModelHandle other(pycode_dir(), mp);
        test::SessionHandle fork(other.m);
        REQUIRE(specla_session_copy_state(fork.s, src.s) == SPECLA_OK);
        CHECK(speculative(fork.s, other.m, {}, 24) == ref.next);
    }
    {
        INFO("a session of another model is refused");
        test::ModelHandle tiny(test::fixture_dir("gdn_tiny_a"));
        test::SessionHandle other(tiny.m);
        CHECK(specla_session_copy_state(other.s, src.s) == SPECLA_ERR_SHAPE);
        CHECK(std::string(specla_last_error()).find("another model") != std::string::npos);
        CHECK(n_past(other.s) == 0);
    }
    {
        INFO("NULL sessions");
        CHECK(specla_session_copy_state(nullptr, src.s) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(specla_last_error()).find("dst") != std::string::npos);
        CHECK(specla_session_copy_state(src.s, nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(specla_last_error()).find("src") != std::string::npos);
    }
    INFO("the source of the forks is unchanged by them");
    CHECK(speculative(src.s, model.m, {}, 24) == ref.next);
}

TEST_CASE("session state: states of other models are refused, naming what differs") {
    test::ModelHandle pycode(pycode_dir());
    test::ModelHandle tiny(test::fixture_dir("gdn_tiny_a"));
    test::SessionHandle t(tiny.m);
    t.generate({1, 5, 9, 14}, greedy(4));
    const auto tiny_state = save(t.s);

    test::SessionHandle p(pycode.m);
    const Reference ref = reference(pycode.m);
    REQUIRE(p.generate(ref.prompt, greedy(24)) == ref.first);
    expect_refused(p.s, tiny_state, SPECLA_ERR_SHAPE, "num_layers is 2, this session's model has 8");
    // The refused session goes on as if nothing had happened.
    CHECK(p.generate({}, greedy(24)) == ref.next);

    {
        INFO("same configuration, other weights");
        test::TempDir dir;
        test::copy_file(test::fixture_dir("gdn_tiny_a") + "/config.json", dir.file("config.json"));
        std::string weights = test::read_file(test::fixture_dir("gdn_tiny_a") + "/model.safetensors");
        uint64_t header = 0;
        std::memcpy(&header, weights.data(), 8);
        weights[size_t(8 + header)] ^= 0x40;  // the first tensor's first value
        test::write_file(dir.file("model.safetensors"), weights);
        test::ModelHandle changed(dir.path);
        test::SessionHandle c(changed.m);
        expect_refused(c.s, tiny_state, SPECLA_ERR_SHAPE, "other weights");
    }
    {
        INFO("the same file, through a file");
        test::TempDir dir;
        const std::string path = dir.file("tiny.state");
        REQUIRE(specla_session_save_state_file(t.s, path.c_str()) == SPECLA_OK);
        CHECK(specla_session_load_state_file(p.s, path.c_str()) == SPECLA_ERR_SHAPE);
        const std::string msg = specla_last_error();
        CHECK(msg.find(path) != std::string::npos);
        CHECK(msg.find("another model") != std::string::npos);
    }
}

TEST_CASE("session state: truncated, corrupted, future-version and padded states are refused") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_b"));
    test::SessionHandle src(model.m);
    const std::vector<int32_t> prompt = {1, 17, 40, 3, 99, 250};
    const auto first = src.generate(prompt, greedy(6));
    const auto state = save(src.s);
    const auto want = src.generate({}, greedy(10));

    test::SessionHandle dst(model.m);
    dst.generate({1, 2, 3}, greedy(3));
    test::SessionHandle twin(model.m);  // gets the same calls as dst, without the refused ones
    twin.generate({1, 2, 3}, greedy(3));

    for (size_t len : {size_t(0), size_t(5), size_t(50), size_t(95)}) {
        INFO("length ", len);
        std::vector<unsigned char> cut(state.begin(), state.begin() + std::ptrdiff_t(len));
        cut.reserve(1);  // a valid pointer for length 0
        expect_refused(dst.s, cut, SPECLA_ERR_FORMAT, "truncated");
    }
    for (size_t len : {size_t(96), size_t(200), state.size() - 1}) {
        INFO("length ", len);
        expect_refused(dst.s, std::vector<unsigned char>(state.begin(), state.begin() + std::ptrdiff_t(len)),
                       SPECLA_ERR_FORMAT, "truncated: the header announces");
    }
    auto padded = state;
    padded.push_back(0);
    expect_refused(dst.s, padded, SPECLA_ERR_FORMAT, "1 byte(s) after the end of the state");

    auto not_state = state;
    not_state[0] = 'X';
    expect_refused(dst.s, not_state, SPECLA_ERR_FORMAT, "not a SpecLA session state");

    auto future = state;
    future[8] = 2;  // format version
    expect_refused(dst.s, future, SPECLA_ERR_UNSUPPORTED, "format version 2 is not supported");

    for (size_t at : {size_t(40), size_t(100), state.size() / 2, state.size() - 1}) {
        INFO("byte ", at);
        auto bad = state;
        bad[at] ^= 0x01;
        expect_refused(dst.s, bad, SPECLA_ERR_FORMAT, "checksum mismatch");
    }

    // Refused loads changed nothing: dst computes what its twin computes.
    CHECK(dst.generate({}, greedy(8)) == twin.generate({}, greedy(8)));
    // And it still accepts the good state.
    load(dst.s, state);
    CHECK(dst.generate({}, greedy(10)) == want);
    CHECK(first.size() == 6);
}

TEST_CASE("session state: NULL and short buffers, missing and unwritable files") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    test::SessionHandle s(model.m);
    s.generate({1, 2, 3}, greedy(3));
    size_t needed = 0;
    CHECK(specla_session_save_state(nullptr, nullptr, 0, &needed) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("session") != std::string::npos);

    REQUIRE(specla_session_save_state(s.s, nullptr, 0, &needed) == SPECLA_ERR_CAPACITY);
    CHECK(needed > 96);
    std::vector<unsigned char> buf(needed, 0xAB);
    CHECK(specla_session_save_state(s.s, buf.data(), needed - 1, nullptr) == SPECLA_ERR_CAPACITY);
    const std::string cap_msg = specla_last_error();
    CHECK(cap_msg.find(std::to_string(needed - 1) + " bytes but " + std::to_string(needed)) != std::string::npos);
    CHECK(buf[0] == 0xAB);  // nothing written
    CHECK(specla_session_save_state(s.s, nullptr, needed, nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("buf") != std::string::npos);
    // An odd address: the buffer need not be aligned.
    std::vector<unsigned char> odd(needed + 1);
    REQUIRE(specla_session_save_state(s.s, odd.data() + 1, needed, nullptr) == SPECLA_OK);
    test::SessionHandle other(model.m);
    REQUIRE(specla_session_load_state(other.s, odd.data() + 1, needed) == SPECLA_OK);
    CHECK(other.generate({}, greedy(5)) == s.generate({}, greedy(5)));

    CHECK(specla_session_load_state(s.s, nullptr, 10) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("buf") != std::string::npos);
    CHECK(specla_session_load_state(nullptr, buf.data(), buf.size()) == SPECLA_ERR_INVALID_ARGUMENT);

    test::TempDir dir;
    const std::string missing = dir.file("missing.state");
    CHECK(specla_session_load_state_file(s.s, missing.c_str()) == SPECLA_ERR_IO);
    CHECK(std::string(specla_last_error()).find(missing) != std::string::npos);
    CHECK(specla_session_load_state_file(s.s, dir.path.c_str()) == SPECLA_ERR_IO);  // a folder
    CHECK(std::string(specla_last_error()).find("not a regular file") != std::string::npos);
    const std::string unwritable = dir.file("no/such/folder.state");
    CHECK(specla_session_save_state_file(s.s, unwritable.c_str()) == SPECLA_ERR_IO);
    CHECK(std::string(specla_last_error()).find(unwritable) != std::string::npos);
    CHECK(specla_session_save_state_file(s.s, nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(specla_session_load_state_file(s.s, "") == SPECLA_ERR_INVALID_ARGUMENT);
    // A truncated file is refused from its size, naming the file.
    const std::string path = dir.file("cut.state");
    REQUIRE(specla_session_save_state_file(s.s, path.c_str()) == SPECLA_OK);
    const std::string bytes = test::read_file(path);
    test::write_file(path, bytes.substr(0, bytes.size() - 4));
    CHECK(specla_session_load_state_file(s.s, path.c_str()) == SPECLA_ERR_FORMAT);
    const std::string msg = specla_last_error();
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("truncated") != std::string::npos);
}

TEST_CASE("session memory: every buffer of a default pycode session, and the fields add up") {
    test::ModelHandle model(pycode_dir());
    const specla_model_info info = model.info();
    test::SessionHandle s(model.m);
    specla_session_memory m = test::info_struct<specla_session_memory>();
    REQUIRE(specla_session_get_memory(s.s, &m) == SPECLA_OK);
    CHECK(m.state_bytes == info.state_bytes);
    CHECK(m.total_bytes == m.state_bytes + m.factor_bytes + m.scratch_bytes + m.context_bytes);
    CHECK(m.total_bytes == m.host_bytes + m.device_bytes);
    CHECK(m.device_bytes == 0);  // CPU
    // 2.2 MB of state; the activations of 512-token blocks and the factors for 64 nodes are most.
    MESSAGE("default pycode session: " << m.total_bytes << " bytes (state " << m.state_bytes << ", factors "
                                       << m.factor_bytes << ", scratch " << m.scratch_bytes << ")");
    CHECK(m.total_bytes > 12u << 20);
    CHECK(m.total_bytes < 24u << 20);

    speculative(s.s, model.m, pycode_prompt(model.m, 0), 32);
    specla_session_memory after = test::info_struct<specla_session_memory>();
    REQUIRE(specla_session_get_memory(s.s, &after) == SPECLA_OK);
    CHECK(after.context_bytes >= size_t(n_past(s.s)) * sizeof(int32_t));
    CHECK(after.scratch_bytes >= m.scratch_bytes);
    CHECK(after.total_bytes == after.state_bytes + after.factor_bytes + after.scratch_bytes + after.context_bytes);

    CHECK(specla_session_get_memory(nullptr, &m) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(specla_session_get_memory(s.s, nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("out") != std::string::npos);
}

TEST_CASE("session state: CUDA and CPU sessions of one model take each other's states") {
    specla_model_params gp = specla_model_default_params();
    gp.backend = SPECLA_BACKEND_CUDA;
    specla_model *gpu = nullptr;
    const specla_status st = specla_model_load(pycode_dir().c_str(), &gp, &gpu);
    if (st == SPECLA_ERR_BACKEND_UNAVAILABLE || st == SPECLA_ERR_UNSUPPORTED) {
        MESSAGE("CUDA session state test skipped: " << std::string(specla_last_error()));
        return;
    }
    INFO(std::string(specla_last_error()));
    REQUIRE(st == SPECLA_OK);
    test::ModelHandle cpu(pycode_dir());
    {
        const auto prompt = pycode_prompt(gpu, 3);
        test::SessionHandle g(gpu);
        speculative(g.s, gpu, prompt, 24);  // deferred factors pending on the device
        test::SessionHandle ref(gpu);
        REQUIRE(specla_session_copy_state(ref.s, g.s) == SPECLA_OK);  // GPU fork
        const auto gpu_state = save(g.s);
        const auto want = ref.generate({}, greedy(24));

        // GPU -> CPU -> bytes: the same bytes (the canonical layout is exact both ways).
        test::SessionHandle c(cpu.m);
        load(c.s, gpu_state);
        CHECK(n_past(c.s) == n_past(g.s));
        const auto cpu_state = save(c.s);
        CHECK(cpu_state == gpu_state);
        // CPU -> GPU: the GPU continues exactly as the uninterrupted GPU run.
        test::SessionHandle g2(gpu);
        load(g2.s, gpu_state);
        test::SessionHandle g3(gpu);
        load(g3.s, cpu_state);
        CHECK(g3.generate({}, greedy(24)) == want);
        CHECK(speculative(g2.s, gpu, {}, 24) == want);
        CHECK(g.generate({}, greedy(24)) == want);
        // Fork across backends.
        test::SessionHandle c2(cpu.m);
        REQUIRE(specla_session_copy_state(c2.s, g3.s) == SPECLA_OK);
        CHECK(n_past(c2.s) == n_past(g3.s));

        // The GPU session's device memory is what the arena handed out for it.
        specla_memory_stats before = test::info_struct<specla_memory_stats>(), after = before;
        REQUIRE(specla_model_memory_stats(gpu, &before) == SPECLA_OK);
        specla_session_memory sm = test::info_struct<specla_session_memory>();
        {
            test::SessionHandle fresh(gpu);
            REQUIRE(specla_model_memory_stats(gpu, &after) == SPECLA_OK);
            REQUIRE(specla_session_get_memory(fresh.s, &sm) == SPECLA_OK);
            CHECK(sm.device_bytes == after.arena_used_bytes - before.arena_used_bytes);
            CHECK(sm.device_bytes > sm.state_bytes);
            CHECK(sm.host_bytes > 0);  // pinned staging and the session's logits
            speculative(fresh.s, gpu, prompt, 24);  // tree snapshots grow the arena share
            REQUIRE(specla_model_memory_stats(gpu, &after) == SPECLA_OK);
            REQUIRE(specla_session_get_memory(fresh.s, &sm) == SPECLA_OK);
            CHECK(sm.device_bytes == after.arena_used_bytes - before.arena_used_bytes);
        }
    }
    specla_model_free(gpu);
}
