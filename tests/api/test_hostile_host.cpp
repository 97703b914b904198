// The library inside a host that runs short of resources: out of address space while loading,
// creating sessions and generating; threads the system refuses to start; thread counts past the
// limit. Each must be a status with a message, nothing changed, and the host carries on.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/child_process.h"

namespace {

const std::string kPycode = std::string(SPECLA_MODELS_DIR) + "/gdn-pycode-22m";

// Greedy tokens after a fixed prompt; fails the child (returns false) on any error.
bool generate_tokens(specla_session *s, std::vector<int32_t> &out) {
    const int32_t prompt[] = {1, 2, 3, 4};
    test::GenerateParams gp;
    gp.max_tokens = 16;
    gp.stop_at_eos = false;
    out.assign(16, 0);
    size_t n = 0;
    if (specla_generate(s, prompt, 4, gp.get(), out.data(), out.size(), &n) != SPECLA_OK) return false;
    out.resize(n);
    return n == 16;
}

bool contains(const std::string &text, const char *part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("out of address space: load, session creation and generation return OUT_OF_MEMORY and the host continues") {
    if (test::kAddressSanitizer) {
        MESSAGE("skipped under AddressSanitizer: its shadow memory needs terabytes of address space, so "
                "RLIMIT_AS cannot be applied");
        return;
    }
    // Reference tokens, computed without a cap (in the child too, before the cap).
    const test::ChildResult r = test::run_in_child([](FILE *out) {
        specla_model_params mp = specla_model_default_params();
        mp.n_threads = 1;  // no worker threads: the host buffers are what runs out (threads: below)
        specla_model *model = nullptr;
        if (specla_model_load(kPycode.c_str(), &mp, &model) != SPECLA_OK) return 10;
        std::vector<int32_t> expected, got;
        {
            specla_session *s = nullptr;
            if (specla_session_create(model, nullptr, &s) != SPECLA_OK) return 11;
            if (!generate_tokens(s, expected)) return 12;
            specla_session_free(s);
        }

        // A second copy of the model does not fit in 16 MiB more.
        if (!test::cap_address_space(test::address_space_bytes() + (16u << 20))) return 13;
        specla_model *second = nullptr;
        const specla_status load = specla_model_load(kPycode.c_str(), &mp, &second);
        fprintf(out, "load=%d second=%d message=%s\n", int(load), second != nullptr, specla_last_error());

        // Sessions until the address space runs out.
        if (!test::cap_address_space(test::address_space_bytes() + (192u << 20))) return 14;
        std::vector<specla_session *> sessions;
        specla_status create = SPECLA_OK;
        while (sessions.size() < 10000) {
            specla_session *s = nullptr;
            create = specla_session_create(model, nullptr, &s);
            if (create != SPECLA_OK) {
                fprintf(out, "create=%d null=%d message=%s\n", int(create), s == nullptr, specla_last_error());
                break;
            }
            sessions.push_back(s);
        }
        fprintf(out, "sessions=%zu\n", sessions.size());
        // Still under the cap: the sessions that exist generate what an uncapped one does.
        bool same = !sessions.empty();
        if (same)
            for (specla_session *s : {sessions.front(), sessions.back()})
                same = same && generate_tokens(s, got) && got == expected;
        fprintf(out, "capped_generation_same=%d\n", int(same));
        // Freeing makes room again: a new session works and generates the same.
        for (specla_session *s : sessions) specla_session_free(s);
        specla_session *again = nullptr;
        const specla_status after = specla_session_create(model, nullptr, &again);
        const bool again_same = after == SPECLA_OK && generate_tokens(again, got) && got == expected;
        fprintf(out, "after=%d after_same=%d\n", int(after), int(again_same));
        specla_session_free(again);
        specla_model_free(model);
        return 0;
    }, 300);
    INFO(r.report);
    REQUIRE(r.exited);  // not SIGABRT from the allocator, not SIGALRM from a hang
    REQUIRE(r.code == 0);
    CHECK(contains(r.report, "load=7 second=0 message="));
    CHECK(contains(r.report, "create=7 null=1 message="));
    CHECK(contains(r.report, "memory"));
    CHECK(!contains(r.report, "sessions=0\n"));
    CHECK(!contains(r.report, "sessions=10000\n"));
    CHECK(contains(r.report, "capped_generation_same=1"));
    CHECK(contains(r.report, "after=0 after_same=1"));
}

TEST_CASE("threads the system refuses to start: OUT_OF_MEMORY, no deadlock, no thread left behind") {
    if (test::kAddressSanitizer) {
        MESSAGE("skipped under AddressSanitizer: RLIMIT_AS (used here to make thread creation fail) "
                "cannot be applied");
        return;
    }
    const test::ChildResult r = test::run_in_child([](FILE *out) {
        specla_model_params mp = specla_model_default_params();
        mp.n_threads = 64;  // 63 workers of 8 MiB stack each: more than the cap below leaves
        specla_model *model = nullptr;
        if (specla_model_load(kPycode.c_str(), &mp, &model) != SPECLA_OK) return 10;
        const int threads_before = test::thread_count();
        if (!test::cap_address_space(test::address_space_bytes() + (48u << 20))) return 11;
        specla_session *s = nullptr;
        const specla_status st = specla_session_create(model, nullptr, &s);
        fprintf(out, "status=%d null=%d threads_left=%d message=%s\n", int(st), s == nullptr,
                test::thread_count() - threads_before, specla_last_error());
        if (!test::lift_address_space_cap()) return 12;
        const specla_status again = specla_session_create(model, nullptr, &s);
        std::vector<int32_t> got;
        fprintf(out, "again=%d generates=%d\n", int(again), int(again == SPECLA_OK && generate_tokens(s, got)));
        specla_session_free(s);
        specla_model_free(model);
        return 0;
    }, 120);
    INFO(r.report);
    REQUIRE(r.exited);
    REQUIRE(r.code == 0);
    CHECK(contains(r.report, "status=7 null=1 threads_left=0 message="));
    CHECK(contains(r.report, "worker thread"));
    CHECK(contains(r.report, "n_threads 64"));
    CHECK(contains(r.report, "again=0 generates=1"));
}

TEST_CASE("n_threads above SPECLA_LIMIT_THREADS is refused") {
    specla_model_params mp = specla_model_default_params();
    mp.n_threads = SPECLA_LIMIT_THREADS + 1;
    specla_model *model = reinterpret_cast<specla_model *>(&mp);  // must be reset to NULL
    CHECK(specla_model_load(kPycode.c_str(), &mp, &model) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(model == nullptr);
    const std::string message = specla_last_error();
    CHECK(contains(message, "n_threads (257)"));
    CHECK(contains(message, "SPECLA_LIMIT_THREADS (256)"));
    mp.n_threads = 1 << 30;
    CHECK(specla_model_load(kPycode.c_str(), &mp, &model) == SPECLA_ERR_INVALID_ARGUMENT);
}
