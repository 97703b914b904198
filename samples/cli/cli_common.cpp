// The model options, loading, prompts and errors shared by the subcommands.
#include "cli_common.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "interrupt.h"

namespace specla_cli {

void add_model_options(CLI::App *app, ModelOptions &o) {
    app->add_option("--model,-m", o.model, "checkpoint folder (config.json + model.safetensors)")->required();
    app->add_option("--backend", o.backend, "cpu or cuda")->capture_default_str();
    app->add_option("--device", o.device, "CUDA device ordinal")->capture_default_str();
    app->add_option("--threads", o.threads, "CPU threads (0: all cores)")->capture_default_str();
}

void add_prompt_options(CLI::App *app, PromptOptions &o, bool required, bool with_ids) {
    auto *group = app->add_option_group("input", "the prompt");
    if (with_ids) group->add_option("--tokens", o.tokens, "prompt as comma-separated token ids");
    group->add_option("--prompt,-p", o.text, "prompt text");
    group->add_option("--prompt-file", o.file, "file holding the prompt text (all its bytes, NUL included); - reads stdin")
        ->check([](const std::string &path) {
            return path == "-" ? std::string() : CLI::ExistingFile(path);
        });
    if (required) group->require_option(1);
    else group->require_option(0, 1);
}

std::string read_prompt_text(const PromptOptions &o) {
    if (o.file.empty()) return o.text;
    std::stringstream ss;
    if (o.file == "-") {
        ss << std::cin.rdbuf();
    } else {
        std::ifstream in(o.file, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "specla: cannot read --prompt-file %s\n", o.file.c_str());
            std::exit(1);
        }
        ss << in.rdbuf();
    }
    return ss.str();
}

void die(const std::string &what, specla_status st) {
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

void print_ids(const std::vector<int32_t> &ids) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? ",%d" : "%d", ids[i]);
}

Loaded::~Loaded() {
    specla_session_free(session);
    specla_model_free(model);
}

namespace {
bool continue_loading(float, void *) { return !interrupt::requested(); }
}  // namespace

void load(const ModelOptions &o, Loaded &l) {
    specla_model_params mp = specla_model_default_params();
    if (o.backend == "cuda") {
        mp.backend = SPECLA_BACKEND_CUDA;
    } else if (o.backend != "cpu") {
        std::fprintf(stderr, "specla: --backend must be cpu or cuda\n");
        std::exit(2);
    }
    mp.device = o.device;
    mp.n_threads = o.threads;
    mp.progress_callback = continue_loading;
    specla_status st = specla_model_load(o.model.c_str(), &mp, &l.model);
    if (st == SPECLA_ERR_ABORTED && interrupt::requested()) {
        std::fprintf(stderr, "specla: interrupted while loading the model\n");
        std::exit(kExitInterrupted);
    }
    if (st != SPECLA_OK) die("cannot load model '" + o.model + "'", st);
    specla_model_get_info(l.model, &l.info);
    st = specla_session_create(l.model, nullptr, &l.session);
    if (st != SPECLA_OK) die("cannot create a session", st);
}

std::vector<int32_t> tokenize_text(const specla_tokenizer *tok, const std::string &text, bool add_bos,
                                   bool parse_special) {
    size_t n = 0;
    specla_status st = specla_tokenize(tok, text.data(), text.size(), add_bos, parse_special, nullptr, 0, &n);
    if (st != SPECLA_OK && st != SPECLA_ERR_CAPACITY) die("cannot tokenize the text", st);
    std::vector<int32_t> ids(n);
    st = specla_tokenize(tok, text.data(), text.size(), add_bos, parse_special, ids.data(), ids.size(), &n);
    if (st != SPECLA_OK) die("cannot tokenize the text", st);
    return ids;
}

std::vector<int32_t> tokenize_prompt(const specla_tokenizer *tok, const std::string &text) {
    specla_tokenizer_info info{sizeof(specla_tokenizer_info)};
    specla_tokenizer_get_info(tok, &info);
    std::vector<int32_t> ids = tokenize_text(tok, text, info.add_bos_default, true);
    if (ids.empty()) {
        std::fprintf(stderr, "specla: the prompt is empty\n");
        std::exit(2);
    }
    return ids;
}

std::vector<int32_t> prompt_ids(const Loaded &l, const PromptOptions &o, std::string *text) {
    if (!o.tokens.empty()) return parse_ids(o.tokens);
    const specla_tokenizer *tok = nullptr;
    const specla_status st = specla_model_tokenizer(l.model, &tok);
    if (st != SPECLA_OK) die("cannot generate from text", st);
    std::string read = read_prompt_text(o);
    std::vector<int32_t> ids = tokenize_prompt(tok, read);
    if (text) *text = std::move(read);
    return ids;
}

}  // namespace specla_cli
