// Fuzz target: tokenizer.json loading (lib/tokenizer/), then tokenizing and detokenizing a text.
// Input: the tokenizer.json text, a NUL byte, one flags byte (bit 0 add_bos, bit 1 parse_special,
// bit 2 skip_special), then the text; without a NUL the whole input is the tokenizer.json and a
// fixed sample text is used. Besides sanitizer reports, a finding is: a refusal that is not a
// clean status, an id outside the vocabulary, decoded text that is not valid UTF-8, a stream
// decoder whose pieces differ from decode(), or an out-of-range id that is not refused.
//
// Each input runs on a thread with a 512 KiB stack (the size of a secondary thread on macOS, and
// more than musl gives): a library embedded in a host runs on the host's threads, so unbounded
// recursion on hostile input must show up here, not only beyond libFuzzer's 8 MiB main stack.
#include <pthread.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

constexpr size_t kStackBytes = 512 * 1024;
constexpr std::string_view kSampleText =
    "Hello world!  def f(x):\n\treturn x*2 # 123 4567 \xC3\xA9t\xC3\xA9 \xE2\x96\x81 \xF0\x9F\x98\x80 <s></s>";

struct Input {
    std::string_view json, text;
    bool add_bos = false, parse_special = true, skip_special = false;
};

Input split(const uint8_t *data, size_t size) {
    const std::string_view all(reinterpret_cast<const char *>(data), size);
    Input in;
    const size_t nul = all.find('\0');
    if (nul == std::string_view::npos) {
        in.json = all;
        in.text = kSampleText;
        return in;
    }
    in.json = all.substr(0, nul);
    std::string_view rest = all.substr(nul + 1);
    if (!rest.empty()) {
        const unsigned flags = static_cast<unsigned char>(rest[0]);
        in.add_bos = flags & 1u;
        in.parse_special = flags & 2u;
        in.skip_special = flags & 4u;
        rest.remove_prefix(1);
    }
    in.text = rest;
    return in;
}

void check_text(const std::string &text, const char *what) {
    const size_t bad = specla::tok::utf8_first_invalid(text);
    if (bad != text.size()) fuzz::finding(std::string(what) + " is not valid UTF-8 at byte " + std::to_string(bad));
}

void run(const Input &in) {
    std::unique_ptr<specla::Tokenizer> tok;
    try {
        tok = specla::Tokenizer::from_json(in.json);
    } catch (const specla::Error &e) {
        fuzz::check_refusal(e);
        return;
    }
    const int32_t vocab = tok->vocab_size();
    std::vector<int32_t> ids;
    try {
        ids = tok->encode(in.text, in.add_bos, in.parse_special);
    } catch (const specla::Error &e) {
        fuzz::check_refusal(e);
        if (e.status() != SPECLA_ERR_INVALID_ARGUMENT && e.status() != SPECLA_ERR_FORMAT)
            fuzz::finding(std::string("encode refused with an unexpected status: ") + e.what());
        ids.clear();
    }
    for (int32_t id : ids)
        if (id < 0 || id >= vocab) fuzz::finding("encode produced id " + std::to_string(id) + " outside the vocabulary");

    const std::string text = tok->decode(ids.data(), ids.size(), in.skip_special);
    check_text(text, "decode(encode(text))");
    specla::StreamDecoder stream(*tok, in.skip_special);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    if (streamed != text) fuzz::finding("stream decoder pieces differ from decode()");
    for (int32_t id : ids) tok->token_to_string(id);

    // Arbitrary ids made from the text bytes, one past the vocabulary included.
    std::vector<int32_t> raw;
    for (size_t i = 0; i + 1 < in.text.size() && raw.size() < 64; i += 2) {
        const uint32_t v = uint32_t(uint8_t(in.text[i])) << 8 | uint8_t(in.text[i + 1]);
        raw.push_back(int32_t(v % uint32_t(vocab + 1)));
    }
    bool out_of_range = false;
    for (int32_t id : raw) out_of_range |= id >= vocab;
    try {
        const std::string decoded = tok->decode(raw.data(), raw.size(), in.skip_special);
        if (out_of_range) fuzz::finding("decode accepted an id outside the vocabulary");
        check_text(decoded, "decode(arbitrary ids)");
    } catch (const specla::Error &e) {
        fuzz::check_refusal(e);
        if (!out_of_range || e.status() != SPECLA_ERR_TOKEN_OUT_OF_RANGE)
            fuzz::finding(std::string("decode refused ids in range: ") + e.what());
    }
}

void *run_thread(void *arg) {
    run(*static_cast<const Input *>(arg));
    return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const Input in = split(data, size);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kStackBytes);
    pthread_t thread;
    if (pthread_create(&thread, &attr, run_thread, const_cast<Input *>(&in)) != 0)
        fuzz::finding("pthread_create failed");
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
    return 0;
}
