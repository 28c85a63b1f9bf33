// `avdit bench moe` (placeholder until the benchmark lands: it only says so).
#include "bench_commands.h"
#include "core/error.h"

namespace avdit::app {

Run add_bench_moe(CLI::App& bench) {
  bench.add_subcommand("moe", "Benchmark moe (not written yet)");
  return []() -> int { throw RuntimeFailure("avdit bench moe is not written yet"); };
}

}  // namespace avdit::app
