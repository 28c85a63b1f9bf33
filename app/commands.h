// The avdit subcommands: each file app/cmd_<name>.cpp adds one subcommand to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace avdit::app {

// Each add_* registers a subcommand and returns the function to run when it was chosen; the
// function returns the process exit code.
using Run = std::function<int()>;

Run add_inspect(CLI::App& app);
Run add_forward(CLI::App& app);
Run add_init(CLI::App& app);
Run add_generate(CLI::App& app);
Run add_bench(CLI::App& app);
Run add_quantize(CLI::App& app);
Run add_tokenize(CLI::App& app);
Run add_enhance(CLI::App& app);
Run add_encode(CLI::App& app);
Run add_decode(CLI::App& app);
Run add_score(CLI::App& app);
Run add_routes(CLI::App& app);
Run add_calibrate(CLI::App& app);
Run add_probe(CLI::App& app);

}  // namespace avdit::app
