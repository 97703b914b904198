// Concurrency through the public API, the promises of "Errors and threads" in the README: sessions
// of one model on several threads at once give what one thread gives, one tokenizer serves several
// threads, log callbacks may be installed while other threads log, and each thread has its own
// last-error message. Small and quick on purpose: tools/tsan_check.sh runs this suite under
// ThreadSanitizer (-ts=concurrency), where a data race fails the run even when the results agree.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"

namespace {

constexpr int kThreads = 4;
constexpr const char *kTiny = "gdn_tiny_a";

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

// Runs body(t) on kThreads threads at once, released together so that their calls overlap.
template <typename Body>
void on_threads(Body body) {
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            ++ready;
            while (ready.load() < kThreads) std::this_thread::yield();
            body(t);
        });
    for (auto &th : threads) th.join();
}

std::vector<int32_t> prompt_of(int t, int32_t vocab) {
    std::vector<int32_t> p;
    for (int i = 0; i < 6 + 5 * t; ++i) p.push_back((41 * t + 13 * i * i + 7) % vocab);
    // A repeated stretch, so that the prompt-lookup drafter proposes something.
    for (int i = 0; i < 4; ++i) p.push_back(p[size_t(i)]);
    return p;
}

struct Outputs {
    std::vector<int32_t> plain, sampled, speculative;
    std::string error;  // empty when every call succeeded
};

// Plain greedy, seeded sampling and greedy speculative generation, each in a fresh context.
Outputs generate_all(specla_model *model, const std::vector<int32_t> &prompt, int32_t max_tokens) {
    Outputs o;
    specla_session *s = nullptr;
    specla_drafter *d = nullptr;
    if (specla_session_create(model, nullptr, &s) != SPECLA_OK ||
        specla_drafter_create(model, nullptr, &d) != SPECLA_OK) {
        o.error = specla_last_error();
        specla_session_free(s);
        return o;
    }
    auto run = [&](std::vector<int32_t> &out, bool sample, bool spec) {
        if (!o.error.empty()) return;
        test::SpecParams sp;
        sp.generate.max_tokens = max_tokens;
        sp.generate.stop_at_eos = false;
        if (sample) {
            sp.generate.sampling.temperature = 0.8f;
            sp.generate.sampling.top_k = 40;
            sp.generate.sampling.seed = 1234;
        }
        out.resize(size_t(max_tokens));
        size_t n = 0;
        specla_session_reset(s);
        const specla_status st =
            spec ? specla_generate_speculative(s, d, prompt.data(), prompt.size(), sp.get(), out.data(), out.size(), &n,
                                               nullptr)
                 : specla_generate(s, prompt.data(), prompt.size(), sp.generate.get(), out.data(), out.size(), &n);
        if (st != SPECLA_OK) o.error = specla_last_error();
        out.resize(n);
    };
    run(o.plain, false, false);
    run(o.sampled, true, false);
    run(o.speculative, false, true);
    specla_drafter_free(d);
    specla_session_free(s);
    return o;
}

std::vector<int32_t> tokenize(const specla_tokenizer *tok, const std::string &text) {
    size_t n = 0;
    specla_tokenize(tok, text.data(), text.size(), false, true, nullptr, 0, &n);
    std::vector<int32_t> ids(n);
    if (specla_tokenize(tok, text.data(), text.size(), false, true, ids.data(), ids.size(), &n) != SPECLA_OK)
        return {-1};
    return ids;
}

std::string detokenize(const specla_tokenizer *tok, const std::vector<int32_t> &ids) {
    size_t n = 0;
    specla_detokenize(tok, ids.data(), ids.size(), false, nullptr, 0, &n);
    std::string text(n + 1, '\0');
    if (specla_detokenize(tok, ids.data(), ids.size(), false, text.data(), text.size(), &n) != SPECLA_OK)
        return "<error>";
    text.resize(n);
    return text;
}

std::string stream_detokenize(const specla_tokenizer *tok, const std::vector<int32_t> &ids) {
    specla_stream_decoder *dec = nullptr;
    if (specla_stream_decoder_create(tok, false, &dec) != SPECLA_OK) return "<error>";
    std::string text;
    const char *piece = nullptr;
    for (int32_t id : ids)
        if (specla_stream_decoder_push(dec, id, &piece) == SPECLA_OK) text += piece;
    if (specla_stream_decoder_flush(dec, &piece) == SPECLA_OK) text += piece;
    specla_stream_decoder_free(dec);
    return text;
}

// Log sinks that record which user data they were called with: a callback must always be called
// with the user data installed together with it.
struct LogCounter {
    std::atomic<int> loading{0};  // "loading <folder>: ..." messages received
    std::atomic<int> wrong{0};    // calls with another sink's user data, or an empty message
};
LogCounter g_sink_a, g_sink_b;

void count(LogCounter &sink, const char *message, void *user) {
    if (user != &sink || message == nullptr || *message == '\0') ++sink.wrong;
    else if (contains(message, "loading")) ++sink.loading;
}
void sink_a(specla_log_level, const char *message, void *user) { count(g_sink_a, message, user); }
void sink_b(specla_log_level, const char *message, void *user) { count(g_sink_b, message, user); }

}  // namespace

TEST_SUITE("concurrency") {

TEST_CASE("concurrency: sessions of one model on several threads match one thread") {
    // Two worker threads per call, so that each session's own pool runs while the others do.
    specla_model_params mp = specla_model_default_params();
    mp.n_threads = 2;
    test::ModelHandle model(test::fixture_dir(kTiny), mp);
    const int32_t vocab = model.info().vocab_size;
    constexpr int32_t kTokens = 12;

    std::vector<Outputs> want;
    for (int t = 0; t < kThreads; ++t) want.push_back(generate_all(model.m, prompt_of(t, vocab), kTokens));
    for (const Outputs &w : want) {
        REQUIRE(w.error.empty());
        REQUIRE(w.plain.size() == size_t(kTokens));
        CHECK(w.speculative == w.plain);  // greedy speculative decoding is exact
    }

    std::vector<Outputs> got(kThreads);
    on_threads([&](int t) { got[size_t(t)] = generate_all(model.m, prompt_of(t, vocab), kTokens); });
    for (int t = 0; t < kThreads; ++t) {
        CAPTURE(t);
        CHECK(got[size_t(t)].error == "");
        CHECK(got[size_t(t)].plain == want[size_t(t)].plain);
        CHECK(got[size_t(t)].sampled == want[size_t(t)].sampled);
        CHECK(got[size_t(t)].speculative == want[size_t(t)].speculative);
    }
}

TEST_CASE("concurrency: one tokenizer shared by several threads") {
    specla_tokenizer *tok = nullptr;
    const std::string folder = test::data_dir() + "/tokenizer/variants/bytelevel_split";
    REQUIRE(specla_tokenizer_load(folder.c_str(), &tok) == SPECLA_OK);
    const std::vector<std::string> texts = {
        "def add(a, b):\n    return a + b\n",
        "Hello, world! It's 2024; numbers 12345 and caf\xC3\xA9.",
        "  leading spaces, tabs\tand\nnew lines  ",
        "<|begin_of_text|>special TODO tokens<|end_of_text|>",
    };
    std::vector<std::vector<int32_t>> ids;
    std::vector<std::string> text_back, streamed;
    for (const auto &t : texts) {
        ids.push_back(tokenize(tok, t));
        text_back.push_back(detokenize(tok, ids.back()));
        streamed.push_back(stream_detokenize(tok, ids.back()));
        REQUIRE(ids.back() != std::vector<int32_t>{-1});
        CHECK(streamed.back() == text_back.back());
    }

    std::atomic<int> mismatches{0};
    on_threads([&](int t) {
        for (int round = 0; round < 3; ++round)
            for (size_t k = 0; k < texts.size(); ++k) {
                const size_t i = (k + size_t(t)) % texts.size();
                const std::vector<int32_t> mine = tokenize(tok, texts[i]);
                if (mine != ids[i]) ++mismatches;
                if (detokenize(tok, mine) != text_back[i]) ++mismatches;
                if (stream_detokenize(tok, mine) != streamed[i]) ++mismatches;
            }
    });
    CHECK(mismatches.load() == 0);
    specla_tokenizer_free(tok);
}

TEST_CASE("concurrency: log callbacks installed while other threads log") {
    // Loading a model logs at INFO level; one thread swaps the sink back and forth meanwhile.
    const std::string folder = test::fixture_dir(kTiny);
    std::atomic<bool> loading_done{false};
    std::atomic<int> load_failures{0};
    specla_set_log_callback(sink_a, &g_sink_a, SPECLA_LOG_INFO);
    on_threads([&](int t) {
        if (t == 0) {
            for (int i = 0; !loading_done.load() || i < 50; ++i) {
                if (i % 2) specla_set_log_callback(sink_a, &g_sink_a, SPECLA_LOG_INFO);
                else specla_set_log_callback(sink_b, &g_sink_b, SPECLA_LOG_INFO);
                std::this_thread::yield();
            }
            return;
        }
        for (int i = 0; i < 2; ++i) {
            specla_model *m = nullptr;
            if (specla_model_load(folder.c_str(), nullptr, &m) != SPECLA_OK) ++load_failures;
            specla_model_free(m);
        }
        if (t == kThreads - 1) loading_done = true;
    });
    specla_set_log_callback(nullptr, nullptr, SPECLA_LOG_WARN);
    CHECK(load_failures.load() == 0);
    CHECK(g_sink_a.loading.load() + g_sink_b.loading.load() >= 2 * (kThreads - 1));
    CHECK(g_sink_a.wrong.load() == 0);
    CHECK(g_sink_b.wrong.load() == 0);

    // After the default sink is restored, nothing reaches the old callbacks.
    const int before = g_sink_a.loading.load() + g_sink_b.loading.load();
    test::ModelHandle quiet(folder);
    CHECK(g_sink_a.loading.load() + g_sink_b.loading.load() == before);
}

TEST_CASE("concurrency: each thread keeps its own last-error message") {
    // Every thread fails with a message naming its own path, many times, interleaved with the
    // others; each must read back exactly its own message.
    std::atomic<int> wrong{0};
    on_threads([&](int t) {
        const std::string path = "/nonexistent/specla/thread-" + std::to_string(t);
        for (int i = 0; i < 20; ++i) {
            specla_model *m = nullptr;
            if (specla_model_load(path.c_str(), nullptr, &m) != SPECLA_ERR_IO) ++wrong;
            const std::string msg = specla_last_error();
            if (!contains(msg, path)) ++wrong;
            for (int u = 0; u < kThreads; ++u)
                if (u != t && contains(msg, "/thread-" + std::to_string(u))) ++wrong;
        }
    });
    CHECK(wrong.load() == 0);
}

}  // TEST_SUITE("concurrency")
