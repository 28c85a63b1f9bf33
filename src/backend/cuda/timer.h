// Timing GPU work with CUDA events on the device's stream (TARGETS.md protocol: warm up, then the
// median of repeated runs). Benchmarks only; tests never assert a time.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "backend/cuda/device.h"
#include "bench/gpu_clock.h"
#include "bench/report.h"

namespace avdit::cuda {

// Runs `work` (which enqueues on dev.stream()) `warmup` times untimed, then `iters` times, each
// bracketed by events; returns the per-run milliseconds.
// With `clock` (bench/gpu_clock.h), the timed runs are also sampled for the GPU's SM clock and
// power, summarised into *clock_out.
inline bench::Timing time_on_stream(Device& dev, const std::function<void()>& work, int warmup = 3,
                                    int iters = 10, bench::ClockSampler* clock = nullptr,
                                    bench::ClockSummary* clock_out = nullptr) {
  for (int i = 0; i < warmup; ++i) work();
  if (clock) {
    AVDIT_CUDA_CHECK(cudaStreamSynchronize(dev.stream()));  // the warm-up is not in the window
    clock->start();
  }
  cudaEvent_t a, b;
  AVDIT_CUDA_CHECK(cudaEventCreate(&a));
  AVDIT_CUDA_CHECK(cudaEventCreate(&b));
  bench::Timing t;
  for (int i = 0; i < iters; ++i) {
    AVDIT_CUDA_CHECK(cudaEventRecord(a, dev.stream()));
    work();
    AVDIT_CUDA_CHECK(cudaEventRecord(b, dev.stream()));
    AVDIT_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.ms.push_back(ms);
  }
  if (clock) {
    const bench::ClockSummary c = clock->stop();
    if (clock_out) *clock_out = c;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t;
}

}  // namespace avdit::cuda
