// `specla logits`: the logits of every prompt position, written to a safetensors file (for
// comparisons with a reference implementation).
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "specla/specla.h"

namespace specla_cli {
namespace {

struct LogitsOptions {
    ModelOptions model;
    std::string tokens, out_path;
};

// A safetensors file holding one F32 tensor "logits" [rows, cols].
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

int run_logits(const LogitsOptions &o) {
    Loaded l;
    load(o.model, l);
    const std::vector<int32_t> ids = parse_ids(o.tokens);
    if (ids.empty()) {
        std::fprintf(stderr, "specla: --tokens is empty\n");
        return 2;
    }
    std::vector<float> logits(ids.size() * size_t(l.info.vocab_size));
    const specla_status st =
        specla_session_eval(l.session, ids.data(), ids.size(), SPECLA_LOGITS_ALL, logits.data(), logits.size());
    if (st != SPECLA_OK) die("evaluation failed", st);
    if (!write_logits(o.out_path, logits, ids.size(), size_t(l.info.vocab_size))) {
        std::fprintf(stderr, "specla: cannot write %s\n", o.out_path.c_str());
        return 1;
    }
    std::fprintf(stderr, "wrote logits [%zu, %d] to %s\n", ids.size(), l.info.vocab_size, o.out_path.c_str());
    return 0;
}

}  // namespace

void add_logits_command(CLI::App &app, Run &run) {
    auto o = std::make_shared<LogitsOptions>();
    CLI::App *cmd = app.add_subcommand("logits", "write the logits of every prompt position to a safetensors file");
    add_model_options(cmd, o->model);
    cmd->add_option("--tokens", o->tokens, "comma-separated token ids")->required();
    cmd->add_option("--out", o->out_path, "output .safetensors file (tensor 'logits' [n, vocab] F32)")->required();
    cmd->callback([o, &run] { run = [o] { return run_logits(*o); }; });
}

}  // namespace specla_cli
