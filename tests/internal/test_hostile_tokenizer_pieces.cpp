// Defence in depth for the tokenizer's parts (the public suite, test_hostile_tokenizer.cpp, checks
// that tokenizer.json cannot produce such input): pieces that end inside a UTF-8 character or hold
// stray bytes must be read within their bounds (run under AddressSanitizer: tools/asan_check.sh)
// and handled as single bytes, never as characters that run past the end.
#include <doctest/doctest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

using namespace specla::tok;

// Texts of more than 15 bytes (kept out of std::string's inline buffer, so that a read past the
// end leaves the heap block) that end or break inside a character.
const std::vector<std::string> kBroken = {
    std::string(16, 'a') + "\xF0",          std::string(16, 'a') + "\xF0\x9F",
    std::string(16, 'a') + "\xE2\x82",      std::string(16, 'a') + "\xC3",
    std::string(16, 'a') + "\x80\xBF",      std::string(16, '1') + "\xF0\x9F\x98",
    std::string(16, ' ') + "\xE3\x80 \xE3", std::string(16, '9') + "\xF0 1\xF0",
};

std::vector<std::string> run(const PreTokenizer &p, const std::string &text) {
    std::vector<Piece> pieces{Piece{text, true}}, scratch;
    p.apply(pieces, scratch);
    std::vector<std::string> out;
    for (const Piece &piece : pieces) out.push_back(piece.text);
    return out;
}

std::string joined(const std::vector<std::string> &pieces) {
    std::string s;
    for (const std::string &p : pieces) s += p;
    return s;
}

}  // namespace

TEST_CASE("hostile tokenizer pieces: decoding a cut character stays inside the text") {
    for (const std::string &s : kBroken) {
        // An exact-size heap copy: any read past it is a heap-buffer-overflow under ASan.
        std::unique_ptr<char[]> copy(new char[s.size()]);
        std::copy(s.begin(), s.end(), copy.get());
        const std::string_view v(copy.get(), s.size());
        size_t total = 0;
        for (size_t i = 0; i < v.size();) {
            size_t len = 0;
            const uint32_t cp = utf8_decode(v, i, &len);
            REQUIRE(len >= 1);
            CHECK(i + len <= v.size());
            if (utf8_first_invalid(v.substr(i, len)) != len) CHECK(cp == 0xFFFD);
            i += len;
            total += len;
        }
        CHECK(total == v.size());
    }
}

TEST_CASE("hostile tokenizer pieces: pre-tokenizers keep every byte of broken pieces") {
    const WhitespacePreTokenizer whitespace(true), whitespace_split(false);
    const DigitsPreTokenizer digits(true), digit_runs(false);
    for (const std::string &s : kBroken) {
        CAPTURE(s);
        // Nothing but white space is dropped, and no piece reaches past the text.
        for (const PreTokenizer *p : {static_cast<const PreTokenizer *>(&whitespace),
                                      static_cast<const PreTokenizer *>(&whitespace_split)}) {
            std::string kept;
            for (char c : s)
                if (c != ' ') kept += c;
            CHECK(joined(run(*p, s)) == kept);
        }
        for (const PreTokenizer *p : {static_cast<const PreTokenizer *>(&digits),
                                      static_cast<const PreTokenizer *>(&digit_runs)})
            CHECK(joined(run(*p, s)) == s);
    }
    // A stray byte is a piece of its own kind (neither a word character nor white space).
    CHECK(run(whitespace, "ab\xC3" "cd") == std::vector<std::string>{"ab", "\xC3", "cd"});
    CHECK(run(digits, "1\xE2" "2") == std::vector<std::string>{"1", "\xE2", "2"});
}

TEST_CASE("hostile tokenizer pieces: BPE takes a cut character as single bytes") {
    BpeConfig c;
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        c.vocab.emplace_back(name, b);
    }
    c.vocab.emplace_back("a", 256);
    c.vocab.emplace_back("aa", 257);
    c.merges.emplace_back("a", "a");
    c.byte_fallback = true;
    const BpeModel model(c);
    for (const std::string &tail : {std::string("\xF0"), std::string("\xF0\x9F"),
                                    std::string("\xE2\x82"), std::string("\x80")}) {
        for (size_t as : {16, 100}) {  // a cached short word and a long, chunked one
            CAPTURE(as);
            const std::string word = std::string(as, 'a') + tail;
            std::vector<int32_t> ids;
            model.tokenize(word, ids);
            std::vector<int32_t> expected(as / 2, 257);
            for (unsigned char b : tail) expected.push_back(b);
            CHECK(ids == expected);
        }
    }
}

TEST_CASE("hostile tokenizer pieces: a regex refuses text that is not UTF-8") {
    const Regex r = Regex::pattern("\\s+", "test.pattern");
    std::vector<Span> matches;
    r.find_all("a b", matches);
    CHECK(matches.size() == 1);
    matches.clear();
    try {
        r.find_all(std::string(16, ' ') + "\xF0\x9F", matches);
        FAIL("invalid UTF-8 was searched");
    } catch (const specla::Error &e) {
        CHECK(e.status() == SPECLA_ERR_INTERNAL);
        CHECK(std::string(e.what()).find("UTF-8") != std::string::npos);
    }
}

TEST_CASE("hostile tokenizer pieces: decoded text is valid UTF-8 whatever a stage passes on") {
    // A Replace step whose literal is half a character (tokenizer.json cannot write one; the
    // end of the decoder chain must still hand out valid UTF-8), whole and pushed token by token.
    DecoderStep cut;
    cut.kind = DecoderKind::Replace;
    cut.pattern = std::make_shared<const Regex>(Regex::literal("\xA9"));
    const std::vector<DecoderStep> steps{cut};
    std::string whole;
    DecodeState all(steps);
    all.push("caf\xC3\xA9", whole);
    all.push("\xE2\x82", whole);  // a cut character: held until the next token completes it
    all.push("\xAC!", whole);
    all.finish(whole);
    CHECK(whole == "caf\xEF\xBF\xBD\xE2\x82\xAC!");

    DecodeState stream(steps);
    std::string piece, streamed;
    for (const char *token : {"caf\xC3\xA9", "\xE2\x82", "\xAC!", "\xF0\x9F"}) {
        piece.clear();
        stream.push(token, piece);
        CHECK(utf8_first_invalid(piece) == piece.size());
        streamed += piece;
    }
    piece.clear();
    stream.finish(piece);
    CHECK(piece == "\xEF\xBF\xBD");  // the cut character left at the end
    streamed += piece;
    CHECK(streamed == whole + "\xEF\xBF\xBD");
}
