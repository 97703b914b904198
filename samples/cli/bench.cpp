// `specla bench`: plain against speculative decoding on one prompt, greedy, side by side in one
// run: time of the first step (prompt + first token), decoding speed after it, tokens per
// verification pass, and whether both produced the same tokens. A table, or JSON with --json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "interrupt.h"
#include "json_out.h"
#include "specla/specla.h"

namespace specla_cli {
namespace {

// Used when no prompt is given (the shipped demo model writes Python).
const char *const kDefaultPrompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";

struct BenchOptions {
    ModelOptions model;
    PromptOptions prompt;
    int32_t max_tokens = 128;
    int repeats = 3;
    specla_generate_params generate = specla_generate_default_params();
    specla_spec_params spec = specla_spec_default_params();  // points at generate (run_bench)
    specla_drafter_params drafter = specla_drafter_default_params();
    bool json = false;
};

struct Run1 {
    double first_step_s = 0, decode_s = 0;
    size_t first_tokens = 0, tokens = 0;
    specla_spec_stats stats{sizeof(specla_spec_stats)};
    std::vector<int32_t> ids;
    bool aborted = false;
};

// One greedy generation of exactly max_tokens tokens (EOS does not stop it) on a fresh context.
Run1 run_once(const Loaded &l, specla_drafter *drafter, const std::vector<int32_t> &prompt,
              const specla_spec_params &p) {
    specla_status st = specla_session_reset(l.session);
    if (st != SPECLA_OK) die("cannot reset the session", st);
    Run1 r;
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    specla_generation *gen = nullptr;
    st = specla_generation_begin(l.session, drafter, prompt.data(), prompt.size(), &p, &gen);
    if (st != SPECLA_OK) die("generation failed", st);
    {
        interrupt::WatchGeneration watch(gen);
        specla_generation_step step{sizeof(specla_generation_step)};
        auto t_first = t0;
        do {
            st = specla_generation_next(gen, &step);
            if (st != SPECLA_OK) die("generation failed", st);
            r.ids.insert(r.ids.end(), step.tokens, step.tokens + step.n_tokens);
            if (r.first_tokens == 0) {
                t_first = clock::now();
                r.first_tokens = step.n_tokens;
            }
        } while (step.finish_reason == SPECLA_FINISH_NONE);
        const auto t_end = clock::now();
        r.aborted = step.finish_reason == SPECLA_FINISH_ABORTED;
        r.first_step_s = std::chrono::duration<double>(t_first - t0).count();
        r.decode_s = std::chrono::duration<double>(t_end - t_first).count();
    }
    r.tokens = r.ids.size();
    specla_generation_stats(gen, &r.stats);
    specla_generation_free(gen);
    return r;
}

struct ModeResult {
    std::string mode;
    double first_step_ms = 0, decode_tokens_per_s = 0, tokens_per_pass = 0;
    bool identical = true;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int run_bench(BenchOptions &o) {
    if (o.repeats < 1 || o.max_tokens < 2) {
        std::fprintf(stderr, "specla: bench needs --repeat >= 1 and --max-tokens >= 2\n");
        return 2;
    }
    Loaded l;
    load(o.model, l);
    PromptOptions prompt = o.prompt;
    if (!prompt.given()) prompt.text = kDefaultPrompt;
    const std::vector<int32_t> ids = prompt_ids(l, prompt);
    o.generate.max_tokens = o.max_tokens;
    o.generate.stop_at_eos = false;  // every run makes the same number of tokens
    o.spec.generate = &o.generate;

    std::vector<ModeResult> results;
    std::vector<int32_t> reference;
    for (const bool speculative : {false, true}) {
        ModeResult m;
        m.mode = speculative ? "speculative" : "plain";
        std::vector<double> first, decode, per_pass;
        for (int rep = 0; rep < o.repeats; ++rep) {
            specla_drafter *drafter = nullptr;  // fresh per run: a drafter indexes its sequence
            if (speculative) {
                const specla_status st = specla_drafter_create(l.model, &o.drafter, &drafter);
                if (st != SPECLA_OK) die("cannot create the drafter", st);
            }
            const Run1 r = run_once(l, drafter, ids, o.spec);
            specla_drafter_free(drafter);
            if (r.aborted) {
                std::fprintf(stderr, "specla: bench interrupted\n");
                return kExitInterrupted;
            }
            if (reference.empty()) reference = r.ids;
            m.identical = m.identical && r.ids == reference;
            first.push_back(1e3 * r.first_step_s);
            decode.push_back(double(r.tokens - r.first_tokens) / std::max(r.decode_s, 1e-9));
            per_pass.push_back(speculative ? r.stats.mean_accepted_length : 1.0);
        }
        m.first_step_ms = median(first);
        m.decode_tokens_per_s = median(decode);
        m.tokens_per_pass = median(per_pass);
        results.push_back(m);
    }
    const double plain = results[0].decode_tokens_per_s;
    const bool identical = results[0].identical && results[1].identical;
    if (o.json) {
        std::printf("{\"model\":%s,\"backend\":%s,\"threads\":%d,\"n_prompt\":%zu,\"n_generated\":%d,\"repeats\":%d,"
                    "\"max_draft_nodes\":%d,\"runs\":[",
                    json_string(o.model.model).c_str(), json_string(o.model.backend).c_str(), o.model.threads,
                    ids.size(), o.max_tokens, o.repeats, o.spec.max_draft_nodes);
        for (size_t i = 0; i < results.size(); ++i) {
            const ModeResult &m = results[i];
            std::printf("%s{\"mode\":\"%s\",\"first_step_ms\":%.3f,\"decode_tokens_per_s\":%.2f,"
                        "\"tokens_per_pass\":%.3f,\"speedup\":%.3f,\"outputs_identical\":%s}",
                        i ? "," : "", m.mode.c_str(), m.first_step_ms, m.decode_tokens_per_s, m.tokens_per_pass,
                        m.decode_tokens_per_s / plain, m.identical ? "true" : "false");
        }
        std::printf("],\"outputs_identical\":%s}\n", identical ? "true" : "false");
    } else {
        std::printf("model %s, backend %s, prompt %zu tokens, %d generated (greedy, EOS ignored), median of %d\n",
                    o.model.model.c_str(), o.model.backend.c_str(), ids.size(), o.max_tokens, o.repeats);
        std::printf("%-12s %14s %16s %12s %9s  %s\n", "mode", "first step ms", "decode tokens/s", "tokens/pass",
                    "speedup", "output");
        for (const ModeResult &m : results)
            std::printf("%-12s %14.2f %16.1f %12.2f %8.2fx  %s\n", m.mode.c_str(), m.first_step_ms,
                        m.decode_tokens_per_s, m.tokens_per_pass, m.decode_tokens_per_s / plain,
                        m.mode == "plain" ? "reference" : m.identical ? "identical" : "DIFFERS");
    }
    if (!identical) {
        std::fprintf(stderr, "specla: speculative output differs from plain greedy output\n");
        return 1;
    }
    return 0;
}

}  // namespace

void add_bench_command(CLI::App &app, Run &run) {
    auto o = std::make_shared<BenchOptions>();
    CLI::App *cmd = app.add_subcommand("bench", "plain against speculative decoding on one prompt (greedy)");
    add_model_options(cmd, o->model);
    add_prompt_options(cmd, o->prompt, false);
    cmd->add_option("--max-tokens,-n", o->max_tokens, "tokens generated per run")->capture_default_str();
    cmd->add_option("--repeat", o->repeats, "runs per mode (the median is reported)")->capture_default_str();
    cmd->add_option("--draft-nodes", o->spec.max_draft_nodes, "draft nodes per verification")->capture_default_str();
    cmd->add_option("--draft-depth", o->spec.max_draft_depth, "deepest draft position")->capture_default_str();
    cmd->add_flag("--json", o->json, "print the results as one JSON object");
    cmd->callback([o, &run] { run = [o] { return run_bench(*o); }; });
}

}  // namespace specla_cli
