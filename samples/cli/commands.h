// The subcommands of the `specla` program. Each add_*_command registers its subcommand and its
// options on the app; when the command line selects it, `run` is set to the command's body, which
// main runs after parsing and whose result is the exit status.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace specla_cli {

using Run = std::function<int()>;

void add_generate_command(CLI::App &app, Run &run);  // generate.cpp
void add_tokenize_command(CLI::App &app, Run &run);  // tokenize.cpp
void add_bench_command(CLI::App &app, Run &run);     // bench.cpp
void add_logits_command(CLI::App &app, Run &run);    // logits.cpp

}  // namespace specla_cli
