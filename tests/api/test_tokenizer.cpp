// The tokenizer through the public C API, against golden files written by the reference Hugging
// Face `tokenizers` library (tools/gen_tokenizer_golden.py, see tests/fixtures/tokenizer/README.md):
// for the byte-level BPE of gdn-pycode-22m, the Llama-style SentencePiece BPE fixture and the small
// variant tokenizers, every corpus string must encode to the same ids (special tokens parsed or
// not, BOS or not) and every id sequence (those ids, and arbitrary ones full of byte tokens) must
// decode to the same text, whole and streamed token by token. Then special-token handling,
// vocabulary lookups, info, concurrency and every bad input.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "specla/specla.h"
#include "support/params.h"

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const std::string kData = SPECLA_TEST_DATA_DIR;
const std::string kModels = SPECLA_MODELS_DIR;
const std::string kGdn = kModels + "/gdn-pycode-22m";
const std::string kLlama = kData + "/tokenizer/llama";

json read_json(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE_MESSAGE(f.good(), "cannot open ", path);
    std::stringstream ss;
    ss << f.rdbuf();
    return json::parse(ss.str());
}

struct Tok {
    specla_tokenizer *t = nullptr;
    explicit Tok(const std::string &folder) {
        const specla_status st = specla_tokenizer_load(folder.c_str(), &t);
        REQUIRE_MESSAGE(st == SPECLA_OK, folder, ": ", specla_last_error());
    }
    ~Tok() { specla_tokenizer_free(t); }
    Tok(const Tok &) = delete;
    Tok &operator=(const Tok &) = delete;
};

std::vector<int32_t> tokenize(const specla_tokenizer *t, const std::string &text, bool add_bos,
                              bool parse_special) {
    size_t needed = 0;
    specla_status st =
        specla_tokenize(t, text.data(), text.size(), add_bos, parse_special, nullptr, 0, &needed);
    if (st == SPECLA_OK && needed == 0) return {};
    REQUIRE(st == SPECLA_ERR_CAPACITY);
    std::vector<int32_t> ids(needed);
    size_t again = 0;
    st = specla_tokenize(t, text.data(), text.size(), add_bos, parse_special, ids.data(), ids.size(),
                         &again);
    REQUIRE_MESSAGE(st == SPECLA_OK, specla_last_error());
    REQUIRE(again == needed);
    return ids;
}

std::string detokenize(const specla_tokenizer *t, const std::vector<int32_t> &ids, bool skip) {
    size_t needed = 0;
    specla_status st = specla_detokenize(t, ids.data(), ids.size(), skip, nullptr, 0, &needed);
    REQUIRE(st == SPECLA_ERR_CAPACITY);
    std::string text(needed + 1, '\0');
    st = specla_detokenize(t, ids.data(), ids.size(), skip, &text[0], text.size(), &needed);
    REQUIRE_MESSAGE(st == SPECLA_OK, specla_last_error());
    text.resize(needed);
    return text;
}

// Whether s is a sequence of complete, well-formed UTF-8 characters.
bool complete_utf8(const std::string &s) {
    size_t i = 0;
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    while (i < s.size()) {
        const unsigned char b = p[i];
        size_t n;
        uint32_t cp;
        if (b < 0x80) {
            ++i;
            continue;
        } else if (b >= 0xC2 && b <= 0xDF) {
            n = 2;
            cp = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            n = 3;
            cp = b & 0x0F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            n = 4;
            cp = b & 0x07;
        } else {
            return false;
        }
        if (i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) ||
            (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false;
        i += n;
    }
    return true;
}

// Decodes ids through a stream decoder; every piece must be complete UTF-8.
std::string stream_decode(const specla_tokenizer *t, const std::vector<int32_t> &ids, bool skip,
                          bool *pieces_ok) {
    specla_stream_decoder *d = nullptr;
    REQUIRE(specla_stream_decoder_create(t, skip, &d) == SPECLA_OK);
    std::string all;
    *pieces_ok = true;
    for (int32_t id : ids) {
        const char *piece = nullptr;
        REQUIRE_MESSAGE(specla_stream_decoder_push(d, id, &piece) == SPECLA_OK, specla_last_error());
        if (!complete_utf8(piece)) *pieces_ok = false;
        all += piece;
    }
    const char *rest = nullptr;
    REQUIRE(specla_stream_decoder_flush(d, &rest) == SPECLA_OK);
    if (!complete_utf8(rest)) *pieces_ok = false;
    all += rest;
    specla_stream_decoder_free(d);
    return all;
}

std::string folder_of(const std::string &repo_relative) {
    const std::string models = "models/", fixtures = "tests/fixtures/";
    if (repo_relative.compare(0, models.size(), models) == 0)
        return kModels + "/" + repo_relative.substr(models.size());
    if (repo_relative.compare(0, fixtures.size(), fixtures) == 0)
        return kData + "/" + repo_relative.substr(fixtures.size());
    FAIL("unexpected tokenizer folder in golden file: ", repo_relative);
    return {};
}

std::string printable(const std::string &s) {
    std::string out;
    for (unsigned char c : s.substr(0, 120)) {
        if (c >= 0x20 && c < 0x7F) {
            out += char(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        }
    }
    return out;
}

// Checks one golden file; returns the number of corpus strings checked.
size_t check_golden(const std::string &name) {
    const json corpus = read_json(kData + "/tokenizer/corpus.json");
    const json golden = read_json(kData + "/tokenizer/golden_" + name + ".json");
    const json &cases = golden["cases"];
    REQUIRE(cases.size() == corpus.size());
    Tok tok(folder_of(golden["tokenizer"].get<std::string>()));
    specla_tokenizer_info info = test::info_struct<specla_tokenizer_info>();
    REQUIRE(specla_tokenizer_get_info(tok.t, &info) == SPECLA_OK);
    int32_t bos = -1;
    if (!golden["bos_prepend"].is_null()) {
        bos = golden["bos_prepend"].get<int32_t>();
        CHECK(info.bos_token_id == bos);
        CHECK(info.add_bos_default);
    } else {
        bos = info.bos_token_id;  // add_bos prepends whatever BOS the checkpoint names, if any
    }

    size_t checked = 0, failures = 0;
    auto report = [&](size_t i, const std::string &what, const std::string &detail) {
        if (++failures > 8) return;
        const std::string msg = name + " case " + std::to_string(i) + " (\"" +
                                printable(corpus[i].get<std::string>()) + "\"): " + what + detail;
        MESSAGE(msg);
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        const json &c = cases[i];
        if (c.is_null()) continue;
        ++checked;
        const std::string text = corpus[i].get<std::string>();
        const auto ids = c["ids"].get<std::vector<int32_t>>();
        const auto plain = c.contains("ids_plain") ? c["ids_plain"].get<std::vector<int32_t>>() : ids;
        const std::string decoded = c.value("text", text);
        const std::string decoded_skip = c.value("text_skip", decoded);
        const std::string decoded_plain = c.value("text_plain", decoded);

        if (tokenize(tok.t, text, false, true) != ids) report(i, "encode (special tokens parsed)", "");
        if (tokenize(tok.t, text, false, false) != plain) report(i, "encode (special tokens as text)", "");
        std::vector<int32_t> with_bos = ids;
        if (bos >= 0) with_bos.insert(with_bos.begin(), bos);
        if (tokenize(tok.t, text, true, true) != with_bos) report(i, "encode with BOS", "");

        const std::string got = detokenize(tok.t, ids, false);
        if (got != decoded) report(i, "decode: ", "\"" + printable(got) + "\"");
        if (detokenize(tok.t, ids, true) != decoded_skip) report(i, "decode skipping specials", "");
        if (detokenize(tok.t, plain, false) != decoded_plain) report(i, "decode of plain ids", "");

        for (bool skip : {false, true}) {
            // Stream pieces are NUL-terminated C strings: a decoded U+0000 cannot pass through them
            // (specla_detokenize reports lengths and carries it).
            if ((skip ? decoded_skip : decoded).find('\0') != std::string::npos) continue;
            bool pieces_ok = true;
            const std::string streamed = stream_decode(tok.t, ids, skip, &pieces_ok);
            if (streamed != (skip ? decoded_skip : decoded)) report(i, "streamed decode differs", "");
            if (!pieces_ok) report(i, "streamed piece with broken UTF-8", "");
        }
    }
    CHECK_MESSAGE(failures == 0, name, ": ", failures, " of ", checked, " strings differ");

    // Arbitrary id sequences, mostly byte tokens: invalid UTF-8 must become U+FFFD exactly as in
    // the reference, whole and streamed.
    size_t decode_failures = 0, n_decodes = 0;
    for (const json &c : golden["random_decodes"]) {
        ++n_decodes;
        const auto ids = c["ids"].get<std::vector<int32_t>>();
        const std::string text = c["text"].get<std::string>();
        const std::string text_skip = c.value("text_skip", text);
        bool ok = detokenize(tok.t, ids, false) == text && detokenize(tok.t, ids, true) == text_skip;
        for (bool skip : {false, true}) {
            const std::string &want = skip ? text_skip : text;
            if (want.find('\0') != std::string::npos) continue;  // see above
            bool pieces_ok = true;
            ok = ok && stream_decode(tok.t, ids, skip, &pieces_ok) == want && pieces_ok;
        }
        if (!ok && ++decode_failures <= 4) {
            const std::string msg = name + ": random decode differs: \"" + printable(text) + "\"";
            MESSAGE(msg);
        }
    }
    CHECK(n_decodes >= 100);
    CHECK_MESSAGE(decode_failures == 0, name, ": ", decode_failures, " random decodes differ");
    return checked;
}

}  // namespace

TEST_CASE("tokenizer: golden encode/decode of gdn-pycode-22m (byte-level BPE)") {
    CHECK(check_golden("gdn") >= 2000);
}

TEST_CASE("tokenizer: golden encode/decode of the Llama-style SentencePiece BPE") {
    CHECK(check_golden("llama") >= 2000);
}

TEST_CASE("tokenizer: golden encode/decode of the variant pipelines") {
    for (const std::string name : {"metaspace_first", "metaspace_always", "bytelevel_split",
                                   "bytelevel_prefix", "whitespace"}) {
        CAPTURE(name);
        CHECK(check_golden(name) >= 1000);
    }
}

// The whole corpus as one text, eight times over (about 1 MiB): pieces many times longer than the
// corpus's strings, tokenized in one call. The ids were recorded before the regex engine's
// backtracking stack and limits changed (they must never change without a reason).
TEST_CASE("tokenizer: one long text keeps its ids") {
    const json corpus = read_json(kData + "/tokenizer/corpus.json");
    std::string text;
    for (int copy = 0; copy < 8; ++copy)
        for (const auto &s : corpus) text += s.get<std::string>() + "\n";
    struct Expected {
        std::string folder;
        size_t count;
        uint64_t hash;
    };
    for (const Expected &e : {Expected{kGdn, 452065, 7382469122961827540ull},
                              Expected{kData + "/tokenizer/variants/bytelevel_split", 611568,
                                       1667468127897396197ull},
                              Expected{kData + "/tokenizer/variants/bytelevel_prefix", 637680,
                                       10336492447587499727ull}}) {
        CAPTURE(e.folder);
        Tok tok(e.folder);
        const std::vector<int32_t> ids = tokenize(tok.t, text, false, true);
        uint64_t hash = 14695981039346656037ull;  // FNV-1a over the ids' values
        for (const int32_t id : ids) hash = (hash ^ uint64_t(uint32_t(id))) * 1099511628211ull;
        MESSAGE(ids.size(), " ids, hash ", hash);
        CHECK(ids.size() == e.count);
        CHECK(hash == e.hash);
    }
}

TEST_CASE("tokenizer: info") {
    Tok gdn(kGdn);
    specla_tokenizer_info info = test::info_struct<specla_tokenizer_info>();
    REQUIRE(specla_tokenizer_get_info(gdn.t, &info) == SPECLA_OK);
    CHECK(info.vocab_size == 8192);
    CHECK(info.bos_token_id == 0);
    CHECK(info.eos_token_id == 0);
    CHECK_FALSE(info.add_bos_default);

    Tok llama(kLlama);
    REQUIRE(specla_tokenizer_get_info(llama.t, &info) == SPECLA_OK);
    CHECK(info.vocab_size == 4263);
    CHECK(info.bos_token_id == 1);
    CHECK(info.eos_token_id == 2);
    CHECK(info.add_bos_default);

    Tok first(kData + "/tokenizer/variants/metaspace_first");  // no BOS anywhere
    REQUIRE(specla_tokenizer_get_info(first.t, &info) == SPECLA_OK);
    CHECK(info.bos_token_id == -1);
    CHECK(info.eos_token_id == -1);
    CHECK_FALSE(info.add_bos_default);
    CHECK(tokenize(first.t, "hello", true, true) == tokenize(first.t, "hello", false, true));
}

TEST_CASE("tokenizer: special tokens are matched only when parse_special is set") {
    Tok gdn(kGdn);
    const std::string eot = "<|endoftext|>";
    CHECK(tokenize(gdn.t, eot, false, true) == std::vector<int32_t>{0});
    const auto as_text = tokenize(gdn.t, eot, false, false);
    CHECK(as_text.size() > 1);
    for (int32_t id : as_text) CHECK(id != 0);
    CHECK(detokenize(gdn.t, as_text, false) == eot);
    const auto doc = tokenize(gdn.t, "x = 1\n" + eot + "\ny = 2", false, true);
    CHECK(std::count(doc.begin(), doc.end(), 0) == 1);
    CHECK(detokenize(gdn.t, doc, true) == "x = 1\n\ny = 2");
    CHECK(detokenize(gdn.t, doc, false) == "x = 1\n" + eot + "\ny = 2");

    Tok llama(kLlama);
    int32_t im_start = -1, tool = -1;
    REQUIRE(specla_token_from_string(llama.t, "<|im_start|>", &im_start) == SPECLA_OK);
    REQUIRE(specla_token_from_string(llama.t, "[TOOL]", &tool) == SPECLA_OK);
    const std::string chat = "<s><|im_start|>user\nhi [TOOL] x</s>";
    const auto parsed = tokenize(llama.t, chat, false, true);
    CHECK(parsed.front() == 1);
    CHECK(parsed.back() == 2);
    CHECK(std::count(parsed.begin(), parsed.end(), im_start) == 1);
    const auto plain = tokenize(llama.t, chat, false, false);
    for (int32_t id : plain) CHECK((id != 1 && id != 2 && id != im_start));
    // An added token that is not special is matched either way.
    CHECK(std::count(plain.begin(), plain.end(), tool) == 1);
    CHECK(std::count(parsed.begin(), parsed.end(), tool) == 1);
    // BOS prepending is independent of parsing.
    const auto with_bos = tokenize(llama.t, "hi", true, false);
    CHECK(with_bos.front() == 1);
    CHECK(std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()) == tokenize(llama.t, "hi", false, false));
}

TEST_CASE("tokenizer: token <-> string lookups") {
    Tok gdn(kGdn);
    char buf[256];
    size_t n = 0;
    REQUIRE(specla_token_to_string(gdn.t, 0, buf, sizeof buf, &n) == SPECLA_OK);
    CHECK(std::string(buf) == "<|endoftext|>");
    CHECK(n == 13);
    // Every vocabulary entry maps back to its own id.
    size_t mismatches = 0;
    for (int32_t id = 0; id < 8192; ++id) {
        REQUIRE(specla_token_to_string(gdn.t, id, buf, sizeof buf, &n) == SPECLA_OK);
        int32_t back = -1;
        REQUIRE(specla_token_from_string(gdn.t, buf, &back) == SPECLA_OK);
        if (back != id) ++mismatches;
    }
    CHECK(mismatches == 0);
    int32_t id = -1;
    REQUIRE(specla_token_from_string(gdn.t, "\xC4\xA0", &id) == SPECLA_OK);  // "Ġ": a space byte
    CHECK(detokenize(gdn.t, {id}, false) == " ");

    Tok llama(kLlama);
    REQUIRE(specla_token_from_string(llama.t, "<0x41>", &id) == SPECLA_OK);
    CHECK(id == 3 + 0x41);
    CHECK(detokenize(llama.t, {id}, false) == "A");
    REQUIRE(specla_token_to_string(llama.t, 2, buf, sizeof buf, &n) == SPECLA_OK);
    CHECK(std::string(buf) == "</s>");
    REQUIRE(specla_token_from_string(llama.t, "\xE2\x96\x81", &id) == SPECLA_OK);  // "▁"
    CHECK(specla_token_from_string(llama.t, "no such token", &id) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("no such token") != std::string::npos);
}

TEST_CASE("tokenizer: invalid UTF-8 from byte tokens decodes to U+FFFD; streaming holds back") {
    Tok gdn(kGdn);
    const std::string euro = "\xE2\x82\xAC";
    std::vector<int32_t> bytes;  // the three byte tokens of the euro sign: "â", "Ĥ", "¬"
    for (const char *piece : {"\xC3\xA2", "\xC4\xA4", "\xC2\xAC"}) {
        int32_t id = -1;
        REQUIRE(specla_token_from_string(gdn.t, piece, &id) == SPECLA_OK);
        bytes.push_back(id);
    }
    CHECK(detokenize(gdn.t, bytes, false) == euro);
    CHECK(detokenize(gdn.t, {bytes[0]}, false) == "\xEF\xBF\xBD");
    CHECK(detokenize(gdn.t, {bytes[0], bytes[1]}, false) == "\xEF\xBF\xBD");
    CHECK(detokenize(gdn.t, {bytes[2], bytes[0]}, false) == "\xEF\xBF\xBD\xEF\xBF\xBD");

    specla_stream_decoder *d = nullptr;
    REQUIRE(specla_stream_decoder_create(gdn.t, false, &d) == SPECLA_OK);
    const char *piece = nullptr;
    REQUIRE(specla_stream_decoder_push(d, bytes[0], &piece) == SPECLA_OK);
    CHECK(std::string(piece).empty());
    REQUIRE(specla_stream_decoder_push(d, bytes[1], &piece) == SPECLA_OK);
    CHECK(std::string(piece).empty());
    REQUIRE(specla_stream_decoder_push(d, bytes[2], &piece) == SPECLA_OK);
    CHECK(std::string(piece) == euro);
    // An incomplete character at flush becomes U+FFFD, and the decoder starts over.
    REQUIRE(specla_stream_decoder_push(d, bytes[0], &piece) == SPECLA_OK);
    CHECK(std::string(piece).empty());
    REQUIRE(specla_stream_decoder_flush(d, &piece) == SPECLA_OK);
    CHECK(std::string(piece) == "\xEF\xBF\xBD");
    const auto hello = tokenize(gdn.t, "hello", false, false);
    std::string again;
    for (int32_t id : hello) {
        REQUIRE(specla_stream_decoder_push(d, id, &piece) == SPECLA_OK);
        again += piece;
    }
    REQUIRE(specla_stream_decoder_flush(d, &piece) == SPECLA_OK);
    CHECK(again + piece == "hello");
    specla_stream_decoder_free(d);

    // Llama: the leading space of the first word is stripped once, not after every flush point.
    Tok llama(kLlama);
    const auto ids = tokenize(llama.t, "Hello world", true, true);
    bool ok = true;
    CHECK(stream_decode(llama.t, ids, true, &ok) == "Hello world");
    CHECK(stream_decode(llama.t, ids, false, &ok) == "<s> Hello world");
    CHECK(ok);
}

TEST_CASE("tokenizer: concurrent use of one tokenizer") {
    Tok gdn(kGdn);
    const json corpus = read_json(kData + "/tokenizer/corpus.json");
    std::vector<std::string> texts;
    for (size_t i = 0; i < corpus.size(); i += 3) texts.push_back(corpus[i].get<std::string>());
    std::vector<std::vector<int32_t>> expected;
    for (const auto &t : texts) expected.push_back(tokenize(gdn.t, t, false, true));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < 4; ++w) {
        threads.emplace_back([&, w] {
            for (size_t i = size_t(w); i < texts.size() * 2; i += 3) {
                const size_t k = i % texts.size();
                size_t n = 0;
                std::vector<int32_t> ids(texts[k].size() + 8);
                if (specla_tokenize(gdn.t, texts[k].data(), texts[k].size(), false, true, ids.data(),
                                    ids.size(), &n) != SPECLA_OK) {
                    ++failures;
                    continue;
                }
                ids.resize(n);
                if (ids != expected[k]) ++failures;
            }
        });
    }
    for (auto &t : threads) t.join();
    CHECK(failures.load() == 0);
}

TEST_CASE("tokenizer: bad inputs") {
    Tok gdn(kGdn);
    specla_tokenizer *t = reinterpret_cast<specla_tokenizer *>(1);
    int32_t ids[8];
    size_t n = 0;
    char buf[64];

    SUBCASE("NULL pointers") {
        CHECK(specla_tokenizer_load(nullptr, &t) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(t == nullptr);
        CHECK(specla_tokenizer_load(kGdn.c_str(), nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
        const specla_tokenizer *borrowed = nullptr;
        CHECK(specla_model_tokenizer(nullptr, &borrowed) == SPECLA_ERR_INVALID_ARGUMENT);
        specla_tokenizer_info info = test::info_struct<specla_tokenizer_info>();
        CHECK(specla_tokenizer_get_info(nullptr, &info) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_tokenizer_get_info(gdn.t, nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_tokenize(nullptr, "a", 1, false, true, ids, 8, &n) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_tokenize(gdn.t, nullptr, 1, false, true, ids, 8, &n) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_tokenize(gdn.t, "abc", 3, false, true, nullptr, 8, &n) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_detokenize(nullptr, ids, 1, false, buf, sizeof buf, &n) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_detokenize(gdn.t, nullptr, 1, false, buf, sizeof buf, &n) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_detokenize(gdn.t, ids, 0, false, nullptr, 1, &n) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_token_to_string(nullptr, 0, buf, sizeof buf, &n) == SPECLA_ERR_INVALID_ARGUMENT);
        int32_t id;
        CHECK(specla_token_from_string(gdn.t, nullptr, &id) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_token_from_string(gdn.t, "a", nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
        specla_stream_decoder *d = nullptr;
        CHECK(specla_stream_decoder_create(nullptr, false, &d) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_stream_decoder_create(gdn.t, false, nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
        const char *piece;
        CHECK(specla_stream_decoder_push(nullptr, 0, &piece) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(specla_stream_decoder_flush(nullptr, &piece) == SPECLA_ERR_INVALID_ARGUMENT);
        specla_tokenizer_free(nullptr);
        specla_stream_decoder_free(nullptr);
    }

    SUBCASE("empty text and empty id lists") {
        CHECK(specla_tokenize(gdn.t, "", 0, false, true, nullptr, 0, &n) == SPECLA_OK);
        CHECK(n == 0);
        CHECK(specla_tokenize(gdn.t, "", 0, true, true, ids, 8, &n) == SPECLA_OK);
        CHECK(n == 1);
        CHECK(ids[0] == 0);
        CHECK(specla_detokenize(gdn.t, nullptr, 0, false, buf, sizeof buf, &n) == SPECLA_OK);
        CHECK(n == 0);
        CHECK(buf[0] == '\0');
    }

    SUBCASE("capacity too small") {
        const std::string text = "def main():\n    return 0\n";
        CHECK(specla_tokenize(gdn.t, text.data(), text.size(), false, true, ids, 2, &n) ==
              SPECLA_ERR_CAPACITY);
        CHECK(n == tokenize(gdn.t, text, false, true).size());
        CHECK(n > 2);
        const std::vector<int32_t> hello = tokenize(gdn.t, "hello world", false, true);
        CHECK(specla_detokenize(gdn.t, hello.data(), hello.size(), false, buf, 11, &n) ==
              SPECLA_ERR_CAPACITY);
        CHECK(n == 11);  // one more byte is needed for the NUL
        CHECK(specla_detokenize(gdn.t, hello.data(), hello.size(), false, buf, 12, &n) == SPECLA_OK);
        CHECK(std::string(buf) == "hello world");
        CHECK(specla_token_to_string(gdn.t, 0, buf, 5, &n) == SPECLA_ERR_CAPACITY);
        CHECK(n == 13);
    }

    SUBCASE("token ids out of range") {
        const int32_t bad[] = {5, 8192};
        CHECK(specla_detokenize(gdn.t, bad, 2, false, buf, sizeof buf, &n) ==
              SPECLA_ERR_TOKEN_OUT_OF_RANGE);
        CHECK(std::string(specla_last_error()).find("8192") != std::string::npos);
        const int32_t negative[] = {-1};
        CHECK(specla_detokenize(gdn.t, negative, 1, false, buf, sizeof buf, &n) ==
              SPECLA_ERR_TOKEN_OUT_OF_RANGE);
        CHECK(specla_token_to_string(gdn.t, -1, buf, sizeof buf, &n) == SPECLA_ERR_TOKEN_OUT_OF_RANGE);
        CHECK(specla_token_to_string(gdn.t, 8192, buf, sizeof buf, &n) == SPECLA_ERR_TOKEN_OUT_OF_RANGE);
        specla_stream_decoder *d = nullptr;
        REQUIRE(specla_stream_decoder_create(gdn.t, false, &d) == SPECLA_OK);
        const char *piece = nullptr;
        CHECK(specla_stream_decoder_push(d, 100000, &piece) == SPECLA_ERR_TOKEN_OUT_OF_RANGE);
        CHECK(specla_stream_decoder_push(d, 5, &piece) == SPECLA_OK);  // still usable
        specla_stream_decoder_free(d);
    }

    SUBCASE("invalid UTF-8 text") {
        const char bad[] = "ok \xC3\x28 no";
        CHECK(specla_tokenize(gdn.t, bad, sizeof bad - 1, false, true, ids, 8, &n) ==
              SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(specla_last_error()).find("UTF-8") != std::string::npos);
    }

    SUBCASE("broken tokenizer folders") {
        const fs::path dir = fs::temp_directory_path() /
                             ("specla_tokenizer_test_" + std::to_string(std::random_device{}()));
        fs::create_directories(dir);
        auto write = [&](const std::string &name, const std::string &content) {
            fs::create_directories(dir / name);
            std::ofstream(dir / name / "tokenizer.json", std::ios::binary) << content;
            return (dir / name).string();
        };
        auto load_status = [&](const std::string &folder) {
            specla_tokenizer *tok = reinterpret_cast<specla_tokenizer *>(1);
            const specla_status st = specla_tokenizer_load(folder.c_str(), &tok);
            CHECK(tok == (st == SPECLA_OK ? tok : nullptr));
            specla_tokenizer_free(st == SPECLA_OK ? tok : nullptr);
            return st;
        };
        auto message_has = [](const char *what) {
            return std::string(specla_last_error()).find(what) != std::string::npos;
        };
        const std::string bpe =
            R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

        CHECK(load_status((dir / "does-not-exist").string()) == SPECLA_ERR_IO);
        CHECK(message_has("tokenizer.json"));
        CHECK(load_status(write("truncated", R"({"model": {"type": "BPE", "vocab": )")) ==
              SPECLA_ERR_FORMAT);
        CHECK(load_status(write("not-json", "this is not JSON")) == SPECLA_ERR_FORMAT);
        CHECK(load_status(write("no-model", R"({"normalizer": null})")) == SPECLA_ERR_FORMAT);
        CHECK(load_status(write("unigram", R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["a", -1.0]]}})")) ==
              SPECLA_ERR_UNSUPPORTED);
        CHECK(message_has("Unigram"));
        CHECK(load_status(write("wordpiece", R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0}}})")) ==
              SPECLA_ERR_UNSUPPORTED);
        CHECK(message_has("WordPiece"));
        CHECK(load_status(write("nfkc", R"({"normalizer": {"type": "NFKC"}, "model": )" + bpe + "}")) ==
              SPECLA_ERR_UNSUPPORTED);
        CHECK(message_has("NFKC"));
        CHECK(load_status(write("bert-pre", R"({"pre_tokenizer": {"type": "BertPreTokenizer"}, "model": )" + bpe + "}")) ==
              SPECLA_ERR_UNSUPPORTED);
        CHECK(message_has("BertPreTokenizer"));
        CHECK(load_status(write("ctc", R"({"decoder": {"type": "CTC"}, "model": )" + bpe + "}")) ==
              SPECLA_ERR_UNSUPPORTED);
        CHECK(message_has("CTC"));
        CHECK(load_status(write("bad-merge", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})")) ==
              SPECLA_ERR_FORMAT);
        CHECK(message_has("a b"));
        CHECK(load_status(write("bad-regex", R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false}, "model": )" + bpe + "}")) ==
              SPECLA_ERR_UNSUPPORTED);
        CHECK(message_has("(unclosed"));

        // A minimal valid file loads and works.
        const std::string ok = write("minimal", R"({"model": )" + bpe + "}");
        Tok minimal(ok);
        CHECK(tokenize(minimal.t, "abab", false, true) == std::vector<int32_t>{2, 2});
        CHECK(detokenize(minimal.t, {2, 0}, false) == "ab a");  // no decoder: joined by spaces
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
}

TEST_CASE("tokenizer: a model's own tokenizer") {
    specla_model_params params = specla_model_default_params();
    specla_model *model = nullptr;
    REQUIRE_MESSAGE(specla_model_load(kGdn.c_str(), &params, &model) == SPECLA_OK, specla_last_error());
    const specla_tokenizer *owned = nullptr;
    REQUIRE(specla_model_tokenizer(model, &owned) == SPECLA_OK);
    REQUIRE(owned != nullptr);
    Tok alone(kGdn);
    const std::string text = "def add(a, b):\n    return a + b\n<|endoftext|>";
    CHECK(tokenize(owned, text, false, true) == tokenize(alone.t, text, false, true));
    specla_tokenizer_free(const_cast<specla_tokenizer *>(owned));  // a no-op for a model's tokenizer
    CHECK(tokenize(owned, "still usable", false, true) == tokenize(alone.t, "still usable", false, true));
    specla_model_free(model);

    // No tokenizer.json (a random-weight fixture), or loading it switched off: SPECLA_ERR_STATE.
    model = nullptr;
    REQUIRE(specla_model_load((kData + "/gdn_tiny_a").c_str(), &params, &model) == SPECLA_OK);
    owned = reinterpret_cast<const specla_tokenizer *>(1);
    CHECK(specla_model_tokenizer(model, &owned) == SPECLA_ERR_STATE);
    CHECK(owned == nullptr);
    CHECK(std::string(specla_last_error()).find("tokenizer") != std::string::npos);
    specla_model_free(model);
    params.load_tokenizer = false;
    model = nullptr;
    REQUIRE(specla_model_load(kGdn.c_str(), &params, &model) == SPECLA_OK);
    CHECK(specla_model_tokenizer(model, &owned) == SPECLA_ERR_STATE);
    specla_model_free(model);
}
