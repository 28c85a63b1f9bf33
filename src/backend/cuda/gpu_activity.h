// What the GPU actually executed over a window of host code: every kernel (ours, cuBLAS', cuDNN's,
// CUTLASS'), memset and memcpy, counted from CUPTI's activity records with their device time. This
// is the launch-overhead figure of `avdit generate -v` ("launches per step", and how much of a step's
// wall time the GPU was busy): counted by the driver, not by hand in each model, so it cannot drift
// from the code and includes what libraries launch internally.
#pragma once

#include <cstdint>
#include <memory>

namespace avdit::cuda {

struct GpuActivity {
  int64_t kernels = 0, memsets = 0, memcpys = 0;
  double kernel_ms = 0, memset_ms = 0, memcpy_ms = 0;  // summed device durations
  int64_t launches() const { return kernels + memsets + memcpys; }
  // One stream runs one operation at a time, so the sum is the time the GPU was busy.
  double busy_ms() const { return kernel_ms + memset_ms + memcpy_ms; }
};

// Records GPU activity of this process from construction until take(). One probe at a time (CUPTI's
// activity buffers are process-wide); a second throws. Costs a little per launch while alive.
class GpuActivityProbe {
 public:
  // Whether this build has CUPTI (CUDA toolkit's CUDA::cupti found at configure time).
  static bool available();
  GpuActivityProbe();  // throws RuntimeFailure when CUPTI refuses, BadInput without CUPTI
  ~GpuActivityProbe();
  GpuActivityProbe(const GpuActivityProbe&) = delete;
  GpuActivityProbe& operator=(const GpuActivityProbe&) = delete;

  // Everything completed since construction or the last take(). Synchronise the device first: work
  // still queued is not counted yet.
  GpuActivity take();
};

}  // namespace avdit::cuda
