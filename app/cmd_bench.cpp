// `avdit bench`: speed benchmarks on the GPU (attention, moe, h3). Each workload lives in its own
// file app/bench_<name>.cpp; they print a markdown table and can write JSON (--json FILE). The
// peers they are compared with are PyTorch scripts in bench/peers/, run in the same device call.
#include "bench_commands.h"
#include "commands.h"
#include "core/error.h"

namespace avdit::app {

Run add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench",
      "GPU speed benchmarks on synthetic inputs (deterministic, never zeros). Results: a markdown\n"
      "table on stdout, JSON with --json. Example: avdit bench attention --len 16384,65536");
  cmd->require_subcommand(1);
  auto runs = std::make_shared<std::vector<std::pair<CLI::App*, Run>>>();
  auto add = [&](Run (*f)(CLI::App&)) {
    const size_t before = cmd->get_subcommands({}).size();
    Run r = f(*cmd);
    runs->emplace_back(cmd->get_subcommands({})[before], std::move(r));
  };
  add(add_bench_attention);
  add(add_bench_moe);
  add(add_bench_h3);
  add(add_bench_text);
  add(add_bench_conv3d);
  add(add_bench_windowed_attention);
  add(add_bench_refiner);
  add(add_bench_vae);
  add(add_bench_step);
  return [runs]() {
    for (auto& [sub, run] : *runs)
      if (sub->parsed()) return run();
    return 2;
  };
}

}  // namespace avdit::app

namespace avdit::app {

void bench_needs_cuda(const char* name) {
  throw BadInput(fmt::format(
      "avdit bench {} needs the CUDA backend; this avdit was built without it (configure with "
      "-DAVDIT_CUDA=ON on a machine with the CUDA toolkit)",
      name));
}

}  // namespace avdit::app
