// The `avdit bench` workloads, one file each (app/bench_<name>.cpp). Built without CUDA, each
// still registers its options and then tells the user it needs a CUDA build.
#pragma once

#include "commands.h"

namespace avdit::app {

Run add_bench_attention(CLI::App& bench);
Run add_bench_moe(CLI::App& bench);
Run add_bench_h3(CLI::App& bench);
Run add_bench_text(CLI::App& bench);
Run add_bench_conv3d(CLI::App& bench);
Run add_bench_windowed_attention(CLI::App& bench);
Run add_bench_refiner(CLI::App& bench);
Run add_bench_vae(CLI::App& bench);
Run add_bench_step(CLI::App& bench);

// The error a benchmark gives in a build without the CUDA backend.
[[noreturn]] void bench_needs_cuda(const char* name);

}  // namespace avdit::app
