// End-to-end generation benchmark through the public API, on any backend:
//   plain decoding tokens/s (batch 1), prefill tokens/s, and speculative decoding with the
//   prompt-lookup drafter and, given --drafter, the learned (EAGLE) drafter over the model's eval
//   prompts (mean tokens per verification pass, acceptance per depth, speedup over plain
//   decoding of the same prompts in the same run).
//
//   bench_generate [--model DIR] [--backend cpu|cuda] [--threads N] [--prompts N] [--new-tokens N]
//                  [--draft-nodes N[,N...]]   (prompt-lookup budgets compared in the same run; default 4,8,16)
//                  [--drafter DIR]            (an EAGLE drafter folder: its rows too)
//                  [--eagle-nodes N[,N...]]   (its node budgets; default 8,16,32)
//                  [--tree-fixed-size]        (EAGLE trees fill the budget instead of sizing from cost)
//                  [--eagle-shapes S[,S...]]  (EAGLE tree shapes compared in the same run: auto, dynamic,
//                                              fixed_width; specla_spec_params::tree_shape; default auto)
//                  [--eagle-depth N]          (EAGLE: max_draft_depth; default the library's)
//                  [--min-gain G]             (specla_spec_params::speculation_min_gain; default 0:
//                                              speculation measured as such; 1, the library's default,
//                                              gives what an application gets: plain steps where
//                                              speculation measures slower)
//                  [--temperature T]          (sampled generation at temperature T, seeded per prompt,
//                                              plain and speculative alike: the speed of lossless
//                                              sampled acceptance; outputs are not compared, a
//                                              speculative run draws other tokens from the same
//                                              distribution; default 0: greedy)
//                  [--stop-at-eos]            (a generation ends at EOS: fewer tokens than the
//                                              table's count where the model ends a prompt; default:
//                                              exactly --new-tokens per prompt)
//                  [--debug-log]              (the library's debug messages on stderr: e.g. how each
//                                              CUDA sequence's passes ran, from graphs or eagerly)
//                  [--json FILE]              (the table's figures, machine-readably: bench_json.h)
//
// Timing. Plain decoding and prompt lookup are timed after each prompt's prefill. The EAGLE
// drafter needs the target's features of the prompt, which only its own generate call's prefill
// produces, so its generation is timed from the token stream instead: from the last token of
// the first pass (or step) to the last token, over the tokens emitted in between (a pass emits
// its tokens within microseconds, passes are milliseconds apart), and plain decoding is timed
// the same way for its ratio; the ratio with the prefill on both sides is printed too.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_json.h"
#include "specla/specla.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void check(specla_status st, const char *what) {
    if (st != SPECLA_OK) {
        std::fprintf(stderr, "%s failed: %s: %s\n", what, specla_status_string(st), specla_last_error());
        std::exit(1);
    }
}

std::vector<int> parse_list(const char *text) {
    std::vector<int> out;
    std::stringstream list(text);
    std::string item;
    while (std::getline(list, item, ','))
        if (!item.empty()) out.push_back(std::atoi(item.c_str()));
    return out;
}

// --eagle-shapes: each name with its specla_tree_shape; an unknown name ends the program before
// anything is measured.
struct NamedShape {
    std::string name;
    specla_tree_shape shape;
};
std::vector<NamedShape> parse_shapes(const char *text) {
    std::vector<NamedShape> out;
    std::stringstream list(text);
    std::string item;
    while (std::getline(list, item, ',')) {
        if (item.empty()) continue;
        if (item == "auto") out.push_back({item, SPECLA_TREE_SHAPE_AUTO});
        else if (item == "dynamic") out.push_back({item, SPECLA_TREE_SHAPE_DYNAMIC});
        else if (item == "fixed_width") out.push_back({item, SPECLA_TREE_SHAPE_FIXED_WIDTH});
        else {
            std::fprintf(stderr, "unknown tree shape '%s' (auto, dynamic, fixed_width)\n", item.c_str());
            std::exit(2);
        }
    }
    return out;
}

// Token timestamps of one generate call, through the streaming callback.
struct TokenTimes {
    std::vector<Clock::time_point> at;
    static bool record(int32_t, const char *, void *self) {
        static_cast<TokenTimes *>(self)->at.push_back(Clock::now());
        return true;
    }
    // Seconds and tokens after the first pass: the first pass's tokens are those emitted within
    // kBurst of the first one.
    void after_first_pass(double &seconds, long long &tokens) const {
        if (at.size() < 2) return;
        constexpr double kBurst = 2e-4;
        size_t m = 1;
        while (m < at.size() && std::chrono::duration<double>(at[m] - at[0]).count() < kBurst) ++m;
        if (m >= at.size()) return;
        seconds += std::chrono::duration<double>(at.back() - at[m - 1]).count();
        tokens += (long long)(at.size() - m);
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
    std::string model_dir = std::string(SPECLA_MODELS_DIR) + "/gdn-pycode-22m";
    std::string backend = "cpu";
    int threads = 0, n_prompts = 80, new_tokens = 64;
    std::vector<int> budgets = {4, 8, 16}, eagle_budgets = {8, 16, 32};
    std::string drafter_dir;
    bool tree_fixed = false, stop_at_eos = false;
    std::vector<NamedShape> eagle_shapes = {{"auto", SPECLA_TREE_SHAPE_AUTO}};
    int eagle_depth = 0;  // 0: the library's default
    double min_gain = 0;  // speculation as such unless asked (see the header)
    float temperature = 0;
    for (int i = 1; i < argc; ++i) {
        auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
        if (!std::strcmp(argv[i], "--model")) model_dir = next();
        else if (!std::strcmp(argv[i], "--backend")) backend = next();
        else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(next());
        else if (!std::strcmp(argv[i], "--prompts")) n_prompts = std::atoi(next());
        else if (!std::strcmp(argv[i], "--new-tokens")) new_tokens = std::atoi(next());
        else if (!std::strcmp(argv[i], "--draft-nodes")) budgets = parse_list(next());
        else if (!std::strcmp(argv[i], "--drafter")) drafter_dir = next();
        else if (!std::strcmp(argv[i], "--eagle-nodes")) eagle_budgets = parse_list(next());
        else if (!std::strcmp(argv[i], "--tree-fixed-size")) tree_fixed = true;
        else if (!std::strcmp(argv[i], "--eagle-shapes")) eagle_shapes = parse_shapes(next());
        else if (!std::strcmp(argv[i], "--eagle-depth")) eagle_depth = std::atoi(next());
        else if (!std::strcmp(argv[i], "--min-gain")) min_gain = std::atof(next());
        else if (!std::strcmp(argv[i], "--stop-at-eos")) stop_at_eos = true;
        else if (!std::strcmp(argv[i], "--temperature")) temperature = std::strtof(next(), nullptr);
        else if (!std::strcmp(argv[i], "--debug-log"))
            specla_set_log_callback([](specla_log_level, const char *m, void *) { std::fprintf(stderr, "[specla] %s\n", m); },
                                    nullptr, SPECLA_LOG_DEBUG);
        else if (!std::strcmp(argv[i], "--json")) next();  // read by bench::JsonReport
        else {
            std::fprintf(stderr, "usage: %s [--model DIR] [--backend cpu|cuda] [--threads N] [--prompts N] [--new-tokens N]"
                                 " [--draft-nodes N[,N...]] [--drafter DIR] [--eagle-nodes N[,N...]] [--tree-fixed-size] [--eagle-shapes S[,S...]] [--eagle-depth N] [--min-gain G] [--temperature T] [--stop-at-eos] [--debug-log]"
                                 " [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    specla_model_params mp = specla_model_default_params();
    mp.backend = backend == "cuda" ? SPECLA_BACKEND_CUDA : SPECLA_BACKEND_CPU;
    mp.n_threads = threads;
    specla_model *model = nullptr;
    check(specla_model_load(model_dir.c_str(), &mp, &model), "load");
    specla_model_info info{sizeof(specla_model_info)};
    specla_model_get_info(model, &info);
    const specla_tokenizer *tok = nullptr;
    check(specla_model_tokenizer(model, &tok), "tokenizer");
    specla_session_params sp = specla_session_default_params();
    specla_session *s = nullptr;
    check(specla_session_create(model, &sp, &s), "session");

    // Plain decode: 256 tokens after a short prompt, median of 3 runs.
    std::vector<double> decode_tps;
    for (int rep = 0; rep < 3; ++rep) {
        specla_session_reset(s);
        const int32_t prompt[] = {0, 1, 2, 3};
        specla_generate_params gp = specla_generate_default_params();
        gp.max_tokens = 256;
        gp.stop_at_eos = false;
        std::vector<int32_t> out(256);
        size_t n = 0;
        check(specla_session_eval(s, prompt, 3, SPECLA_LOGITS_NONE, nullptr, 0), "eval");
        const auto t0 = Clock::now();
        check(specla_generate(s, prompt + 3, 1, &gp, out.data(), out.size(), &n), "generate");
        decode_tps.push_back(double(n) / seconds_since(t0));
    }
    // Prefill of 512 tokens (the eval prompts' text, repeated), median of 3.
    std::ifstream pin(model_dir + "/eval_prompts.json");
    std::stringstream pss;
    pss << pin.rdbuf();
    const auto prompts = nlohmann::json::parse(pss.str()).at("prompts");
    std::vector<std::vector<int32_t>> ids;
    std::vector<int32_t> all_ids;
    for (const auto &p : prompts) {
        const std::string text = p.get<std::string>();
        size_t n = 0;
        specla_tokenize(tok, text.data(), text.size(), false, true, nullptr, 0, &n);
        std::vector<int32_t> v(n);
        check(specla_tokenize(tok, text.data(), text.size(), false, true, v.data(), v.size(), &n), "tokenize");
        all_ids.insert(all_ids.end(), v.begin(), v.end());
        ids.push_back(std::move(v));
    }
    std::vector<double> prefill_tps;
    for (int rep = 0; rep < 3; ++rep) {
        specla_session_reset(s);
        const auto t0 = Clock::now();
        std::vector<float> last(static_cast<size_t>(info.vocab_size));
        check(specla_session_eval(s, all_ids.data(), 512, SPECLA_LOGITS_LAST, last.data(), last.size()), "prefill");
        prefill_tps.push_back(512.0 / seconds_since(t0));
    }

    // Speculative vs plain over the eval prompts: only generation time is compared (each
    // prompt's prefill is excluded from both), in the same run, for each draft budget.
    n_prompts = std::min<int>(n_prompts, int(ids.size()));
    specla_generate_params gp = specla_generate_default_params();
    gp.max_tokens = new_tokens;
    // Exactly new_tokens per prompt unless --stop-at-eos: greedy gdn-pycode-22m emits EOS (id 0,
    // its file separator) first on 52 of its 80 eval prompts and third on one, so with EOS a stop
    // the figures come from the other 27 prompts' 1783 tokens, not the 5120 the table would state
    // (the figures before 2026-12-03 did; the table now says which).
    gp.stop_at_eos = stop_at_eos;
    const bool sampled = temperature > 0;
    specla_sampling_params sampling = specla_sampling_default_params();
    sampling.temperature = temperature;
    // The generation parameters of prompt `prompt`, sampled runs with that prompt's own fixed seed
    // (the same for plain and speculative) kept in `storage`.
    auto seeded = [&](specla_sampling_params &storage, int prompt) {
        storage = sampling;
        storage.seed = 1000 + uint64_t(prompt);
        specla_generate_params g = gp;
        g.sampling = sampled ? &storage : nullptr;
        return g;
    };
    std::vector<std::vector<int32_t>> plain_out(static_cast<size_t>(n_prompts));
    double plain_s = 0, prefill_total = 0, plain_stream_s = 0;
    long long plain_tokens = 0, plain_stream_tokens = 0;
    for (int i = 0; i < n_prompts; ++i) {
        const std::vector<int32_t> &p = ids[size_t(i)];
        std::vector<int32_t> a(static_cast<size_t>(new_tokens));
        size_t na = 0;
        specla_session_reset(s);
        const auto tp = Clock::now();
        check(specla_session_eval(s, p.data(), p.size() - 1, SPECLA_LOGITS_NONE, nullptr, 0), "prefill");
        prefill_total += seconds_since(tp);
        TokenTimes times;
        specla_sampling_params sampling_i;
        specla_generate_params gpt = seeded(sampling_i, i);
        gpt.on_token = TokenTimes::record;
        gpt.user_data = &times;
        const auto t0 = Clock::now();
        check(specla_generate(s, p.data() + p.size() - 1, 1, &gpt, a.data(), a.size(), &na), "plain");
        plain_s += seconds_since(t0);
        times.after_first_pass(plain_stream_s, plain_stream_tokens);
        plain_tokens += (long long)na;
        a.resize(na);
        plain_out[size_t(i)] = a;
    }
    const double plain_tps = double(plain_tokens) / plain_s;
    std::printf("model %s, backend %s, threads %d, SpecLA %s\n", model_dir.c_str(), backend.c_str(), threads,
                specla_version());
    std::printf("| measure | value |\n|---|---|\n");
    std::printf("| plain decode, 256 tokens (median of 3) | %.1f tokens/s (%.3f ms/token) |\n", median(decode_tps),
                1000.0 / median(decode_tps));
    std::printf("| prefill, 512 tokens (median of 3) | %.1f tokens/s |\n", median(prefill_tps));
    if (stop_at_eos)
        std::printf("| eval prompts | %d prompts x at most %d new tokens, greedy, stopping at EOS: %lld tokens |\n",
                    n_prompts, new_tokens, plain_tokens);
    else
        std::printf("| eval prompts | %d prompts x %d new tokens, %s (EOS not a stop) |\n", n_prompts, new_tokens,
                    sampled ? ("sampled at temperature " + std::to_string(temperature) + ", outputs not compared").c_str()
                            : "greedy");
    std::printf("| plain decoding over the prompts | %.1f tokens/s |\n", plain_tps);
    bench::JsonReport json(argc, argv);
    // The public API names the backend, not the device (bench_decode and bench_verify record the GPU).
    json.set_device(backend + (backend == "cpu" ? ", " + std::to_string(threads) + " threads (0: all cores)" : ", device 0"));
    const std::string model_name = model_dir.substr(model_dir.find_last_of('/') == std::string::npos ? 0 : model_dir.find_last_of('/') + 1);
    auto row = [&](const std::string &measure, double value, const char *unit, const std::string &note = "") {
        json.add(measure + " [" + model_name + "]", value, unit, note);
    };
    row("plain decode, 256 tokens (median of 3)", median(decode_tps), "tokens/s");
    row("prefill, 512 tokens (median of 3)", median(prefill_tps), "tokens/s");
    row("plain decoding over the eval prompts", plain_tps, "tokens/s",
        std::to_string(n_prompts) + " prompts x " + std::to_string(new_tokens) + " new tokens, greedy");
    long long total_mismatches = 0;
    auto compared = [&](long long mismatches) {
        return sampled ? std::string("sampled: outputs not compared")
                       : std::to_string(mismatches) + " outputs differ from plain";
    };
    for (int budget : budgets) {
        double spec_s = 0;
        long long spec_tokens = 0, steps = 0, drafted = 0, accepted = 0, mismatches = 0, plain_steps = 0;
        for (int i = 0; i < n_prompts; ++i) {
            const std::vector<int32_t> &p = ids[size_t(i)];
            std::vector<int32_t> b(static_cast<size_t>(new_tokens));
            size_t nb = 0;
            specla_drafter *drafter = nullptr;
            check(specla_drafter_create(model, nullptr, &drafter), "drafter");
            specla_session_reset(s);
            check(specla_session_eval(s, p.data(), p.size() - 1, SPECLA_LOGITS_NONE, nullptr, 0), "prefill");
            specla_spec_params spp = specla_spec_default_params();
            spp.speculation_min_gain = min_gain;
            specla_sampling_params sampling_i;
            const specla_generate_params gps = seeded(sampling_i, i);
            spp.generate = &gps;
            spp.max_draft_nodes = budget;
            specla_spec_stats st{sizeof(specla_spec_stats)};
            // The drafter matches n-grams against the session's whole context, prompt included.
            const auto t0 = Clock::now();
            check(
                specla_generate_speculative(s, drafter, p.data() + p.size() - 1, 1, &spp, b.data(), b.size(), &nb, &st),
                "speculative");
            spec_s += seconds_since(t0);
            specla_drafter_free(drafter);
            spec_tokens += (long long)nb;
            steps += st.steps, drafted += st.drafted, accepted += st.accepted, plain_steps += st.plain_steps;
            b.resize(nb);
            if (!sampled && b != plain_out[size_t(i)]) ++mismatches;
        }
        const double spec_tps = double(spec_tokens) / spec_s;
        // Tokens per pass count verification passes' tokens only: steps the gate took plain
        // (--min-gain) emit one token each and are not passes.
        const double per_pass = steps ? double(spec_tokens - plain_steps) / double(steps) : 0.0;
        std::printf("| speculative, prompt lookup, <= %d draft nodes | %.1f tokens/s, %.2fx plain, %.2f tokens per "
                    "pass, acceptance %.3f (%lld / %lld), %lld plain steps, %s |\n",
                    budget, spec_tps, spec_tps / plain_tps, per_pass,
                    drafted ? double(accepted) / double(drafted) : 0.0, accepted, drafted, plain_steps,
                    compared(mismatches).c_str());
        total_mismatches += mismatches;
        const std::string what = "speculative, prompt lookup, <= " + std::to_string(budget) + " draft nodes";
        row(what, spec_tps, "tokens/s");
        row(what + ", speedup over plain", spec_tps / plain_tps, "ratio");
        row(what + ", tokens per pass", per_pass, "tokens");
        row(what + ", acceptance", drafted ? double(accepted) / double(drafted) : 0.0, "fraction");
        if (!sampled) row(what + ", outputs that differ from plain", double(mismatches), "prompts");
    }
    // The learned drafter: one drafter for all prompts of a budget (its cost model keeps what it
    // measured; a new prompt restarts its state, see lib/spec/eagle_drafter.h), the whole prompt
    // through the speculative call so that the drafter sees the prompt's features.
    for (const NamedShape &shape : drafter_dir.empty() ? std::vector<NamedShape>() : eagle_shapes)
    for (int budget : eagle_budgets) {
        specla_drafter_params dp = specla_drafter_default_params();
        dp.type = SPECLA_DRAFTER_EAGLE;
        dp.path = drafter_dir.c_str();
        specla_drafter *drafter = nullptr;
        check(specla_drafter_create(model, &dp, &drafter), "EAGLE drafter");
        double spec_s = 0, stream_s = 0;
        long long spec_tokens = 0, stream_tokens = 0, steps = 0, drafted = 0, mismatches = 0, plain_steps = 0;
        long long at_depth[SPECLA_SPEC_MAX_DEPTH_STATS] = {};
        for (int i = 0; i < n_prompts; ++i) {
            const std::vector<int32_t> &p = ids[size_t(i)];
            std::vector<int32_t> b(static_cast<size_t>(new_tokens));
            size_t nb = 0;
            specla_session_reset(s);
            TokenTimes times;
            specla_sampling_params sampling_i;
            specla_generate_params gpt = seeded(sampling_i, i);
            gpt.on_token = TokenTimes::record;
            gpt.user_data = &times;
            specla_spec_params spp = specla_spec_default_params();
            spp.speculation_min_gain = min_gain;
            spp.generate = &gpt;
            spp.max_draft_nodes = budget;
            spp.tree_size_from_cost = !tree_fixed;
            spp.tree_shape = shape.shape;
            if (eagle_depth > 0) spp.max_draft_depth = eagle_depth;
            specla_spec_stats st{sizeof(specla_spec_stats)};
            const auto t0 = Clock::now();
            check(specla_generate_speculative(s, drafter, p.data(), p.size(), &spp, b.data(), b.size(), &nb, &st),
                  "speculative (EAGLE)");
            spec_s += seconds_since(t0);
            times.after_first_pass(stream_s, stream_tokens);
            spec_tokens += (long long)nb;
            steps += st.steps, drafted += st.drafted, plain_steps += st.plain_steps;
            for (int d = 0; d < SPECLA_SPEC_MAX_DEPTH_STATS; ++d) at_depth[d] += st.accepted_at_depth[d];
            b.resize(nb);
            if (!sampled && b != plain_out[size_t(i)]) ++mismatches;
        }
        specla_drafter_free(drafter);
        // See the header: both sides timed from the stream, after their first pass.
        const double spec_tps = double(stream_tokens) / stream_s;
        const double plain_stream_tps = double(plain_stream_tokens) / plain_stream_s;
        const double inclusive = (plain_s + prefill_total) / spec_s;
        std::string depths;
        for (int d = 0; d < 8; ++d) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%s%.2f", d ? " / " : "", steps ? double(at_depth[d]) / double(steps) : 0.0);
            depths += buf;
        }
        const std::string what = "speculative, EAGLE drafter, <= " + std::to_string(budget) + " draft nodes" +
                                 (tree_fixed ? " (fixed size)" : "") +
                                 (shape.shape == SPECLA_TREE_SHAPE_AUTO ? "" : ", " + shape.name + " levels") +
                                 (eagle_depth > 0 ? ", depth <= " + std::to_string(eagle_depth) : "");
        const double per_pass = steps ? double(spec_tokens - plain_steps) / double(steps) : 0.0;
        std::printf("| %s | %.1f tokens/s, %.2fx plain (%.2fx with the prefill on both sides), %.2f tokens per "
                    "pass, %.1f nodes per pass, passes accepting depth 1..8: %s, %lld plain steps, %s |\n",
                    what.c_str(), spec_tps, spec_tps / plain_stream_tps, inclusive, per_pass,
                    steps ? double(drafted) / double(steps) : 0.0, depths.c_str(), plain_steps,
                    compared(mismatches).c_str());
        total_mismatches += mismatches;
        row(what, spec_tps, "tokens/s", "timed from the token stream after the first pass");
        row(what + ", speedup over plain", spec_tps / plain_stream_tps, "ratio",
            "plain timed the same way: " + std::to_string(plain_stream_tps) + " tokens/s");
        row(what + ", speedup over plain, prefill on both sides", inclusive, "ratio");
        row(what + ", tokens per pass", per_pass, "tokens");
        row(what + ", draft nodes per pass", steps ? double(drafted) / double(steps) : 0.0, "nodes");
        for (int d = 0; d < 8; ++d)
            row(what + ", passes accepting depth " + std::to_string(d + 1),
                steps ? double(at_depth[d]) / double(steps) : 0.0, "fraction");
        if (!sampled) row(what + ", outputs that differ from plain", double(mismatches), "prompts");
    }
    specla_session_free(s);
    specla_model_free(model);
    if (!json.write()) return 1;
    return total_mismatches ? 1 : 0;
}
