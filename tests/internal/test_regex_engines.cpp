// The tokenizer's regex engines: PCRE2's JIT (the product wherever PCRE2 has one) and the
// interpreter that a system without the JIT runs. Both must split text identically, and the
// interpreter's work on a text must stay bounded (its step limit counts per start position, so
// it is given the text's share of the budget; see lib/tokenizer/regex.cpp).
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/regex.h"
#include "util/error.h"

namespace {

using namespace specla::tok;

// The Llama 3 split pattern (tests/fixtures/tokenizer/variants/bytelevel_split).
const std::string kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::string corpus_text() {
    std::ifstream f(std::string(SPECLA_TEST_DATA_DIR) + "/tokenizer/corpus.json");
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text;
    for (const auto &s : nlohmann::json::parse(ss.str())) text += s.get<std::string>() + "\n";
    return text;
}

}  // namespace

TEST_CASE("regex engines: the interpreter splits a long text exactly as the JIT does") {
    const std::string text = corpus_text();  // about 130 KB in one text
    for (const std::string &pattern : {kLlama3, std::string("\\s+"), std::string("\\p{N}")}) {
        CAPTURE(pattern);
        std::vector<Span> jit, interpreted;
        Regex::pattern(pattern, "test.pattern").find_all(text, jit);
        Regex::pattern(pattern, "test.pattern", RegexEngine::interpreter).find_all(text, interpreted);
        CHECK(jit.size() > 100);
        CHECK(interpreted == jit);
    }
}

TEST_CASE("regex engines: the interpreter's work on a rescanning pattern is bounded per text") {
    // A lookahead over a repeated group at every start position: quadratic in the text. The
    // interpreter used to get the whole step limit at each of the 10k positions (seconds).
    std::string text;
    for (int i = 0; i < 5000; ++i) text += "ab";
    const Regex r = Regex::pattern("(?=(a|b)*c)", "test.pattern", RegexEngine::interpreter);
    std::vector<Span> out;
    const auto start = std::chrono::steady_clock::now();
    specla_status status = SPECLA_OK;
    std::string message;
    try {
        r.find_all(text, out);
    } catch (const specla::Error &e) {
        status = e.status();
        message = e.what();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE("10k characters, interpreter: ", seconds, " s");
    CHECK(status == SPECLA_ERR_FORMAT);
    CHECK(message.find("test.pattern") != std::string::npos);
    CHECK(message.find("(?=(a|b)*c)") != std::string::npos);
    CHECK(message.find("SPECLA_LIMIT_TOKENIZER_REGEX_STEPS") != std::string::npos);
    CHECK(message.find("JIT is unavailable") != std::string::npos);
    CHECK(seconds < 0.5);
}
