// Text in, text out on gdn-pycode-22m: streamed pieces concatenate to the returned text and to the
// detokenized ids; stop strings end generation at the token that completes them and the text
// where they begin (or end, with include_stop_string); speculative text generation streams
// exactly the same text as plain generation. The pull API: test_generation_pull.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"

namespace {

struct Collected {
    std::vector<int32_t> tokens;
    std::string text;
};

bool collect(int32_t token, const char *piece, void *user) {
    auto *c = static_cast<Collected *>(user);
    if (token >= 0) c->tokens.push_back(token);
    c->text += piece;
    return true;
}

const char *kPrompt = "import os\n\n\ndef read_lines(path):\n    \"\"\"Return the lines of a text file.\"\"\"\n";

}  // namespace

TEST_CASE("text generation streams the detokenized output and honours stop strings") {
    test::ModelHandle model(test::models_dir() + "/gdn-pycode-22m");
    test::GenerateParams gp;
    gp.max_tokens = 48;
    gp.stop_at_eos = false;

    Collected plain;
    gp.on_token = collect;
    gp.user_data = &plain;
    char *text = nullptr;
    size_t n = 0;
    {
        test::SessionHandle s(model.m);
        REQUIRE(specla_generate_text(s.s, kPrompt, gp.get(), &text, &n) == SPECLA_OK);
    }
    REQUIRE(text != nullptr);
    const std::string returned = text;
    specla_string_free(text);
    CHECK(n == 48);
    CHECK(plain.tokens.size() == 48);
    CHECK(returned == plain.text);
    CHECK(returned == test::detokenize(model.m, plain.tokens));
    CHECK(!returned.empty());

    SUBCASE("a stop string ends generation after the token that completes it") {
        // Pick a stop string from the middle of the known output.
        const size_t cut = returned.size() / 2;
        const std::string stop = returned.substr(cut, std::min<size_t>(4, returned.size() - cut));
        REQUIRE(!stop.empty());
        const size_t first = returned.find(stop);
        Collected stopped;
        gp.user_data = &stopped;
        const char *stops[] = {stop.c_str()};
        gp.stop_strings = stops;
        gp.n_stop_strings = 1;
        for (bool include : {false, true}) {
            CAPTURE(include);
            stopped = Collected{};
            gp.include_stop_string = include;
            test::SessionHandle s(model.m);
            REQUIRE(specla_generate_text(s.s, kPrompt, gp.get(), &text, &n) == SPECLA_OK);
            const std::string got = text;
            specla_string_free(text);
            // The text ends where the stop string begins (or, including it, right after it: the
            // rest of the token that completed it is cut off), and the streamed pieces say the same.
            CHECK(got == returned.substr(0, include ? first + stop.size() : first));
            CHECK(stopped.text == got);
            CHECK(n < 48);
            CHECK(test::detokenize(model.m, std::vector<int32_t>(stopped.tokens.begin(), stopped.tokens.end() - 1))
                      .find(stop) == std::string::npos);
            CHECK(test::detokenize(model.m, stopped.tokens).find(stop) != std::string::npos);
        }
    }

    SUBCASE("speculative text generation streams the same text") {
        Collected spec;
        gp.user_data = &spec;
        test::SpecParams sp;
        sp.generate = gp;
        specla_drafter *d = nullptr;
        REQUIRE(specla_drafter_create(model.m, nullptr, &d) == SPECLA_OK);
        test::SessionHandle s(model.m);
        specla_spec_stats stats = test::info_struct<specla_spec_stats>();
        REQUIRE(specla_generate_speculative_text(s.s, d, kPrompt, sp.get(), &text, &n, &stats) == SPECLA_OK);
        const std::string got = text;
        specla_string_free(text);
        specla_drafter_free(d);
        CHECK(got == returned);
        CHECK(spec.text == returned);
        CHECK(spec.tokens == plain.tokens);
        CHECK(stats.generated == 48);
    }
}
