// specla: command-line front end of the library, written against the public C API only.
//
//   specla generate --model DIR (--tokens 1,2,3 | --prompt TEXT | --prompt-file F) [--max-tokens N]
//                   [--temperature T --top-k K --top-p P --min-p P --seed S | --random-seed]
//                   [--repeat-penalty R --presence-penalty P --frequency-penalty F --penalty-last-n N]
//                   [--logit-bias TOKEN=BIAS ...] [--stop STR ... [--include-stop]]
//                   [--include-special] [--verbose] [--backend cpu|cuda]
//                   [--speculative [--drafter DIR] [--draft-nodes N --draft-depth D --tree-top-k K ...]]
//   specla logits   --model DIR --tokens 1,2,3 --out FILE.safetensors
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "specla/specla.h"

namespace {

struct Common {
    std::string model;
    std::string backend = "cpu";
    int device = 0;
    int threads = 0;
};

[[noreturn]] void die(const std::string &what, specla_status st) {
    std::fprintf(stderr, "specla: %s: %s\n  %s\n", what.c_str(), specla_status_string(st), specla_last_error());
    std::exit(1);
}

std::vector<int32_t> parse_ids(const std::string &csv) {
    std::vector<int32_t> ids;
    std::stringstream ss(csv);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        try {
            size_t used = 0;
            const long v = std::stol(item, &used);
            if (used != item.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(item);
            ids.push_back(int32_t(v));
        } catch (const std::exception &) {
            std::fprintf(stderr, "specla: --tokens: '%s' is not a token id\n", item.c_str());
            std::exit(2);
        }
    }
    return ids;
}

struct Loaded {
    specla_model *model = nullptr;
    specla_session *session = nullptr;
    specla_model_info info{};
    ~Loaded() {
        specla_session_free(session);
        specla_model_free(model);
    }
};

void load(const Common &c, Loaded &l) {
    specla_model_params mp = specla_model_default_params();
    if (c.backend == "cuda") mp.backend = SPECLA_BACKEND_CUDA;
    else if (c.backend != "cpu") {
        std::fprintf(stderr, "specla: --backend must be cpu or cuda\n");
        std::exit(2);
    }
    mp.device = c.device;
    mp.n_threads = c.threads;
    specla_status st = specla_model_load(c.model.c_str(), mp, &l.model);
    if (st != SPECLA_OK) die("cannot load model '" + c.model + "'", st);
    specla_model_get_info(l.model, &l.info);
    st = specla_session_create(l.model, specla_session_default_params(), &l.session);
    if (st != SPECLA_OK) die("cannot create a session", st);
}

// The prompt text as ids, as specla_generate_text would tokenize it (BOS per the tokenizer's
// default, special tokens parsed), but with its length: text after a NUL byte is kept.
std::vector<int32_t> tokenize_prompt(const Loaded &l, const std::string &text) {
    const specla_tokenizer *tok = nullptr;
    specla_status st = specla_model_tokenizer(l.model, &tok);
    if (st != SPECLA_OK) die("cannot generate from text", st);
    specla_tokenizer_info info{};
    specla_tokenizer_get_info(tok, &info);
    size_t n = 0;
    st = specla_tokenize(tok, text.data(), text.size(), info.add_bos_default, true, nullptr, 0, &n);
    if (st != SPECLA_OK && st != SPECLA_ERR_CAPACITY) die("cannot tokenize the prompt", st);
    std::vector<int32_t> ids(n);
    st = specla_tokenize(tok, text.data(), text.size(), info.add_bos_default, true, ids.data(), ids.size(), &n);
    if (st != SPECLA_OK) die("cannot tokenize the prompt", st);
    if (ids.empty()) {
        std::fprintf(stderr, "specla: the prompt is empty\n");
        std::exit(2);
    }
    return ids;
}

struct Speculation {
    bool on = false;
    std::string drafter_dir;  // --drafter: the EAGLE drafter's folder
    specla_spec_params params = specla_spec_default_params();
    specla_drafter_params drafter = specla_drafter_default_params();
};

void print_stats(const specla_spec_stats &st) {
    std::fprintf(stderr, "[speculative: %lld passes, %lld drafted, %lld accepted (%.1f%%), %.2f tokens per pass]\n",
                 (long long)st.steps, (long long)st.drafted, (long long)st.accepted, 100.0 * st.acceptance_rate,
                 st.mean_accepted_length);
}

// The finish reason as the --verbose line says it.
void print_finish(const specla_generation_step &last, const std::vector<std::string> &stops) {
    std::fprintf(stderr, "[finished: %s", specla_finish_reason_string(last.finish_reason));
    if (last.finish_reason == SPECLA_FINISH_STOP_STRING && last.stop_index >= 0 && size_t(last.stop_index) < stops.size())
        std::fprintf(stderr, " %d \"%s\"", last.stop_index, stops[size_t(last.stop_index)].c_str());
    std::fprintf(stderr, "]\n");
}

int run_generate(const Common &c, const std::string &tokens, const std::string &prompt, const std::string &prompt_file,
                 specla_generate_params gp, const std::vector<std::string> &stops, bool quiet, bool verbose,
                 Speculation spec) {
    Loaded l;
    load(c, l);
    specla_drafter *drafter = nullptr;
    if (!spec.drafter_dir.empty()) {
        spec.on = true;
        spec.drafter.type = SPECLA_DRAFTER_EAGLE;
        spec.drafter.path = spec.drafter_dir.c_str();
    }
    if (spec.on) {
        const specla_status st = specla_drafter_create(l.model, spec.drafter, &drafter);
        if (st != SPECLA_OK) die("cannot create the drafter", st);
    }
    std::vector<const char *> stop_ptrs;
    for (const auto &s : stops) stop_ptrs.push_back(s.c_str());
    gp.stop_strings = stop_ptrs.empty() ? nullptr : stop_ptrs.data();
    gp.n_stop_strings = stop_ptrs.size();

    // Both inputs become ids; the generation hands back each step's ids and final text (the
    // output grows with what is generated, not with the budget).
    const bool text_input = tokens.empty();
    std::vector<int32_t> ids, out;
    if (text_input) {
        std::string text = prompt;
        if (!prompt_file.empty()) {
            std::ifstream in(prompt_file, std::ios::binary);
            if (!in) {
                std::fprintf(stderr, "specla: cannot read --prompt-file %s\n", prompt_file.c_str());
                return 1;
            }
            std::stringstream ss;
            ss << in.rdbuf();
            text = ss.str();
        }
        ids = tokenize_prompt(l, text);
        if (!quiet) {  // the prompt first, so the continuation reads in place
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
        }
    } else {
        ids = parse_ids(tokens);
    }
    const auto t0 = std::chrono::steady_clock::now();
    spec.params.generate = gp;  // without a drafter only .generate is read
    specla_generation *gen = nullptr;
    specla_status st = specla_generation_begin(l.session, drafter, ids.data(), ids.size(), spec.params, &gen);
    if (st != SPECLA_OK) die("generation failed", st);
    specla_generation_step step{};
    size_t n = 0;
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
    specla_spec_stats stats{};
    specla_generation_stats(gen, &stats);
    specla_generation_free(gen);
    if (!text_input)
        for (size_t i = 0; i < out.size(); ++i) std::printf(i ? ",%d" : "%d", out[i]);
    std::printf("\n");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!quiet) {
        std::fprintf(stderr, "[%zu tokens in %.3f s, %.1f tokens/s incl. prompt]\n", n, s, double(n) / s);
        if (gp.sampling.temperature > 0.f)  // the seed that repeats this run (also a random one)
            std::fprintf(stderr, "[seed %llu]\n", (unsigned long long)stats.seed);
        if (drafter) print_stats(stats);
    }
    if (verbose) print_finish(step, stops);
    specla_drafter_free(drafter);
    return 0;
}

// safetensors writer for one F32 tensor.
bool write_logits(const std::string &path, const std::vector<float> &data, size_t rows, size_t cols) {
    std::string header = "{\"logits\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(rows) + "," +
                         std::to_string(cols) + "],\"data_offsets\":[0," + std::to_string(data.size() * 4) + "]}}";
    while (header.size() % 8) header += ' ';
    std::ofstream out(path, std::ios::binary);
    uint64_t len = header.size();
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = (unsigned char)(len >> (8 * i));
    out.write(reinterpret_cast<const char *>(le), 8);
    out.write(header.data(), std::streamsize(header.size()));
    out.write(reinterpret_cast<const char *>(data.data()), std::streamsize(data.size() * 4));
    return bool(out);
}

int run_logits(const Common &c, const std::string &tokens, const std::string &out_path) {
    Loaded l;
    load(c, l);
    const std::vector<int32_t> ids = parse_ids(tokens);
    if (ids.empty()) {
        std::fprintf(stderr, "specla: --tokens is empty\n");
        return 2;
    }
    std::vector<float> logits(ids.size() * size_t(l.info.vocab_size));
    const specla_status st =
        specla_session_eval(l.session, ids.data(), ids.size(), SPECLA_LOGITS_ALL, logits.data(), logits.size());
    if (st != SPECLA_OK) die("evaluation failed", st);
    if (!write_logits(out_path, logits, ids.size(), size_t(l.info.vocab_size))) {
        std::fprintf(stderr, "specla: cannot write %s\n", out_path.c_str());
        return 1;
    }
    std::fprintf(stderr, "wrote logits [%zu, %d] to %s\n", ids.size(), l.info.vocab_size, out_path.c_str());
    return 0;
}

void add_common(CLI::App *app, Common &c) {
    app->add_option("--model", c.model, "checkpoint folder (config.json + model.safetensors)")->required();
    app->add_option("--backend", c.backend, "cpu or cuda")->capture_default_str();
    app->add_option("--device", c.device, "CUDA device ordinal")->capture_default_str();
    app->add_option("--threads", c.threads, "CPU threads (0: all cores)")->capture_default_str();
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{std::string("SpecLA ") + specla_version() +
                 ": fast generation for linear-attention language models"};
    app.require_subcommand(1);

    Common gen_c, log_c;
    std::string gen_tokens, prompt, prompt_file, log_tokens, out_path;
    std::vector<std::string> stops;
    bool quiet = false, verbose = false;
    specla_generate_params gp = specla_generate_default_params();

    CLI::App *gen = app.add_subcommand("generate", "generate tokens (ids) or text from a prompt");
    add_common(gen, gen_c);
    auto *inputs = gen->add_option_group("input", "the prompt");
    inputs->add_option("--tokens", gen_tokens, "prompt as comma-separated token ids; prints generated ids");
    inputs->add_option("--prompt", prompt, "prompt text; streams generated text");
    inputs->add_option("--prompt-file", prompt_file, "file holding the prompt text (all its bytes, NUL included)")
        ->check(CLI::ExistingFile);
    inputs->require_option(1);
    gen->add_option("--max-tokens", gp.max_tokens, "token budget")->capture_default_str();
    gen->add_option("--temperature", gp.sampling.temperature, "0 = greedy")->capture_default_str();
    gen->add_option("--top-k", gp.sampling.top_k, "0 = off")->capture_default_str();
    gen->add_option("--top-p", gp.sampling.top_p, "1 = off")->capture_default_str();
    gen->add_option("--seed", gp.sampling.seed, "sampling seed")->capture_default_str();
    gen->add_flag("--random-seed", [&](int64_t) { gp.sampling.seed = SPECLA_SEED_RANDOM; },
                  "draw a random seed (printed after the run)");
    gen->add_option("--min-p", gp.sampling.min_p, "keep tokens of at least this x the top probability; 0 = off")
        ->capture_default_str();
    gen->add_option("--repeat-penalty", gp.sampling.repetition_penalty,
                    "divide a seen token's positive logit by this (multiply a negative one); 1 = off")
        ->capture_default_str();
    gen->add_option("--presence-penalty", gp.sampling.presence_penalty, "subtract once from a seen token's logit")
        ->capture_default_str();
    gen->add_option("--frequency-penalty", gp.sampling.frequency_penalty,
                    "subtract per occurrence from a seen token's logit")
        ->capture_default_str();
    gen->add_option("--penalty-last-n", gp.sampling.penalty_last_n,
                    "tokens of the context the penalties count; -1 = all, 0 = none")
        ->capture_default_str();
    std::vector<std::string> bias_args;
    gen->add_option("--logit-bias", bias_args, "TOKEN=BIAS: add BIAS to the token's logit (repeatable)");
    gen->add_option("--stop", stops, "stop once the generated text contains this string (repeatable)");
    gen->add_flag("--ignore-eos", [&](int64_t) { gp.stop_at_eos = false; }, "do not stop at the EOS token");
    gen->add_flag("--quiet,-q", quiet, "print only the generated text or ids (no prompt echo, no timing line)");
    gen->add_flag("--verbose,-v", verbose, "say on stderr why generation finished (EOS, stop string, budget)");
    gen->add_flag("--include-stop", gp.include_stop_string, "keep the stop string that ended generation in the text");
    gen->add_flag("--include-special", gp.include_special_tokens, "keep special tokens (EOS) in the text");
    Speculation spec;
    gen->add_flag("--speculative,-s", spec.on,
                  "speculative decoding (same output), with the prompt-lookup drafter unless --drafter is given");
    gen->add_option("--drafter", spec.drafter_dir,
                    "EAGLE drafter folder trained for this model (implies --speculative with that drafter)");
    gen->add_option("--draft-nodes", spec.params.max_draft_nodes, "draft nodes per verification")->capture_default_str();
    gen->add_option("--draft-depth", spec.params.max_draft_depth, "deepest draft position")->capture_default_str();
    gen->add_option("--ngram-min", spec.drafter.min_ngram, "prompt lookup: shortest n-gram")->capture_default_str();
    gen->add_option("--ngram-max", spec.drafter.max_ngram, "prompt lookup: longest n-gram")->capture_default_str();
    gen->add_option("--draft-branches", spec.drafter.max_branches, "prompt lookup: continuations kept as branches")
        ->capture_default_str();
    gen->add_option("--tree-top-k", spec.params.tree_top_k, "EAGLE: children per expanded node and nodes per depth")
        ->capture_default_str();
    gen->add_option("--tree-margin", spec.params.tree_prune_margin,
                    "EAGLE: keep nodes within this many nats of the best path (<= 0: no pruning)")
        ->capture_default_str();
    gen->add_flag("--tree-fixed-size", [&](int64_t) { spec.params.tree_size_from_cost = false; },
                  "EAGLE: fill the node budget instead of sizing trees from the measured pass costs");
    gen->add_flag("--no-deferred-commit", [&](int64_t) { spec.params.deferred_commit = false; },
                  "apply accepted factors right away instead of inside the next pass");

    CLI::App *lg = app.add_subcommand("logits", "write the logits of every prompt position to a safetensors file");
    add_common(lg, log_c);
    lg->add_option("--tokens", log_tokens, "comma-separated token ids")->required();
    lg->add_option("--out", out_path, "output .safetensors file (tensor 'logits' [n, vocab] F32)")->required();

    CLI11_PARSE(app, argc, argv);
    std::vector<specla_logit_bias> bias;  // gp.sampling.logit_bias points here for the run
    for (const std::string &arg : bias_args) {
        const size_t eq = arg.find('=');
        char *end_t = nullptr, *end_b = nullptr;
        const long token = eq == std::string::npos ? 0 : std::strtol(arg.c_str(), &end_t, 10);
        const float b = eq == std::string::npos ? 0.f : std::strtof(arg.c_str() + eq + 1, &end_b);
        if (eq == std::string::npos || end_t != arg.c_str() + eq || !end_b || *end_b || eq + 1 == arg.size() ||
            token < INT32_MIN || token > INT32_MAX) {
            std::fprintf(stderr, "--logit-bias: expected TOKEN=BIAS (e.g. 42=-5), got '%s'\n", arg.c_str());
            return 2;
        }
        bias.push_back({int32_t(token), b});
    }
    gp.sampling.logit_bias = bias.empty() ? nullptr : bias.data();
    gp.sampling.n_logit_bias = bias.size();
    if (gen->parsed()) return run_generate(gen_c, gen_tokens, prompt, prompt_file, gp, stops, quiet, verbose, spec);
    return run_logits(log_c, log_tokens, out_path);
}
