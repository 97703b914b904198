// Enum values a C program may pass that name no enumerator, far outside the enumerators' range:
// every one is refused with SPECLA_ERR_INVALID_ARGUMENT naming it (or named "unknown" by the
// string functions), and the library never reads one through its C++ enum type (under UBSan's
// -fsanitize=enum such a read stops the process; lib/api/caller_enum.h).
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"
#include "support/params.h"

namespace {

template <class E>
E out_of_range(int v) {
    E e;
    std::memcpy(&e, &v, sizeof e);  // what a C caller's int holds
    return e;
}

void expect_invalid(specla_status st, const char *needle) {
    const std::string msg = specla_last_error();
    INFO("message: ", msg);
    CHECK(st == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(msg.find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("enum values that name no enumerator are refused, never read as the enum") {
    const std::string dir = test::fixture_dir("gdn_tiny_a");
    for (const int bad : {1000, -7}) {
        CAPTURE(bad);
        specla_model_params mp = specla_model_default_params();
        mp.backend = out_of_range<specla_backend>(bad);
        specla_model *none = nullptr;
        expect_invalid(specla_model_load(dir.c_str(), &mp, &none), "unknown backend");
        CHECK(none == nullptr);

        test::ModelHandle model(dir);
        test::SessionHandle s(model.m);
        const int32_t tok = 1;
        std::vector<float> logits(1 << 16);
        expect_invalid(specla_session_eval(s.s, &tok, 1, out_of_range<specla_logits_mode>(bad), logits.data(),
                                           logits.size()),
                       "unknown logits mode");

        specla_drafter_params dp = specla_drafter_default_params();
        dp.type = out_of_range<specla_drafter_type>(bad);
        specla_drafter *d = nullptr;
        expect_invalid(specla_drafter_create(model.m, &dp, &d), "unknown drafter type");

        test::DrafterHandle drafter(model.m);
        test::SpecParams sp;
        sp.generate.max_tokens = 2;
        sp.tree_algorithm = out_of_range<specla_tree_algorithm>(bad);
        std::vector<int32_t> out(2);
        size_t n = 0;
        expect_invalid(specla_generate_speculative(s.s, drafter.d, &tok, 1, sp.get(), out.data(), out.size(), &n,
                                                   nullptr),
                       "unknown tree algorithm");
        test::SpecParams shaped;
        shaped.generate.max_tokens = 2;
        shaped.tree_shape = out_of_range<specla_tree_shape>(bad);
        expect_invalid(specla_generate_speculative(s.s, drafter.d, &tok, 1, shaped.get(), out.data(), out.size(), &n,
                                                   nullptr),
                       "unknown tree shape");
        test::VerifyParams vp;
        vp.tree_algorithm = out_of_range<specla_tree_algorithm>(bad);
        const int32_t parents = -1;
        int32_t accepted = -1, bonus = -1;
        REQUIRE(specla_session_eval(s.s, &tok, 1, SPECLA_LOGITS_NONE, nullptr, 0) == SPECLA_OK);
        expect_invalid(specla_session_verify_tree(s.s, &tok, &parents, 1, nullptr, vp.get(), &accepted, &n, &bonus,
                                                  nullptr),
                       "unknown tree algorithm");

        // The session is unharmed.
        CHECK(specla_generate(s.s, &tok, 1, sp.generate.get(), out.data(), out.size(), &n) == SPECLA_OK);
        CHECK(n == 2);

        CHECK(std::string(specla_status_string(out_of_range<specla_status>(bad))).size() > 0);
        CHECK(std::string(specla_finish_reason_string(out_of_range<specla_finish_reason>(bad))).size() > 0);
    }
}
