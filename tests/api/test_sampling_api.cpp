// Sampling transformations through the public API: logit bias, repetition / presence / frequency
// penalties and min-p. Plain greedy with them equals a reference loop (evaluate, transform by
// hand, argmax); greedy speculative generation with them equals plain greedy with them; bad
// values are refused naming the field; a random seed is reported and repeats the run.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "specla/specla.h"
#include "support/api_helpers.h"
#include "support/fixture.h"

namespace {

// The header's definition, written out independently: bias, then for each token seen c times
// in the last `last_n` tokens: repetition (divide positive, multiply negative), minus
// c x frequency, minus presence; then the argmax over the candidates (lowest id on ties).
int32_t reference_greedy(std::vector<float> l, const std::vector<int32_t> &history, const specla_sampling_params &p,
                         int32_t n_candidates) {
    for (size_t i = 0; i < p.n_logit_bias; ++i) l[size_t(p.logit_bias[i].token)] += p.logit_bias[i].bias;
    const size_t n = p.penalty_last_n < 0 ? history.size() : std::min(history.size(), size_t(p.penalty_last_n));
    std::map<int32_t, int> count;
    for (size_t i = history.size() - n; i < history.size(); ++i) ++count[history[i]];
    for (const auto &[t, c] : count) {
        float &x = l[size_t(t)];
        x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
        x -= float(c) * p.frequency_penalty + p.presence_penalty;
    }
    int32_t best = 0;
    for (int32_t i = 1; i < n_candidates; ++i)
        if (l[size_t(i)] > l[size_t(best)]) best = i;
    return best;
}

std::vector<int32_t> reference_loop(specla_model *m, const std::vector<int32_t> &prompt, int32_t max_tokens,
                                    const specla_sampling_params &p, int32_t n_candidates) {
    test::SessionHandle s(m);
    const int32_t vocab = test::ModelHandle::info_of(m).vocab_size;
    std::vector<int32_t> history = prompt, out;
    std::vector<float> logits = s.eval(prompt, SPECLA_LOGITS_LAST, vocab);
    while (int32_t(out.size()) < max_tokens) {
        const int32_t t = reference_greedy(logits, history, p, n_candidates);
        out.push_back(t);
        history.push_back(t);
        logits = s.eval({t}, SPECLA_LOGITS_LAST, vocab);
    }
    return out;
}

int32_t candidates_of(specla_model *m) {
    const specla_tokenizer *tok = nullptr;
    if (specla_model_tokenizer(m, &tok) != SPECLA_OK) return test::ModelHandle::info_of(m).vocab_size;
    specla_tokenizer_info ti = test::info_struct<specla_tokenizer_info>();
    REQUIRE(specla_tokenizer_get_info(tok, &ti) == SPECLA_OK);
    return ti.vocab_size;
}

struct Settings {
    const char *name;
    float repetition, presence, frequency;
    int32_t last_n;
    std::vector<specla_logit_bias> bias;
};

const std::vector<Settings> kSettings = {
    {"repetition 1.3, window 64", 1.3f, 0.f, 0.f, 64, {}},
    {"presence 0.8 + frequency 0.4, window 16", 1.f, 0.8f, 0.4f, 16, {}},
    {"all penalties, whole context, bias", 1.2f, 0.3f, 0.3f, -1, {{11, 2.5f}, {25, -4.f}, {11, 0.5f}}},
    {"bias only", 1.f, 0.f, 0.f, 64, {{3, 6.f}, {7, 3.f}}},
};

specla_sampling_params with(const Settings &k) {
    specla_sampling_params p = specla_sampling_default_params();
    p.repetition_penalty = k.repetition;
    p.presence_penalty = k.presence;
    p.frequency_penalty = k.frequency;
    p.penalty_last_n = k.last_n;
    p.logit_bias = k.bias.empty() ? nullptr : k.bias.data();
    p.n_logit_bias = k.bias.size();
    return p;
}

specla_status generate_status(specla_session *s, const specla_sampling_params &sp, std::string &message) {
    test::GenerateParams gp;
    gp.sampling = sp;
    gp.max_tokens = 2;
    const int32_t prompt[] = {1, 2};
    size_t n = 0;
    const specla_status st = specla_generate(s, prompt, 2, gp.get(), nullptr, 0, &n);
    message = specla_last_error();
    return st;
}

}  // namespace

TEST_CASE("sampling params: defaults leave the transformations off") {
    const specla_sampling_params p = specla_sampling_default_params();
    CHECK(p.repetition_penalty == 1.f);
    CHECK(p.presence_penalty == 0.f);
    CHECK(p.frequency_penalty == 0.f);
    CHECK(p.penalty_last_n == 64);
    CHECK(p.min_p == 0.f);
    CHECK(p.logit_bias == nullptr);
    CHECK(p.n_logit_bias == 0);
    const test::SpecParams sp;
    CHECK(sp.generate.sampling.repetition_penalty == 1.f);
    CHECK(sp.generate.sampling.penalty_last_n == 64);
}

TEST_CASE("plain greedy with penalties and bias equals the reference loop") {
    for (const char *name : {"gdn_tiny_a", "gdn_tiny_b"}) {
        test::ModelHandle model(test::fixture_dir(name));
        const auto prompt = test::load_expected(name).i32("input_ids");
        const int32_t vocab = model.info().vocab_size;
        for (const Settings &k : kSettings) {
            specla_sampling_params sp = with(k);
            std::vector<specla_logit_bias> bias = k.bias;
            for (auto &b : bias) b.token %= vocab;
            sp.logit_bias = bias.empty() ? nullptr : bias.data();
            test::GenerateParams gp;
            gp.sampling = sp;
            gp.max_tokens = 24;
            gp.stop_at_eos = false;
            test::SessionHandle s(model.m);
            INFO(name, ": ", k.name);
            const auto got = s.generate(prompt, gp);
            CHECK(got == reference_loop(model.m, prompt, gp.max_tokens, sp, candidates_of(model.m)));
            // And the penalties changed something (else the test would prove little).
            test::GenerateParams plain = gp;
            plain.sampling = specla_sampling_default_params();
            test::SessionHandle s2(model.m);
            if (k.repetition != 1.f || k.presence != 0.f || !k.bias.empty()) CHECK(s2.generate(prompt, plain) != got);
        }
    }
}

TEST_CASE("greedy speculative with penalties equals plain greedy with penalties (gdn-pycode-22m)") {
    test::ModelHandle model(test::models_dir() + "/gdn-pycode-22m");
    const auto j = nlohmann::json::parse(test::read_file(test::models_dir() + "/gdn-pycode-22m/eval_prompts.json"));
    const auto &prompts = j.at("prompts");
    const int32_t n_candidates = candidates_of(model.m);
    int64_t accepted = 0;
    for (size_t i = 0; i < 8; ++i) {
        const auto ids = test::tokenize(model.m, prompts.at(i * 9).get<std::string>());
        const Settings &k = kSettings[i % kSettings.size()];
        test::GenerateParams gp;
        gp.sampling = with(k);
        gp.max_tokens = 40;
        gp.stop_at_eos = false;
        INFO("prompt ", i * 9, ": ", k.name);
        test::SessionHandle plain(model.m);
        const auto want = plain.generate(ids, gp);
        if (i < 2) CHECK(want == reference_loop(model.m, ids, gp.max_tokens, gp.sampling, n_candidates));
        for (bool deferred : {true, false}) {
            test::SessionHandle s(model.m);
            test::DrafterHandle d(model.m);
            test::SpecParams p;
            p.generate = gp;
            p.deferred_commit = deferred;
            p.max_draft_nodes = 6;
            std::vector<int32_t> got(size_t(gp.max_tokens));
            size_t n = 0;
            specla_spec_stats stats = test::info_struct<specla_spec_stats>();
            REQUIRE(specla_generate_speculative(s.s, d.d, ids.data(), ids.size(), p.get(), got.data(), got.size(), &n,
                                                &stats) == SPECLA_OK);
            got.resize(n);
            CHECK(got == want);
            accepted += stats.accepted;
        }
    }
}

TEST_CASE("sampling params: bad values are refused naming the field") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    test::SessionHandle s(model.m);
    const int32_t vocab = model.info().vocab_size;
    struct Bad {
        const char *field;
        void (*set)(specla_sampling_params &);
    };
    static specla_logit_bias out_of_range[] = {{0, 1.f}, {0, 0.f}};
    static specla_logit_bias negative[] = {{-1, 1.f}};
    static specla_logit_bias not_finite[] = {{1, 1.f}, {2, NAN}};
    static specla_logit_bias infinite[] = {{1, -INFINITY}};
    out_of_range[1].token = vocab;
    const Bad cases[] = {
        {"repetition_penalty", [](specla_sampling_params &p) { p.repetition_penalty = 0.f; }},
        {"repetition_penalty", [](specla_sampling_params &p) { p.repetition_penalty = -1.f; }},
        {"repetition_penalty", [](specla_sampling_params &p) { p.repetition_penalty = NAN; }},
        {"repetition_penalty", [](specla_sampling_params &p) { p.repetition_penalty = INFINITY; }},
        {"presence_penalty", [](specla_sampling_params &p) { p.presence_penalty = NAN; }},
        {"frequency_penalty", [](specla_sampling_params &p) { p.frequency_penalty = INFINITY; }},
        {"penalty_last_n", [](specla_sampling_params &p) { p.penalty_last_n = -2; }},
        {"min_p", [](specla_sampling_params &p) { p.min_p = -0.1f; }},
        {"min_p", [](specla_sampling_params &p) { p.min_p = 1.5f; }},
        {"min_p", [](specla_sampling_params &p) { p.min_p = NAN; }},
        {"logit_bias is NULL", [](specla_sampling_params &p) { p.n_logit_bias = 3; }},
        {"SPECLA_LIMIT_LOGIT_BIAS", [](specla_sampling_params &p) {
             p.logit_bias = negative;
             p.n_logit_bias = size_t(SPECLA_LIMIT_LOGIT_BIAS) + 1;
         }},
        {"SPECLA_LIMIT_LOGIT_BIAS", [](specla_sampling_params &p) {
             p.logit_bias = negative;
             p.n_logit_bias = size_t(-1);
         }},
        {"logit_bias[1].token", [](specla_sampling_params &p) {
             p.logit_bias = out_of_range;
             p.n_logit_bias = 2;
         }},
        {"logit_bias[0].token", [](specla_sampling_params &p) {
             p.logit_bias = negative;
             p.n_logit_bias = 1;
         }},
        {"logit_bias[1].bias", [](specla_sampling_params &p) {
             p.logit_bias = not_finite;
             p.n_logit_bias = 2;
         }},
        {"logit_bias[0].bias", [](specla_sampling_params &p) {
             p.logit_bias = infinite;
             p.n_logit_bias = 1;
         }},
    };
    for (const Bad &b : cases) {
        specla_sampling_params p = specla_sampling_default_params();
        b.set(p);
        std::string message;
        INFO(b.field);
        CHECK(generate_status(s.s, p, message) == SPECLA_ERR_INVALID_ARGUMENT);
        CHECK(message.find(b.field) != std::string::npos);
        INFO(message);
    }
    // The session is still usable, and nothing was generated by the refused calls.
    specla_sampling_params ok = specla_sampling_default_params();
    ok.min_p = 1.f;
    ok.penalty_last_n = -1;
    std::string message;
    CHECK(generate_status(s.s, ok, message) == SPECLA_OK);
    // The same checks guard the speculative calls and the verification primitive.
    test::SpecParams sp;
    sp.generate.sampling.min_p = 2.f;
    test::DrafterHandle d(model.m);
    specla_generation *gen = nullptr;
    CHECK(specla_generation_begin(s.s, d.d, nullptr, 0, sp.get(), &gen) == SPECLA_ERR_INVALID_ARGUMENT);
    CHECK(std::string(specla_last_error()).find("min_p") != std::string::npos);
    CHECK(gen == nullptr);
    int32_t bonus = -1;
    size_t n_acc = 0;
    CHECK(specla_session_verify_tree(s.s, nullptr, nullptr, 0, nullptr, test::VerifyParams(sp.generate.sampling).get(),
                                     nullptr, &n_acc, &bonus, nullptr) == SPECLA_ERR_INVALID_ARGUMENT);
}

TEST_CASE("a random seed is reported and repeats the generation") {
    test::ModelHandle model(test::fixture_dir("gdn_tiny_a"));
    const auto prompt = test::load_expected("gdn_tiny_a").i32("input_ids");
    auto run = [&](uint64_t seed, bool speculative, uint64_t &used) {
        test::SessionHandle s(model.m);
        test::DrafterHandle d(model.m);
        test::SpecParams p;
        p.generate.sampling.temperature = 1.5f;
        p.generate.sampling.seed = seed;
        p.generate.sampling.repetition_penalty = 1.2f;
        p.generate.sampling.min_p = 0.01f;
        p.generate.max_tokens = 32;
        p.generate.stop_at_eos = false;
        specla_generation *gen = nullptr;
        REQUIRE(specla_generation_begin(s.s, speculative ? d.d : nullptr, prompt.data(), prompt.size(), p.get(),
                                        &gen) == SPECLA_OK);
        std::vector<int32_t> out;
        specla_generation_step step = test::info_struct<specla_generation_step>();
        while (specla_generation_next(gen, &step) == SPECLA_OK) {
            out.insert(out.end(), step.tokens, step.tokens + step.n_tokens);
            if (step.finish_reason != SPECLA_FINISH_NONE) break;
        }
        specla_spec_stats stats = test::info_struct<specla_spec_stats>();
        REQUIRE(specla_generation_stats(gen, &stats) == SPECLA_OK);
        used = stats.seed;
        specla_generation_free(gen);
        return out;
    };
    for (bool speculative : {false, true}) {
        INFO("speculative ", speculative);
        uint64_t a = 0, b = 0, again = 0, fixed = 0;
        const auto ra = run(SPECLA_SEED_RANDOM, speculative, a);
        run(SPECLA_SEED_RANDOM, speculative, b);
        CHECK(a != SPECLA_SEED_RANDOM);
        CHECK(a != b);  // two draws of 64 bits
        CHECK(run(a, speculative, again) == ra);  // the reported seed repeats the run
        CHECK(again == a);
        run(12345, speculative, fixed);
        CHECK(fixed == 12345);  // a given seed is reported as given
    }
}
