// `avdit bench attention` (placeholder until the benchmark lands: it only says so).
#include "bench_commands.h"
#include "core/error.h"

namespace avdit::app {

Run add_bench_attention(CLI::App& bench) {
  bench.add_subcommand("attention", "Benchmark attention (not written yet)");
  return []() -> int { throw RuntimeFailure("avdit bench attention is not written yet"); };
}

}  // namespace avdit::app
