// `avdit bench h3` (placeholder until the benchmark lands: it only says so).
#include "bench_commands.h"
#include "core/error.h"

namespace avdit::app {

Run add_bench_h3(CLI::App& bench) {
  bench.add_subcommand("h3", "Benchmark h3 (not written yet)");
  return []() -> int { throw RuntimeFailure("avdit bench h3 is not written yet"); };
}

}  // namespace avdit::app
