// Hostile tokenizer.json files through the public C API: every one must end in a precise status
// and a message that names the problem and the limit, never in a crash, a hang, an allocation of
// gigabytes or output that is not UTF-8. Fixture files are written into a temporary folder.
#include <doctest/doctest.h>

#include <pthread.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "specla/specla.h"
#include "support/params.h"
#include "support/sanitizer.h"

namespace {

namespace fs = std::filesystem;

using test::kSanitized;

// A temporary folder holding one sub-folder per tokenizer.json written into it.
struct TempDir {
    fs::path root = fs::temp_directory_path() /
                    ("specla_hostile_tokenizer_" + std::to_string(std::random_device{}()));
    TempDir() { fs::create_directories(root); }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    std::string write(const std::string &name, const std::string &tokenizer_json) const {
        fs::create_directories(root / name);
        std::ofstream(root / name / "tokenizer.json", std::ios::binary) << tokenizer_json;
        return (root / name).string();
    }
};

bool message_has(const std::string &what) {
    return std::string(specla_last_error()).find(what) != std::string::npos;
}

// Loads `folder`; on success *out keeps the handle (the caller frees it), else it is freed here.
specla_status load(const std::string &folder, specla_tokenizer **out = nullptr) {
    specla_tokenizer *t = nullptr;
    const specla_status st = specla_tokenizer_load(folder.c_str(), &t);
    if (st != SPECLA_OK) CHECK(t == nullptr);
    if (out)
        *out = t;
    else
        specla_tokenizer_free(t);
    return st;
}

// A BPE model over the given vocabulary entries (JSON members) and merges (JSON array items).
std::string bpe(const std::string &vocab, const std::string &merges = "",
                const std::string &extra = "") {
    return R"({"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": [)" + merges + "]" + extra +
           "}";
}

// Every one of the 256 <0xNN> byte tokens, ids 0..255, for byte_fallback models.
std::string byte_vocab() {
    std::string v;
    char name[16];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(name, sizeof name, "\"<0x%02X>\": %d", b, b);
        if (b) v += ", ";
        v += name;
    }
    return v;
}

bool valid_utf8(const std::string &s) {
    // A strict check (no overlong forms, surrogates or code points above U+10FFFF).
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    for (size_t i = 0, n = s.size(); i < n;) {
        const unsigned char b = p[i];
        size_t len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (b < 0x80) {
            ++i;
            continue;
        } else if (b >= 0xC2 && b <= 0xDF) {
            len = 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            len = 3;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            len = 4;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else {
            return false;
        }
        if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return false;
        for (size_t k = 2; k < len; ++k)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
        i += len;
    }
    return true;
}

specla_status tokenize(const specla_tokenizer *t, const std::string &text,
                       std::vector<int32_t> &ids) {
    ids.assign(text.size() * 4 + 16, 0);
    size_t n = 0;
    const specla_status st =
        specla_tokenize(t, text.data(), text.size(), false, true, ids.data(), ids.size(), &n);
    ids.resize(st == SPECLA_OK ? n : 0);
    return st;
}

std::string detokenize(const specla_tokenizer *t, const std::vector<int32_t> &ids) {
    size_t needed = 0;
    specla_detokenize(t, ids.data(), ids.size(), false, nullptr, 0, &needed);
    std::string text(needed + 1, '\0');
    REQUIRE(specla_detokenize(t, ids.data(), ids.size(), false, &text[0], text.size(), &needed) ==
            SPECLA_OK);
    text.resize(needed);
    return text;
}

// Runs `f` on a thread with a small stack, as an embedding host may give its worker threads.
void on_small_stack(size_t stack_bytes, const std::function<void()> &f) {
    pthread_attr_t attr;
    REQUIRE(pthread_attr_init(&attr) == 0);
    REQUIRE(pthread_attr_setstacksize(&attr, stack_bytes) == 0);
    pthread_t thread;
    auto trampoline = [](void *arg) -> void * {
        (*static_cast<const std::function<void()> *>(arg))();
        return nullptr;
    };
    REQUIRE(pthread_create(&thread, &attr, trampoline, const_cast<std::function<void()> *>(&f)) ==
            0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
}

// A Sequence of `type` nested `depth` levels deep around `leaf`.
std::string nested(const std::string &list_key, int depth, const std::string &leaf) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += R"({"type": "Sequence", ")" + list_key + R"(": [)";
    s += leaf;
    for (int i = 0; i < depth; ++i) s += "]}";
    return s;
}

}  // namespace

TEST_CASE("hostile tokenizer: a \\C pattern cannot split UTF-8 characters") {
    TempDir dir;
    // Pieces of one byte each, then pre-tokenizers and a BPE model that read whole characters:
    // before \C was refused, they read past the end of the piece.
    const std::string model = bpe(byte_vocab(), "", R"(, "byte_fallback": true)");
    const std::string split_c =
        R"({"type": "Split", "pattern": {"Regex": "\\C"}, "behavior": "Isolated", "invert": false})";
    const std::string text = "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 12 \xF0\x9F\x98\x80";
    for (const std::string &then : {std::string(R"({"type": "Whitespace"})"),
                                    std::string(R"({"type": "Digits", "individual_digits": true})"),
                                    std::string(R"({"type": "WhitespaceSplit"})")}) {
        CAPTURE(then);
        const std::string folder = dir.write(
            "split" + std::to_string(then.size()),
            R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [)" + split_c + ", " +
                then + R"(]}, "decoder": {"type": "Replace", "pattern": {"String": "x"}, "content": "y"}, "model": )" +
                model + "}");
        specla_tokenizer *t = nullptr;
        const specla_status st = load(folder, &t);
        CHECK(st == SPECLA_ERR_UNSUPPORTED);
        CHECK(message_has("\\C"));
        CHECK(message_has("pre_tokenizer.pretokenizers[0]"));
        if (st == SPECLA_OK) {  // the previous behaviour: tokenize and decode must still be sound
            std::vector<int32_t> ids;
            if (tokenize(t, text, ids) == SPECLA_OK) CHECK(valid_utf8(detokenize(t, ids)));
            specla_tokenizer_free(t);
        }
    }
    // A \C Replace normalizer would hand invalid UTF-8 to the pre-tokenizers and the model.
    CHECK(load(dir.write("normalizer", R"({"normalizer": {"type": "Replace", "pattern": {"Regex": "\\C"}, "content": "\u00e9"}, "model": )" + model + "}")) ==
          SPECLA_ERR_UNSUPPORTED);
    CHECK(message_has("normalizer.pattern"));
    // A \C Replace decoder would cut characters of the decoded text (here: drop a first byte).
    specla_tokenizer *t = nullptr;
    const specla_status st = load(
        dir.write("decoder", R"({"decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Replace", "pattern": {"Regex": "^\\C"}, "content": ""}]}, "model": )" + model + "}"),
        &t);
    CHECK(st == SPECLA_ERR_UNSUPPORTED);
    CHECK(message_has("decoder.decoders[1].pattern"));
    if (st == SPECLA_OK) {
        CHECK(valid_utf8(detokenize(t, {0xC3, 0xA9})));  // "é" as two byte tokens
        specla_tokenizer_free(t);
    }
}

TEST_CASE("hostile tokenizer: decoded text is valid UTF-8 whatever the vocabulary holds") {
    TempDir dir;
    // Byte tokens that do not form characters, alone and next to ordinary tokens, through
    // decoders that pass them on: every result is valid UTF-8, whole and streamed.
    const std::string folder = dir.write(
        "bytes", R"({"decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 1}]}, "model": )" +
                     bpe(byte_vocab() + R"(, "\u00e9": 256, " ": 257)", "", R"(, "byte_fallback": true)") + "}");
    specla_tokenizer *t = nullptr;
    REQUIRE(load(folder, &t) == SPECLA_OK);
    const std::vector<std::vector<int32_t>> cases = {
        {0xC3}, {0xC3, 256}, {0xE2, 0x82}, {0xF0, 0x9F, 0x98}, {0xFF, 257, 0x80}, {256, 0xED, 0xA0, 0x80}};
    for (const auto &ids : cases) {
        const std::string whole = detokenize(t, ids);
        CHECK(valid_utf8(whole));
        specla_stream_decoder *d = nullptr;
        REQUIRE(specla_stream_decoder_create(t, false, &d) == SPECLA_OK);
        std::string streamed;
        const char *piece = nullptr;
        for (int32_t id : ids) {
            REQUIRE(specla_stream_decoder_push(d, id, &piece) == SPECLA_OK);
            CHECK(valid_utf8(piece));
            streamed += piece;
        }
        REQUIRE(specla_stream_decoder_flush(d, &piece) == SPECLA_OK);
        CHECK(valid_utf8(piece));
        streamed += piece;
        CHECK(streamed == whole);
        specla_stream_decoder_free(d);
    }
    specla_tokenizer_free(t);
}

TEST_CASE("hostile tokenizer: deeply nested Sequences are refused on a small stack") {
    TempDir dir;
    const std::string model = bpe(R"("a": 0, "b": 1, "ab": 2)", R"("a b")");
    const std::string nesting = std::to_string(SPECLA_LIMIT_TOKENIZER_NESTING);
    struct Part {
        const char *field, *list_key, *leaf;
    };
    const Part parts[] = {
        {"normalizer", "normalizers", R"({"type": "Strip"})"},
        {"pre_tokenizer", "pretokenizers", R"({"type": "WhitespaceSplit"})"},
        {"decoder", "decoders", R"({"type": "Fuse"})"},
        {"post_processor", "processors", R"({"type": "ByteLevel"})"},
    };
    for (const Part &p : parts) {
        CAPTURE(p.field);
        // At the limit: loads and works.
        const std::string ok = dir.write(std::string(p.field) + "_ok",
                                         std::string(R"({")") + p.field + R"(": )" +
                                             nested(p.list_key, SPECLA_LIMIT_TOKENIZER_NESTING, p.leaf) +
                                             R"(, "model": )" + model + "}");
        specla_tokenizer *t = nullptr;
        REQUIRE(load(ok, &t) == SPECLA_OK);
        std::vector<int32_t> ids;
        CHECK(tokenize(t, "ab", ids) == SPECLA_OK);
        CHECK(ids == std::vector<int32_t>{2});
        specla_tokenizer_free(t);
        // One deeper: refused, naming the limit.
        CHECK(load(dir.write(std::string(p.field) + "_deeper",
                             std::string(R"({")") + p.field + R"(": )" +
                                 nested(p.list_key, SPECLA_LIMIT_TOKENIZER_NESTING + 1, p.leaf) +
                                 R"(, "model": )" + model + "}")) == SPECLA_ERR_FORMAT);
        CHECK(message_has(p.field));
        CHECK(message_has("nest"));
        CHECK(message_has(nesting));
        // Thousands of levels (a file of some 100 KB) on a 256 KiB stack: a status, no crash
        // (the JSON depth bound or the nesting bound, whichever is met first).
        const std::string deep = dir.write(std::string(p.field) + "_deep",
                                           std::string(R"({")") + p.field + R"(": )" +
                                               nested(p.list_key, 3000, p.leaf) + R"(, "model": )" +
                                               model + "}");
        specla_status st = SPECLA_OK;
        std::string message;
        on_small_stack(256 * 1024, [&] {
            st = load(deep);
            message = specla_last_error();
        });
        CHECK(st == SPECLA_ERR_FORMAT);
        CHECK(message.find("nest deeper than SPECLA_LIMIT_TOKENIZER_") != std::string::npos);
    }
}

TEST_CASE("hostile tokenizer: deeply nested JSON is refused on a small stack") {
    TempDir dir;
    const std::string model = bpe(R"("a": 0)");
    const int depth = 200000;  // 400 KB of brackets
    const std::string deep_value = std::string(depth, '[') + std::string(depth, ']');
    const std::string deep_object = [&] {
        std::string s;
        for (int i = 0; i < depth / 4; ++i) s += R"({"a":)";
        s += "0";
        s += std::string(depth / 4, '}');
        return s;
    }();
    const std::string folders[] = {
        dir.write("unknown_field", R"({"extra": )" + deep_value + R"(, "model": )" + model + "}"),
        dir.write("added_tokens", R"({"added_tokens": )" + deep_value + R"(, "model": )" + model + "}"),
        dir.write("object", R"({"post_processor": )" + deep_object + R"(, "model": )" + model + "}"),
        dir.write("unterminated", R"({"model": )" + model + R"(, "extra": )" + std::string(depth, '[')),
    };
    const std::string limit = std::to_string(SPECLA_LIMIT_TOKENIZER_JSON_DEPTH);
    for (const std::string &folder : folders) {
        CAPTURE(folder);
        specla_status st = SPECLA_OK;
        std::string message;
        on_small_stack(256 * 1024, [&] {
            st = load(folder);
            message = specla_last_error();
        });
        CHECK(st == SPECLA_ERR_FORMAT);
        CHECK(message.find("tokenizer.json") != std::string::npos);
        CHECK(message.find(limit) != std::string::npos);
    }
}

TEST_CASE("hostile tokenizer: token ids and table sizes are bounded") {
    TempDir dir;
    const std::string limit = std::to_string(SPECLA_LIMIT_TOKENIZER_VOCAB);
    const std::string largest = std::to_string(SPECLA_LIMIT_TOKENIZER_VOCAB - 1);

    // The largest id allowed: loads, with the id space up to it.
    specla_tokenizer *t = nullptr;
    REQUIRE(load(dir.write("largest", R"({"model": )" + bpe(R"("a": )" + largest) + "}"), &t) ==
            SPECLA_OK);
    specla_tokenizer_info info = test::info_struct<specla_tokenizer_info>();
    REQUIRE(specla_tokenizer_get_info(t, &info) == SPECLA_OK);
    CHECK(info.vocab_size == SPECLA_LIMIT_TOKENIZER_VOCAB);
    specla_tokenizer_free(t);

    // One more, and an id near 2^30 (which once asked for 32 GiB): refused before allocating.
    for (const char *id : {"", "1073741823"}) {
        const std::string value = *id ? id : limit;
        CHECK(load(dir.write("vocab" + value, R"({"model": )" + bpe(R"("a": )" + value) + "}")) ==
              SPECLA_ERR_FORMAT);
        CHECK(message_has("model.vocab[\"a\"]"));
        CHECK(message_has(limit));
        CHECK(load(dir.write("added" + value, R"({"added_tokens": [{"id": )" + value + R"(, "content": "<x>"}], "model": )" + bpe(R"("a": 0)") + "}")) ==
              SPECLA_ERR_FORMAT);
        CHECK(message_has("added_tokens[0].id"));
        CHECK(message_has(limit));
    }

    // More merges than the limit: refused by their number, before any is read.
    std::string merges;
    merges.reserve(size_t(SPECLA_LIMIT_TOKENIZER_MERGES) * 2 + 2);
    for (long i = 0; i <= SPECLA_LIMIT_TOKENIZER_MERGES; ++i) merges += i ? ",0" : "0";
    CHECK(load(dir.write("merges", R"({"model": )" + bpe(R"("a": 0)", merges) + "}")) ==
          SPECLA_ERR_FORMAT);
    CHECK(message_has("model.merges"));
    CHECK(message_has(std::to_string(SPECLA_LIMIT_TOKENIZER_MERGES)));
}

TEST_CASE("hostile tokenizer: 40k merges chosen to collide load quickly") {
    TempDir dir;
    // Merges that all share their right side, with left ids spaced so that the pair keys differ
    // only in their high bits (a weak pair hash put them all in one probe chain: quadratic).
    const int n = 40000;
    auto character = [](int i) {  // distinct characters from U+20000 on (4 bytes of UTF-8)
        const uint32_t cp = 0x20000 + uint32_t(i);
        std::string s;
        s += char(0xF0 | (cp >> 18));
        s += char(0x80 | ((cp >> 12) & 0x3F));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
        return s;
    };
    std::string vocab = R"("z": 0)", merges;
    for (int i = 0; i < n; ++i) {
        const std::string c = character(i);
        const int id = (i + 1) * 4;
        vocab += ", \"" + c + "\": " + std::to_string(id) + ", \"" + c + "z\": " +
                 std::to_string(id + 1);
        merges += std::string(i ? ", " : "") + "\"" + c + " z\"";
    }
    const std::string folder = dir.write("collide", R"({"model": )" + bpe(vocab, merges) + "}");
    const auto start = std::chrono::steady_clock::now();
    specla_tokenizer *t = nullptr;
    REQUIRE(load(folder, &t) == SPECLA_OK);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE("40k colliding merges loaded in ", seconds, " s");
    // Quadratic loading took about a minute; sanitizer builds run several times slower.
    CHECK(seconds < (kSanitized ? 10.0 : 2.0));
    // And they work: one long word of such pairs tokenizes to one token per pair.
    std::string text;
    for (int i = 0; i < 4000; ++i) text += character(i * 7 % n) + "z";
    std::vector<int32_t> ids;
    REQUIRE(tokenize(t, text, ids) == SPECLA_OK);
    REQUIRE(ids.size() == 4000);
    CHECK(ids[0] == 5);
    CHECK(ids[1] == 7 * 4 + 5);
    specla_tokenizer_free(t);
}

TEST_CASE("hostile tokenizer: runaway regexes end with a format error") {
    TempDir dir;
    const std::string model = bpe(R"("a": 0, "b": 1)");
    // Exponential backtracking on a string of a's with no final b or c.
    const std::string folder = dir.write(
        "runaway", R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a|aa)+[bc]"}, "behavior": "Isolated", "invert": false}, "model": )" +
                       model + "}");
    specla_tokenizer *t = nullptr;
    REQUIRE(load(folder, &t) == SPECLA_OK);
    std::vector<int32_t> ids;
    CHECK(tokenize(t, std::string(60, 'a'), ids) == SPECLA_ERR_FORMAT);
    CHECK(message_has("tokenizer.json"));
    CHECK(message_has("pre_tokenizer.pattern"));
    CHECK(message_has("(a|aa)+[bc]"));
    CHECK(message_has("match limit"));
    // The tokenizer stays usable for text the pattern handles.
    CHECK(tokenize(t, "abab", ids) == SPECLA_OK);
    CHECK(ids == std::vector<int32_t>{0, 1, 0, 1});
    specla_tokenizer_free(t);
}

namespace {

// A Split pre-tokenizer with `pattern` (a JSON string's contents) over a vocabulary of "a" and "b".
std::string split_tokenizer(const std::string &pattern) {
    return R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": ")" + pattern +
           R"("}, "behavior": "Isolated", "invert": false}, "model": )" +
           bpe(R"("a": 0, "b": 1)") + "}";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("hostile tokenizer: a regex that rescans the text at every match ends promptly") {
    // Each match looks ahead to the end of the text through a repeated group: more backtracking
    // stack than PCRE2's JIT has by default. The interpreter that used to take over then counted
    // its step limit per start position: 10k characters took over a second.
    TempDir dir;
    specla_tokenizer *t = nullptr;
    REQUIRE(load(dir.write("rescan", split_tokenizer("a(?=(?:.)*$)")), &t) == SPECLA_OK);
    std::vector<int32_t> ids;
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(tokenize(t, std::string(10000, 'a'), ids) == SPECLA_OK);
    const double seconds = seconds_since(start);
    MESSAGE("10k characters through a rescanning pattern: ", seconds, " s");
    CHECK(ids == std::vector<int32_t>(10000, 0));
    CHECK(seconds < (kSanitized ? 5.0 : 0.5));
    specla_tokenizer_free(t);
}

TEST_CASE("hostile tokenizer: a regex that needs more backtracking stack than the limit is a format error") {
    TempDir dir;
    specla_tokenizer *t = nullptr;
    // A capturing group repeated once per character: one stack frame each.
    REQUIRE(load(dir.write("deep", split_tokenizer("(?:(a)|b)*$")), &t) == SPECLA_OK);
    std::vector<int32_t> ids;
    const auto start = std::chrono::steady_clock::now();
    CHECK(tokenize(t, std::string(1 << 20, 'a'), ids) == SPECLA_ERR_FORMAT);
    const double seconds = seconds_since(start);
    MESSAGE("1 MiB through a deep pattern: ", seconds, " s");
    CHECK(message_has("tokenizer.json"));
    CHECK(message_has("pre_tokenizer.pattern"));
    CHECK(message_has("(?:(a)|b)*$"));
    CHECK(message_has("SPECLA_LIMIT_TOKENIZER_REGEX_STACK_BYTES"));
    CHECK(message_has(std::to_string(SPECLA_LIMIT_TOKENIZER_REGEX_STACK_BYTES)));
    CHECK(seconds < (kSanitized ? 10.0 : 1.0));
    // Shorter text fits the stack, and the tokenizer stays usable.
    REQUIRE(tokenize(t, std::string(10000, 'a') + "b", ids) == SPECLA_OK);
    CHECK(ids.size() == 10001);
    specla_tokenizer_free(t);
}
