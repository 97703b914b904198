// The public API used as careless or hostile hosts use it: a checkpoint whose vocabulary is padded
// beyond its tokenizer's, log callbacks that call back into the library, temperatures too small
// to divide by, sizes whose products wrap, generation budgets nobody means to allocate.
//
// Padded vocabulary: a copy of gdn-pycode-22m with vocab_size 8256 for its 8192-token tokenizer.
// The 64 padding rows of lm_head are copies, scaled by 16 (exact in BF16), of the rows of tokens
// the original emits, so that without masking a padding id wins wherever such a token's logit is
// positive. With the padding masked, every output of the copy must equal the original's exactly:
// logits of ids below 8192 are the same dot products, and the sampler sees the same candidates.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"
#include "support/safetensors_writer.h"

namespace {

using json = nlohmann::json;

constexpr int32_t kTokenizerVocab = 8192;
constexpr int32_t kPaddedVocab = 8256;
constexpr const char *kPrompt = "import os\n\n\ndef read_lines(path):\n    \"\"\"Return the lines of a text file.\"\"\"\n";

bool contains(const std::string &hay, const std::string &needle) { return hay.find(needle) != std::string::npos; }

std::string pycode() { return test::models_dir() + "/gdn-pycode-22m"; }

// `status` is `want` and the message mentions `needle`.
void expect_error(specla_status got, specla_status want, const std::string &needle) {
    const std::string msg = specla_last_error();
    INFO("status ", std::string(specla_status_string(got)), ", message: ", msg);
    CHECK(got == want);
    CHECK(contains(msg, needle));
}

// Runs `body` on another thread and fails the whole test program if it does not finish in time:
// a deadlock must fail the suite, not hang it.
void with_watchdog(const char *what, const std::function<void()> &body, int seconds = 120) {
    std::packaged_task<void()> task(body);
    std::future<void> done = task.get_future();
    std::thread runner(std::move(task));
    if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
        std::fprintf(stderr, "FATAL: '%s' did not finish within %d s (deadlock?)\n", what, seconds);
        std::fflush(stderr);
        std::_Exit(1);
    }
    runner.join();
    done.get();
}

// ---- the padded checkpoint ------------------------------------------------------------------

float bf16_to_f32(const char *p) {
    const uint32_t bits = uint32_t(uint8_t(p[0])) << 16 | uint32_t(uint8_t(p[1])) << 24;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Rows `sources` of a [rows, cols] BF16 tensor, scaled by `scale`, appended as new rows.
void append_rows(test::StTensor &t, const std::vector<int32_t> &sources, float scale) {
    REQUIRE(t.dtype == "BF16");
    const size_t row_bytes = size_t(t.shape[1]) * 2;
    for (int32_t src : sources) {
        std::string row = t.data.substr(size_t(src) * row_bytes, row_bytes);
        for (size_t i = 0; i < row.size(); i += 2) {
            const uint16_t h = test::detail::to_bf16(bf16_to_f32(row.data() + i) * scale);
            row[i] = char(h & 0xff);
            row[i + 1] = char(h >> 8);
        }
        t.data += row;
    }
    t.shape[0] += int64_t(sources.size());
}

// The padding rows mirror `favourites` (the tokens plain decoding of the original emits).
void write_padded_copy(const std::string &folder, std::vector<int32_t> favourites) {
    while (favourites.size() < size_t(kPaddedVocab - kTokenizerVocab)) favourites.push_back(favourites.back());
    favourites.resize(size_t(kPaddedVocab - kTokenizerVocab));
    std::vector<test::StTensor> tensors = test::read_tensors(pycode() + "/model.safetensors");
    int patched = 0;
    for (test::StTensor &t : tensors) {
        if (t.name == "lm_head.weight") append_rows(t, favourites, 16.f), ++patched;
        if (t.name == "model.embeddings.weight") append_rows(t, favourites, 1.f), ++patched;
    }
    REQUIRE(patched == 2);
    test::write_safetensors(folder + "/model.safetensors", tensors);
    json config = json::parse(test::read_file(pycode() + "/config.json"));
    config["vocab_size"] = kPaddedVocab;
    test::write_file(folder + "/config.json", config.dump(2));
    test::copy_file(pycode() + "/tokenizer.json", folder + "/tokenizer.json");
}

struct Streamed {
    std::vector<int32_t> ids;
    std::string text;
    static bool cb(int32_t token, const char *piece, void *ud) {
        auto *s = static_cast<Streamed *>(ud);
        if (token >= 0) s->ids.push_back(token);
        s->text += piece;
        return true;
    }
};

struct Output {
    specla_status status = SPECLA_OK;
    std::string error;
    std::vector<int32_t> ids;
    std::string text;
    bool operator==(const Output &o) const { return status == o.status && ids == o.ids && text == o.text; }
};

// Text generation from kPrompt on a fresh session, plain or speculative, then a second call on the
// same session continuing from it (the session must stay usable).
Output generate(specla_model *m, specla_sampling_params sampling, bool speculative, int32_t max_tokens = 24) {
    Output o;
    test::SessionHandle s(m);
    Streamed streamed;
    test::SpecParams sp;
    test::GenerateParams &gp = sp.generate;
    gp.sampling = sampling;
    gp.max_tokens = max_tokens;
    gp.stop_at_eos = false;
    gp.on_token = Streamed::cb;
    gp.user_data = &streamed;
    test::DrafterHandle d(m);
    for (int round = 0; round < 2 && o.status == SPECLA_OK; ++round) {
        const char *prompt = round == 0 ? kPrompt : "";
        char *text = nullptr;
        size_t n = 0;
        o.status = speculative ? specla_generate_speculative_text(s.s, d.d, prompt, sp.get(), &text, &n, nullptr)
                               : specla_generate_text(s.s, prompt, gp.get(), &text, &n);
        if (o.status != SPECLA_OK) o.error = specla_last_error();
        if (text) o.text += text;
        specla_string_free(text);
        gp.sampling.seed += 1;
    }
    o.ids = streamed.ids;
    CHECK(streamed.text == o.text);
    return o;
}

specla_sampling_params sampled(uint64_t seed, int32_t top_k = 0, float top_p = 1.f) {
    specla_sampling_params p = specla_sampling_default_params();
    p.temperature = 1.f;
    p.top_k = top_k;
    p.top_p = top_p;
    p.seed = seed;
    return p;
}

}  // namespace

// The padded copy, written once for all subcases (doctest reruns the test body per subcase).
const std::string &padded_folder(specla_model *original) {
    static test::TempDir dir;
    static bool written = false;
    if (!written) {
        const Output greedy_ref = generate(original, specla_sampling_default_params(), false);
        REQUIRE(greedy_ref.status == SPECLA_OK);
        const std::set<int32_t> seen(greedy_ref.ids.begin(), greedy_ref.ids.end());
        write_padded_copy(dir.path, std::vector<int32_t>(seen.begin(), seen.end()));
        written = true;
    }
    return dir.path;
}

TEST_CASE("a vocabulary padded beyond the tokenizer's: padding ids are never generated") {
    test::ModelHandle original(pycode());
    test::ModelHandle padded(padded_folder(original.m));
    CHECK(padded.info().vocab_size == kPaddedVocab);
    const specla_tokenizer *tok = nullptr;
    REQUIRE(specla_model_tokenizer(padded.m, &tok) == SPECLA_OK);
    specla_tokenizer_info ti = test::info_struct<specla_tokenizer_info>();
    REQUIRE(specla_tokenizer_get_info(tok, &ti) == SPECLA_OK);
    CHECK(ti.vocab_size == kTokenizerVocab);

    SUBCASE("the padding rows would win: their logits exceed every token's at the prompt's end") {
        test::SessionHandle s(padded.m);
        const std::vector<int32_t> ids = test::tokenize(padded.m, kPrompt);
        const std::vector<float> logits = s.eval(ids, SPECLA_LOGITS_LAST, kPaddedVocab);
        CHECK(test::argmax(logits.data(), logits.size()) >= size_t(kTokenizerVocab));
    }
    SUBCASE("greedy and sampled, plain and speculative: the original's output exactly") {
        struct Case {
            const char *what;
            specla_sampling_params sampling;
        };
        const Case cases[] = {{"greedy", specla_sampling_default_params()},
                              {"sampled top-k 50", sampled(12, 50)},
                              {"sampled top-p 0.9", sampled(13, 0, 0.9f)}};
        for (const Case &c : cases) {
            for (bool speculative : {false, true}) {
                CAPTURE(c.what);
                CAPTURE(speculative);
                // Speculative sampling is distributed as plain sampling but draws its own random
                // stream: compare like with like.
                const Output want = generate(original.m, c.sampling, speculative);
                const Output got = generate(padded.m, c.sampling, speculative);
                INFO("padded model: ", got.error);
                REQUIRE(got.status == SPECLA_OK);
                CHECK(got == want);
                for (int32_t t : got.ids) CHECK(t < kTokenizerVocab);
            }
        }
    }
    SUBCASE("id generation and the verification primitive never choose a padding id") {
        test::SessionHandle s(padded.m);
        const std::vector<int32_t> prompt = test::tokenize(padded.m, kPrompt);
        test::GenerateParams gp;
        gp.max_tokens = 24;
        gp.stop_at_eos = false;
        const std::vector<int32_t> ids = s.generate(prompt, gp);
        test::SessionHandle ref(original.m);
        CHECK(ids == ref.generate(prompt, gp));
        // A draft of padding ids (a caller's own drafter may propose anything below vocab_size):
        // rejected, greedy and sampled, and the bonus is a token.
        for (float temperature : {0.f, 1.f}) {
            CAPTURE(temperature);
            const int32_t draft[] = {kTokenizerVocab + 3, kTokenizerVocab + 5};
            const int32_t parents[] = {-1, 0};
            specla_sampling_params sp = specla_sampling_default_params();
            sp.temperature = temperature;
            int32_t accepted[2];
            size_t n_accepted = 99;
            int32_t bonus = -1;
            REQUIRE(specla_session_verify_tree(s.s, draft, parents, 2, nullptr, test::VerifyParams(sp).get(), accepted,
                                               &n_accepted, &bonus, nullptr) == SPECLA_OK);
            CHECK(n_accepted == 0);
            CHECK(bonus >= 0);
            CHECK(bonus < kTokenizerVocab);
        }
    }
}

TEST_CASE("a temperature too small to divide by samples greedily; non-finite parameters are refused") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
    test::GenerateParams gp;
    gp.max_tokens = 16;
    gp.stop_at_eos = false;
    std::vector<int32_t> greedy;
    {
        test::SessionHandle s(model.m);
        greedy = s.generate(prompt, gp);
    }
    SUBCASE("subnormal, FLT_MIN and tiny temperatures give the greedy tokens") {
        for (float t : {std::numeric_limits<float>::denorm_min(), 1e-40f, SPECLA_LIMIT_MIN_TEMPERATURE,
                        std::numeric_limits<float>::min(), 1e-30f}) {
            CAPTURE(t);
            gp.sampling.temperature = t;
            gp.sampling.seed = 3;
            test::SessionHandle s(model.m);
            CHECK(s.generate(prompt, gp) == greedy);
            test::SessionHandle s2(model.m);
            test::DrafterHandle d(model.m);
            test::SpecParams sp;
            sp.generate = gp;
            std::vector<int32_t> out(16);
            size_t n = 0;
            REQUIRE(specla_generate_speculative(s2.s, d.d, prompt.data(), prompt.size(), sp.get(), out.data(),
                                                out.size(), &n, nullptr) == SPECLA_OK);
            out.resize(n);
            CHECK(out == greedy);
        }
    }
    SUBCASE("NaN, infinite and negative values are refused with the field's name") {
        const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
        struct Case {
            float temperature, top_p;
            int32_t top_k;
            const char *field;
        };
        const Case cases[] = {{inf, 1.f, 0, "temperature"},  {-inf, 1.f, 0, "temperature"},
                              {nan, 1.f, 0, "temperature"},  {-1e-30f, 1.f, 0, "temperature"},
                              {1.f, inf, 0, "top_p"},        {1.f, nan, 0, "top_p"},
                              {1.f, -0.f, 0, "top_p"},       {1.f, 1.f, -2, "top_k"}};
        test::SessionHandle s(model.m);
        test::DrafterHandle d(model.m);
        for (const Case &c : cases) {
            CAPTURE(c.temperature);
            CAPTURE(c.top_p);
            CAPTURE(c.top_k);
            test::GenerateParams bad = gp;
            bad.sampling.temperature = c.temperature;
            bad.sampling.top_p = c.top_p;
            bad.sampling.top_k = c.top_k;
            std::vector<int32_t> out(16);
            size_t n = 0;
            expect_error(specla_generate(s.s, prompt.data(), prompt.size(), bad.get(), out.data(), out.size(), &n),
                         SPECLA_ERR_INVALID_ARGUMENT, c.field);
            test::SpecParams sp;
            sp.generate = bad;
            expect_error(specla_generate_speculative(s.s, d.d, prompt.data(), prompt.size(), sp.get(), out.data(),
                                                     out.size(), &n, nullptr),
                         SPECLA_ERR_INVALID_ARGUMENT, c.field);
            int32_t bonus = -1;
            size_t n_accepted = 0;
            expect_error(
                specla_session_verify_tree(s.s, nullptr, nullptr, 0, nullptr, test::VerifyParams(bad.sampling).get(),
                                           nullptr, &n_accepted, &bonus, nullptr),
                SPECLA_ERR_INVALID_ARGUMENT, c.field);
        }
        int64_t past = -1;
        REQUIRE(specla_session_n_past(s.s, &past) == SPECLA_OK);
        CHECK(past == 0);
    }
}

TEST_CASE("a logits capacity whose n_tokens x vocab_size wraps is refused before any token is read") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    const size_t vocab = size_t(model.info().vocab_size);
    test::SessionHandle s(model.m);
    // n_tokens x vocab = 2^64 + vocab: wraps to exactly the buffer's size. The ids after the
    // first are never read when the check is right; a -1 there makes a wrong check visible as a
    // token error instead of a read past the array.
    const size_t n_tokens = (SIZE_MAX / vocab) + 2;
    REQUIRE(n_tokens * vocab < vocab * 4);  // it does wrap
    std::vector<float> logits(n_tokens * vocab);
    const int32_t tokens[] = {1, -1};
    expect_error(specla_session_eval(s.s, tokens, n_tokens, SPECLA_LOGITS_ALL, logits.data(), logits.size()),
                 SPECLA_ERR_INVALID_ARGUMENT, "n_tokens x vocab_size");
    int64_t past = -1;
    REQUIRE(specla_session_n_past(s.s, &past) == SPECLA_OK);
    CHECK(past == 0);
}

TEST_CASE("ids can be generated without a buffer sized by the budget") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    const int32_t prompt[] = {1, 2, 3};
    struct Stop {
        std::vector<int32_t> ids;
        size_t after = 9;
        static bool cb(int32_t token, const char *, void *ud) {
            auto *s = static_cast<Stop *>(ud);
            s->ids.push_back(token);
            return s->ids.size() < s->after;
        }
    };
    test::GenerateParams gp;
    gp.stop_at_eos = false;
    gp.max_tokens = 9;
    std::vector<int32_t> want;
    {
        test::SessionHandle s(model.m);
        want = s.generate({1, 2, 3}, gp);
    }
    gp.max_tokens = std::numeric_limits<int32_t>::max();  // an unbounded budget, stopped by the callback
    for (bool speculative : {false, true}) {
        CAPTURE(speculative);
        test::SessionHandle s(model.m);
        test::DrafterHandle d(model.m);
        Stop stop;
        gp.on_token = Stop::cb;
        gp.user_data = &stop;
        size_t n = 0;
        specla_status st;
        if (speculative) {
            test::SpecParams sp;
            sp.generate = gp;
            st = specla_generate_speculative(s.s, d.d, prompt, 3, sp.get(), nullptr, 0, &n, nullptr);
        } else {
            st = specla_generate(s.s, prompt, 3, gp.get(), nullptr, 0, &n);
        }
        INFO(std::string(specla_last_error()));
        REQUIRE(st == SPECLA_OK);
        CHECK(n == 9);
        CHECK(stop.ids == want);
        // A buffer that is there but smaller than the budget is still refused.
        int32_t small[4];
        expect_error(specla_generate(s.s, prompt, 3, gp.get(), small, 4, &n), SPECLA_ERR_CAPACITY, "max_tokens");
    }
}

TEST_CASE("stop-string arguments are checked before they are read") {
    test::ModelHandle model(pycode());
    test::SessionHandle s(model.m);
    const int32_t prompt[] = {0, 318, 1207};
    int32_t out[4];
    size_t n = 0;
    test::GenerateParams gp;
    gp.max_tokens = 4;
    const char *one[] = {"\n"};
    gp.stop_strings = one;
    gp.n_stop_strings = SIZE_MAX;  // e.g. a -1 that became a size_t: the array is not read
    expect_error(specla_generate(s.s, prompt, 3, gp.get(), out, 4, &n), SPECLA_ERR_INVALID_ARGUMENT,
                 "SPECLA_LIMIT_STOP_STRINGS");
    gp.n_stop_strings = SPECLA_LIMIT_STOP_STRINGS + 1;
    expect_error(specla_generate(s.s, prompt, 3, gp.get(), out, 4, &n), SPECLA_ERR_INVALID_ARGUMENT, "n_stop_strings");
    const char *with_null[] = {"\n", nullptr};
    gp.stop_strings = with_null;
    gp.n_stop_strings = 2;
    expect_error(specla_generate(s.s, prompt, 3, gp.get(), out, 4, &n), SPECLA_ERR_INVALID_ARGUMENT, "stop string 1");
    gp.stop_strings = nullptr;
    gp.n_stop_strings = 1;
    expect_error(specla_generate(s.s, prompt, 3, gp.get(), out, 4, &n), SPECLA_ERR_INVALID_ARGUMENT, "stop_strings");
    int64_t past = -1;
    REQUIRE(specla_session_n_past(s.s, &past) == SPECLA_OK);
    CHECK(past == 0);
}

// ---- log callbacks that call back into the library --------------------------------------------

namespace {

struct LogRecord {
    std::mutex mutex;
    std::vector<std::string> messages;
    std::atomic<int> calls{0};
    void add(const char *m) {
        std::lock_guard<std::mutex> lock(mutex);
        messages.emplace_back(m);
    }
};

LogRecord *g_record = nullptr;

size_t count_containing(const std::vector<std::string> &messages, const std::string &needle) {
    size_t n = 0;
    for (const std::string &m : messages) n += contains(m, needle) ? 1 : 0;
    return n;
}

void uninstall_self(specla_log_level, const char *message, void *ud) {
    static_cast<LogRecord *>(ud)->add(message);
    specla_set_log_callback(nullptr, nullptr, SPECLA_LOG_WARN);
}

void load_a_model(specla_log_level, const char *message, void *ud) {
    auto *r = static_cast<LogRecord *>(ud);
    r->add(message);
    if (r->calls++ == 0) {  // only from the first message: the nested load logs again
        specla_model *m = nullptr;
        const specla_status st = specla_model_load(test::fixture_dir("gdn_tiny_a").c_str(), nullptr, &m);
        r->add(st == SPECLA_OK ? "nested load ok" : "nested load failed");
        specla_model_free(m);
    }
}

void second_sink(specla_log_level, const char *message, void *) { g_record->add((std::string("B: ") + message).c_str()); }

void replace_with_second(specla_log_level, const char *message, void *ud) {
    static_cast<LogRecord *>(ud)->add((std::string("A: ") + message).c_str());
    specla_set_log_callback(second_sink, nullptr, SPECLA_LOG_INFO);
}

void load_tiny() {
    specla_model *m = nullptr;
    REQUIRE(specla_model_load(test::fixture_dir("gdn_tiny_a").c_str(), nullptr, &m) == SPECLA_OK);
    specla_model_free(m);
}

// A sink whose user_data is freed as soon as it has been replaced.
struct Owned {
    static constexpr uint64_t kAlive = 0x5ec1a0000a11fe;
    uint64_t magic = kAlive;
    std::atomic<int> calls{0};
    ~Owned() { magic = 0; }
};
std::atomic<int> g_dead_user_data{0};
void owned_sink(specla_log_level, const char *, void *ud) {
    auto *o = static_cast<Owned *>(ud);
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // widen the window
    if (o->magic != Owned::kAlive) ++g_dead_user_data;
    ++o->calls;
}

}  // namespace

TEST_CASE("a log callback may call back into the library") {
    SUBCASE("it uninstalls itself") {
        LogRecord r;
        with_watchdog("a log callback that uninstalls itself", [&] {
            specla_set_log_callback(uninstall_self, &r, SPECLA_LOG_INFO);
            load_tiny();  // logs "loading ..." at INFO
            load_tiny();  // the default sink now: nothing reaches r
        });
        CHECK(r.messages.size() == 1);
    }
    SUBCASE("it loads a model") {
        LogRecord r;
        with_watchdog("a log callback that loads a model", [&] {
            specla_set_log_callback(load_a_model, &r, SPECLA_LOG_INFO);
            load_tiny();
            specla_set_log_callback(nullptr, nullptr, SPECLA_LOG_WARN);
        });
        // The outer load's message, the nested load's (the callback re-entered), the nested result.
        CHECK(count_containing(r.messages, "loading") == 2);
        CHECK(count_containing(r.messages, "nested load ok") == 1);
    }
    SUBCASE("it replaces itself: the new sink receives the later messages") {
        LogRecord r;
        g_record = &r;
        with_watchdog("a log callback that installs another", [&] {
            specla_set_log_callback(replace_with_second, &r, SPECLA_LOG_INFO);
            load_tiny();
            load_tiny();
            specla_set_log_callback(nullptr, nullptr, SPECLA_LOG_WARN);
        });
        g_record = nullptr;
        REQUIRE(!r.messages.empty());
        CHECK(contains(r.messages[0], "A: "));
        CHECK(count_containing(r.messages, "A: ") == 1);
        CHECK(count_containing(r.messages, "B: loading") >= 1);
    }
}

TEST_CASE("replacing the log sink while other threads log: the old user_data may be freed on return") {
    g_dead_user_data = 0;
    std::atomic<bool> stop{false};
    std::atomic<int> loads{0};
    with_watchdog("sink replacement under concurrent logging", [&] {
        std::vector<std::thread> loggers;
        for (int i = 0; i < 2; ++i)
            loggers.emplace_back([&] {
                while (!stop) {
                    load_tiny();
                    ++loads;
                }
            });
        static Owned permanent;
        int delivered = 0;
        for (int i = 0; i < 40; ++i) {
            auto *o = new Owned;
            specla_set_log_callback(owned_sink, o, SPECLA_LOG_INFO);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            // Replaced by another sink or by the default one.
            specla_set_log_callback(i % 2 ? nullptr : owned_sink, &permanent, SPECLA_LOG_INFO);
            delivered += o->calls;
            delete o;  // allowed: no call to the replaced sink is running any more
        }
        stop = true;
        for (auto &t : loggers) t.join();
        specla_set_log_callback(nullptr, nullptr, SPECLA_LOG_WARN);
        MESSAGE(loads.load(), " loads, ", delivered, " messages delivered to sinks freed right after");
    });
    CHECK(g_dead_user_data == 0);
    CHECK(loads > 0);
}
