// specla: command-line front end of the library, written against the public C API only.
//
//   specla generate -m DIR (--tokens 1,2,3 | -p TEXT | --prompt-file F|-) [-n N] [sampling...]
//                   [--stop STR ...] [--speculative [--drafter DIR] [draft knobs...]]
//   specla tokenize -m DIR (-p TEXT | --prompt-file F|-) [--pieces] [--json]
//   specla bench    -m DIR [-p TEXT | --prompt-file F|- | --tokens IDS] [-n N] [--json]
//   specla logits   -m DIR --tokens 1,2,3 --out FILE.safetensors
//   specla --version
//   specla --log-level debug SUBCOMMAND ...   (the library's messages on stderr)
// `specla SUBCOMMAND --help` lists every option.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "commands.h"
#include "interrupt.h"
#include "specla/specla.h"

namespace {

std::string version_line() {
    return std::string("specla ") + specla_version() + " (ABI " + std::to_string(specla_abi_version()) +
           ", CUDA backend " + (specla_has_cuda() ? "built" : "not built") + ")";
}

}  // namespace

int main(int argc, char **argv) {
    // First: every thread the library starts inherits the blocked signals (interrupt.h).
    specla_cli::interrupt::start();
    CLI::App app{std::string("SpecLA ") + specla_version() +
                 ": fast generation for linear-attention language models"};
    app.set_version_flag("--version", version_line());
    app.require_subcommand(1);
    // The library's messages (load, backend, per-generation debug figures) on stderr; off unless
    // asked for, so that the program's output stays the generation's.
    int log_level = -1;
    const std::map<std::string, int> levels = {
        {"debug", SPECLA_LOG_DEBUG}, {"info", SPECLA_LOG_INFO}, {"warn", SPECLA_LOG_WARN}, {"error", SPECLA_LOG_ERROR}};
    app.add_option("--log-level", log_level, "print the library's messages of this level and above on stderr")
        ->transform(CLI::CheckedTransformer(levels, CLI::ignore_case));
    specla_cli::Run run;
    specla_cli::add_generate_command(app, run);
    specla_cli::add_tokenize_command(app, run);
    specla_cli::add_bench_command(app, run);
    specla_cli::add_logits_command(app, run);
    int status = 0;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        status = app.exit(e);
        specla_cli::interrupt::stop();
        return status;
    }
    if (log_level >= 0)
        specla_set_log_callback([](specla_log_level, const char *m, void *) { std::fprintf(stderr, "[specla] %s\n", m); },
                                nullptr, specla_log_level(log_level));
    status = run();
    specla_cli::interrupt::stop();
    return status;
}
