// The text of a generation (generate/text_stream.h) on gdn-pycode-22m's tokenizer, fed the ids
// of known texts token by token: special tokens out of the text by default; a stop string cuts
// the text where it begins (or after it, with include_stop_string) also when it spans tokens or
// ends inside one; text that may begin a stop string is held back until it cannot, so pieces
// are never taken back; the stop string that ends first wins; bad stop strings are refused.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "generate/text_stream.h"
#include "support/fixture.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace specla;

namespace {

const Tokenizer &pycode_tokenizer() {
    static const std::unique_ptr<Tokenizer> tok = Tokenizer::load(test::models_dir() + "/gdn-pycode-22m");
    return *tok;
}

struct Streamed {
    std::vector<std::string> pieces;  // one per token, then the finish
    std::string text;                 // their concatenation
    int32_t stop_index = -1;
    int32_t stop_token = -1;          // index of the token that completed it
};

Streamed stream(const std::string &input, std::vector<std::string> stops, bool include_stop = false,
                bool include_special = false) {
    const Tokenizer &tok = pycode_tokenizer();
    TextOptions o;
    o.tokenizer = &tok;
    o.stop_strings = std::move(stops);
    o.include_stop_string = include_stop;
    o.include_special = include_special;
    TextStream ts(o);
    Streamed r;
    const std::vector<int32_t> ids = tok.encode(input, false, /*parse_special=*/true);
    for (size_t i = 0; i < ids.size() && r.stop_index < 0; ++i) {
        TextStream::Piece p = ts.push(ids[i]);
        r.pieces.push_back(p.text);
        if (p.stop_index >= 0) r.stop_index = p.stop_index, r.stop_token = int32_t(i);
    }
    r.pieces.push_back(ts.finish().text);
    for (const std::string &p : r.pieces) r.text += p;
    return r;
}

}  // namespace

TEST_CASE("text stream: without stop strings the pieces are the decoded text, special tokens left out") {
    const std::string input = "x = 1\n<|endoftext|>y";
    CHECK(stream(input, {}).text == "x = 1\ny");
    CHECK(stream(input, {}, false, /*include_special=*/true).text == input);
    // A character split over byte tokens comes out whole, in one piece.
    const Streamed cafe = stream("café au lait", {});
    CHECK(cafe.text == "café au lait");
    for (const std::string &p : cafe.pieces) CHECK(p.find("\xc3") == p.find("é"));
}

TEST_CASE("text stream: a stop string spanning two tokens cuts the text where it begins") {
    // for | item | in | items | : | \n
    const std::string input = "for item in items:\n";
    const Streamed ex = stream(input, {" item in"});
    CHECK(ex.stop_index == 0);
    CHECK(ex.stop_token == 2);  // " in" completes it
    CHECK(ex.text == "for");
    CHECK(ex.pieces[1] == "");  // " item" held back: it begins " item in"
    const Streamed in = stream(input, {" item in"}, /*include_stop=*/true);
    CHECK(in.text == "for item in");
    CHECK(in.stop_token == 2);
}

TEST_CASE("text stream: a stop string completed inside a token cuts that token's text") {
    // x | = | 1 | \n | def | " _" | helper | (): | \n : "def " ends inside " _".
    const std::string input = "x = 1\ndef _helper():\n";
    const Streamed ex = stream(input, {"def "});
    CHECK(ex.text == "x = 1\n");
    CHECK(ex.stop_token == 5);
    const Streamed in = stream(input, {"def "}, /*include_stop=*/true);
    CHECK(in.text == "x = 1\ndef ");  // not "def _"
    // Inside a character split over byte tokens.
    CHECK(stream("café au lait", {"é a"}).text == "caf");
    CHECK(stream("café au lait", {"é a"}, true).text == "café a");
}

TEST_CASE("text stream: text that may begin a stop string is held back, then released whole") {
    const std::string input = "for item in items:\n";
    const Streamed s = stream(input, {"items!", "in the"});
    CHECK(s.stop_index == -1);
    CHECK(s.text == input);  // nothing lost
    // Each token releases all but the longest tail that may begin a stop string:
    // "item" ("items!"), then "in" ("in the"), then "items" ("items!"), until ":" ends it.
    CHECK(s.pieces == std::vector<std::string>{"for", " ", "item ", "in ", "items:", "\n", ""});
    // Nothing held is left behind at the end either.
    const Streamed tail = stream("for item in it", {"it!"});
    CHECK(tail.text == "for item in it");
    CHECK(tail.pieces.back() == "it");
}

TEST_CASE("text stream: the stop string that ends first wins") {
    // "abcd" is one token: both complete in it; "bc" ends first.
    Streamed s = stream("abcd", {"abcd", "bc"});
    CHECK(s.stop_index == 1);
    CHECK(s.text == "a");
    s = stream("abcd", {"abcd", "bc"}, true);
    CHECK(s.text == "abc");
    // The same end: the one that starts first (the longer one).
    s = stream("abcd", {"cd", "bcd"});
    CHECK(s.stop_index == 1);
    CHECK(s.text == "a");
}

TEST_CASE("text stream: bad stop strings are refused naming them") {
    auto refused = [](std::vector<std::string> stops, const Tokenizer *tok, specla_status want, const char *what) {
        TextOptions o;
        o.tokenizer = tok;
        o.stop_strings = std::move(stops);
        try {
            TextStream ts(o);
            FAIL("accepted");
        } catch (const Error &e) {
            CHECK(e.status() == want);
            CHECK(std::string(e.what()).find(what) != std::string::npos);
        }
    };
    refused({"ok", ""}, &pycode_tokenizer(), SPECLA_ERR_INVALID_ARGUMENT, "stop string 1 is empty");
    refused({"\xc3"}, &pycode_tokenizer(), SPECLA_ERR_INVALID_ARGUMENT, "stop string 0 is not valid UTF-8");
    refused({"x"}, nullptr, SPECLA_ERR_STATE, "tokenizer");
}
