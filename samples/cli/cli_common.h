// What the subcommands of the `specla` program share: the model options, loading, prompts, errors.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "specla/specla.h"

namespace specla_cli {

// Exit status of a run that Ctrl-C (or SIGTERM) stopped, as shells report a SIGINT death.
constexpr int kExitInterrupted = 130;

// --model, --backend, --device, --threads.
struct ModelOptions {
    std::string model;
    std::string backend = "cpu";
    int device = 0;
    int threads = 0;
};
void add_model_options(CLI::App *app, ModelOptions &o);

// The prompt: --tokens ids, --prompt text or --prompt-file (a path or `-` for stdin).
struct PromptOptions {
    std::string tokens, text, file;
    bool given() const { return !tokens.empty() || !text.empty() || !file.empty(); }
};
// `required`: exactly one; otherwise at most one. `with_ids`: offer --tokens (else text only).
void add_prompt_options(CLI::App *app, PromptOptions &o, bool required, bool with_ids = true);
// The prompt text of --prompt or --prompt-file (all bytes, NUL included); exits on a read error.
std::string read_prompt_text(const PromptOptions &o);

// Prints what failed with the status and the library's message, and exits with status 1.
[[noreturn]] void die(const std::string &what, specla_status st);
// Comma-separated token ids; exits with status 2 on anything else.
std::vector<int32_t> parse_ids(const std::string &csv);
// Writes ids comma-separated to stdout (the form parse_ids reads), without a newline.
void print_ids(const std::vector<int32_t> &ids);

// A loaded model with one session; freed in reverse order.
struct Loaded {
    specla_model *model = nullptr;
    specla_session *session = nullptr;
    specla_model_info info{sizeof(specla_model_info)};
    Loaded() = default;
    Loaded(const Loaded &) = delete;
    Loaded &operator=(const Loaded &) = delete;
    ~Loaded();
};
// Loads the model and creates a session; exits with a message on failure. A Ctrl-C during the
// load aborts it (exit kExitInterrupted).
void load(const ModelOptions &o, Loaded &l);

// `text` (all its bytes) as ids; exits with a message when the tokenizer refuses it.
std::vector<int32_t> tokenize_text(const specla_tokenizer *tok, const std::string &text, bool add_bos,
                                   bool parse_special);
// The prompt as ids, as specla_generate_text would tokenize it (BOS per the tokenizer's default,
// special tokens parsed), but with its length, so text after a NUL byte is kept.
std::vector<int32_t> tokenize_prompt(const specla_tokenizer *tok, const std::string &text);
// --tokens as ids, or the prompt text (read once: stdin cannot be read twice) tokenized with the
// model's tokenizer; `text` (may be NULL) receives that text.
std::vector<int32_t> prompt_ids(const Loaded &l, const PromptOptions &o, std::string *text = nullptr);

}  // namespace specla_cli
