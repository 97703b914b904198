// `specla tokenize`: the ids (and vocabulary entries) of a text, with the checkpoint's tokenizer
// only (the weights are not loaded).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "json_out.h"
#include "specla/specla.h"

namespace specla_cli {
namespace {

struct TokenizeOptions {
    std::string model;
    PromptOptions prompt;
    bool no_bos = false, no_special = false, pieces = false, json = false;
};

std::string vocabulary_entry(const specla_tokenizer *tok, int32_t id) {
    size_t n = 0;
    specla_status st = specla_token_to_string(tok, id, nullptr, 0, &n);
    if (st != SPECLA_OK && st != SPECLA_ERR_CAPACITY) die("cannot look up token " + std::to_string(id), st);
    std::string s(n + 1, '\0');
    st = specla_token_to_string(tok, id, &s[0], s.size(), &n);
    if (st != SPECLA_OK) die("cannot look up token " + std::to_string(id), st);
    s.resize(n);
    return s;
}

int run_tokenize(const TokenizeOptions &o) {
    specla_tokenizer *tok = nullptr;
    specla_status st = specla_tokenizer_load(o.model.c_str(), &tok);
    if (st != SPECLA_OK) die("cannot load the tokenizer of '" + o.model + "'", st);
    std::unique_ptr<specla_tokenizer, void (*)(specla_tokenizer *)> owner(tok, specla_tokenizer_free);
    specla_tokenizer_info info{sizeof(specla_tokenizer_info)};
    specla_tokenizer_get_info(tok, &info);
    const bool add_bos = info.add_bos_default && !o.no_bos;
    const std::string text = read_prompt_text(o.prompt);
    const std::vector<int32_t> ids = tokenize_text(tok, text, add_bos, !o.no_special);
    if (o.json) {
        std::printf("{\"n_tokens\":%zu,\"ids\":[", ids.size());
        print_ids(ids);
        std::printf("],\"pieces\":[");
        for (size_t i = 0; i < ids.size(); ++i)
            std::printf("%s%s", i ? "," : "", json_string(vocabulary_entry(tok, ids[i])).c_str());
        std::printf("]}\n");
    } else if (o.pieces) {
        for (const int32_t id : ids) std::printf("%d\t%s\n", id, vocabulary_entry(tok, id).c_str());
    } else {
        print_ids(ids);
        std::printf("\n");
    }
    return 0;
}

}  // namespace

void add_tokenize_command(CLI::App &app, Run &run) {
    auto o = std::make_shared<TokenizeOptions>();
    CLI::App *cmd = app.add_subcommand("tokenize", "print the token ids of a text (only the tokenizer is loaded)");
    cmd->add_option("--model,-m", o->model, "checkpoint folder holding tokenizer.json")->required();
    add_prompt_options(cmd, o->prompt, true, false);
    cmd->add_flag("--no-bos", o->no_bos, "do not prepend BOS even where the tokenizer does by default");
    cmd->add_flag("--no-special", o->no_special, "tokenize special tokens written in the text as plain text");
    cmd->add_flag("--pieces", o->pieces, "one line per token: the id, a tab, its vocabulary entry");
    cmd->add_flag("--json", o->json, "print {\"n_tokens\", \"ids\", \"pieces\"} as JSON");
    cmd->callback([o, &run] { run = [o] { return run_tokenize(*o); }; });
}

}  // namespace specla_cli
