// `specla generate`: streamed text (or ids) from a prompt, plain or speculative, through the
// pull-style generation API; Ctrl-C ends it cleanly with the statistics printed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "interrupt.h"
#include "specla/specla.h"

namespace specla_cli {
namespace {

struct GenerateOptions {
    ModelOptions model;
    PromptOptions prompt;
    specla_sampling_params sampling = specla_sampling_default_params();
    specla_generate_params generate = specla_generate_default_params();
    std::vector<std::string> stops;
    std::vector<std::string> bias_args;
    bool quiet = false, verbose = false;
    bool speculative = false;
    std::string drafter_dir;  // --drafter: an EAGLE drafter's folder
    specla_spec_params spec = specla_spec_default_params();
    specla_drafter_params drafter = specla_drafter_default_params();
    std::vector<CLI::Option *> draft_knobs;  // meaningful only with --speculative
};

void print_stats(const specla_spec_stats &st) {
    std::fprintf(stderr,
                 "[speculative: %lld passes, %lld drafted, %lld accepted (%.1f%%), %.2f tokens per pass, %lld plain "
                 "steps where speculation measured slower]\n",
                 (long long)st.steps, (long long)st.drafted, (long long)st.accepted, 100.0 * st.acceptance_rate,
                 st.mean_accepted_length, (long long)st.plain_steps);
}

// The finish reason as the --verbose line says it.
void print_finish(const specla_generation_step &last, const std::vector<std::string> &stops) {
    std::fprintf(stderr, "[finished: %s", specla_finish_reason_string(last.finish_reason));
    if (last.finish_reason == SPECLA_FINISH_STOP_STRING && last.stop_index >= 0 && size_t(last.stop_index) < stops.size())
        std::fprintf(stderr, " %d \"%s\"", last.stop_index, stops[size_t(last.stop_index)].c_str());
    std::fprintf(stderr, "]\n");
}

// --logit-bias TOKEN=BIAS entries; exits with status 2 on a malformed one.
std::vector<specla_logit_bias> parse_logit_bias(const std::vector<std::string> &args) {
    std::vector<specla_logit_bias> bias;
    for (const std::string &arg : args) {
        const size_t eq = arg.find('=');
        char *end_t = nullptr, *end_b = nullptr;
        const long token = eq == std::string::npos ? 0 : std::strtol(arg.c_str(), &end_t, 10);
        const float b = eq == std::string::npos ? 0.f : std::strtof(arg.c_str() + eq + 1, &end_b);
        if (eq == std::string::npos || end_t != arg.c_str() + eq || !end_b || *end_b || eq + 1 == arg.size() ||
            token < INT32_MIN || token > INT32_MAX) {
            std::fprintf(stderr, "--logit-bias: expected TOKEN=BIAS (e.g. 42=-5), got '%s'\n", arg.c_str());
            std::exit(2);
        }
        bias.push_back({int32_t(token), b});
    }
    return bias;
}

int run_generate(GenerateOptions &o) {
    if (!o.drafter_dir.empty()) {
        o.speculative = true;
        o.drafter.type = SPECLA_DRAFTER_EAGLE;
        o.drafter.path = o.drafter_dir.c_str();
    }
    if (!o.speculative)
        for (const CLI::Option *knob : o.draft_knobs)
            if (knob->count() > 0)
                std::fprintf(stderr, "specla: warning: %s has no effect without --speculative\n",
                             knob->get_name().c_str());
    const std::vector<specla_logit_bias> bias = parse_logit_bias(o.bias_args);
    o.sampling.logit_bias = bias.empty() ? nullptr : bias.data();
    o.sampling.n_logit_bias = bias.size();
    std::vector<const char *> stop_ptrs;
    for (const auto &s : o.stops) stop_ptrs.push_back(s.c_str());
    o.generate.stop_strings = stop_ptrs.empty() ? nullptr : stop_ptrs.data();
    o.generate.n_stop_strings = stop_ptrs.size();
    o.generate.sampling = &o.sampling;
    o.spec.generate = &o.generate;  // without a drafter only .generate is read

    Loaded l;
    load(o.model, l);
    specla_drafter *drafter = nullptr;
    if (o.speculative) {
        const specla_status st = specla_drafter_create(l.model, &o.drafter, &drafter);
        if (st != SPECLA_OK) die("cannot create the drafter", st);
    }
    // Both inputs become ids; the generation hands back each step's ids and final text (the
    // output grows with what is generated, not with the budget).
    const bool text_input = o.prompt.tokens.empty();
    std::string text;
    const std::vector<int32_t> ids = prompt_ids(l, o.prompt, &text);
    if (text_input && !o.quiet) {  // the prompt first, so the continuation reads in place
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    }
    std::vector<int32_t> out;
    const auto t0 = std::chrono::steady_clock::now();
    specla_generation *gen = nullptr;
    specla_status st = specla_generation_begin(l.session, drafter, ids.data(), ids.size(), &o.spec, &gen);
    if (st != SPECLA_OK) die("generation failed", st);
    specla_generation_step step{sizeof(specla_generation_step)};
    size_t n = 0;
    {
        interrupt::WatchGeneration watch(gen);
        do {
            st = specla_generation_next(gen, &step);
            if (st != SPECLA_OK) die("generation failed", st);
            n += step.n_tokens;
            if (text_input) {
                std::fwrite(step.text, 1, step.text_len, stdout);  // the text may hold NUL bytes
                std::fflush(stdout);
            } else {
                out.insert(out.end(), step.tokens, step.tokens + step.n_tokens);
            }
        } while (step.finish_reason == SPECLA_FINISH_NONE);
    }
    specla_spec_stats stats{sizeof(specla_spec_stats)};
    specla_generation_stats(gen, &stats);
    specla_generation_free(gen);
    if (!text_input) print_ids(out);
    std::printf("\n");
    std::fflush(stdout);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool aborted = step.finish_reason == SPECLA_FINISH_ABORTED;
    if (aborted) std::fprintf(stderr, "[interrupted]\n");
    if (!o.quiet) {
        std::fprintf(stderr, "[%zu tokens in %.3f s, %.1f tokens/s incl. prompt]\n", n, s, double(n) / s);
        if (o.sampling.temperature > 0.f)  // the seed that repeats this run (also a random one)
            std::fprintf(stderr, "[seed %llu]\n", (unsigned long long)stats.seed);
        if (drafter) print_stats(stats);
    }
    if (o.verbose) print_finish(step, o.stops);
    specla_drafter_free(drafter);
    return aborted ? kExitInterrupted : 0;
}

}  // namespace

void add_generate_command(CLI::App &app, Run &run) {
    auto o = std::make_shared<GenerateOptions>();
    CLI::App *gen = app.add_subcommand("generate", "generate tokens (ids) or text from a prompt");
    add_model_options(gen, o->model);
    add_prompt_options(gen, o->prompt, true);
    specla_sampling_params &sp = o->sampling;
    specla_generate_params &gp = o->generate;
    gen->add_option("--max-tokens,-n", gp.max_tokens, "token budget")->capture_default_str();
    gen->add_option("--temperature", sp.temperature, "0 = greedy")->capture_default_str();
    gen->add_option("--top-k", sp.top_k, "0 = off")->capture_default_str();
    gen->add_option("--top-p", sp.top_p, "1 = off")->capture_default_str();
    gen->add_option("--seed", sp.seed, "sampling seed")->capture_default_str();
    gen->add_flag("--random-seed", [&sp](int64_t) { sp.seed = SPECLA_SEED_RANDOM; },
                  "draw a random seed (printed after the run)");
    gen->add_option("--min-p", sp.min_p, "keep tokens of at least this x the top probability; 0 = off")
        ->capture_default_str();
    gen->add_option("--repeat-penalty", sp.repetition_penalty,
                    "divide a seen token's positive logit by this (multiply a negative one); 1 = off")
        ->capture_default_str();
    gen->add_option("--presence-penalty", sp.presence_penalty, "subtract once from a seen token's logit")
        ->capture_default_str();
    gen->add_option("--frequency-penalty", sp.frequency_penalty, "subtract per occurrence from a seen token's logit")
        ->capture_default_str();
    gen->add_option("--penalty-last-n", sp.penalty_last_n, "tokens of the context the penalties count; -1 = all, 0 = none")
        ->capture_default_str();
    gen->add_option("--logit-bias", o->bias_args, "TOKEN=BIAS: add BIAS to the token's logit (repeatable)");
    gen->add_option("--stop", o->stops, "stop once the generated text contains this string (repeatable)");
    gen->add_flag("--ignore-eos", [&gp](int64_t) { gp.stop_at_eos = false; }, "do not stop at the EOS token");
    gen->add_flag("--quiet,-q", o->quiet, "print only the generated text or ids (no prompt echo, no timing line)");
    gen->add_flag("--verbose,-v", o->verbose, "say on stderr why generation finished (EOS, stop string, budget)");
    gen->add_flag("--include-stop", gp.include_stop_string, "keep the stop string that ended generation in the text");
    gen->add_flag("--include-special", gp.include_special_tokens, "keep special tokens (EOS) in the text");
    gen->add_flag("--speculative,-s", o->speculative,
                  "speculative decoding (same output), with the prompt-lookup drafter unless --drafter is given");
    gen->add_option("--drafter", o->drafter_dir,
                    "EAGLE drafter folder trained for this model (implies --speculative with that drafter)");
    specla_spec_params &spec = o->spec;
    specla_drafter_params &dp = o->drafter;
    o->draft_knobs = {
        gen->add_option("--draft-nodes", spec.max_draft_nodes, "draft nodes per verification")->capture_default_str(),
        gen->add_option("--draft-depth", spec.max_draft_depth, "deepest draft position")->capture_default_str(),
        gen->add_option("--ngram-min", dp.min_ngram, "prompt lookup: shortest n-gram")->capture_default_str(),
        gen->add_option("--ngram-max", dp.max_ngram, "prompt lookup: longest n-gram")->capture_default_str(),
        gen->add_option("--draft-branches", dp.max_branches, "prompt lookup: continuations kept as branches")
            ->capture_default_str(),
        gen->add_option("--tree-top-k", spec.tree_top_k, "EAGLE: children per expanded node and nodes per depth")
            ->capture_default_str(),
        gen->add_option("--tree-margin", spec.tree_prune_margin,
                        "EAGLE: keep nodes within this many nats of the best path (<= 0: no pruning)")
            ->capture_default_str(),
        gen->add_option("--tree-shape", spec.tree_shape,
                        "EAGLE: auto (fixed_width where drafted in one device call, else dynamic), dynamic "
                        "(confidence-pruned levels) or fixed_width (greedy: top-k nodes per level to the depth "
                        "budget, drafted in one device call on CUDA)")
            ->transform(CLI::CheckedTransformer(std::map<std::string, specla_tree_shape>{
                {"auto", SPECLA_TREE_SHAPE_AUTO},
                {"dynamic", SPECLA_TREE_SHAPE_DYNAMIC},
                {"fixed_width", SPECLA_TREE_SHAPE_FIXED_WIDTH}}))
            ->capture_default_str(),
        gen->add_flag("--tree-fixed-size", [&spec](int64_t) { spec.tree_size_from_cost = false; },
                      "EAGLE: fill the node budget instead of sizing trees from the measured pass costs"),
        gen->add_option("--min-gain", spec.speculation_min_gain,
                        "take plain steps while speculation measures below this multiple of plain decoding's "
                        "tokens/s (0: always speculate; then a seeded sampled run repeats exactly)")
            ->capture_default_str(),
        gen->add_flag("--no-deferred-commit", [&spec](int64_t) { spec.deferred_commit = false; },
                      "apply accepted factors right away instead of inside the next pass"),
    };
    gen->callback([o, &run] { run = [o] { return run_generate(*o); }; });
}

}  // namespace specla_cli
