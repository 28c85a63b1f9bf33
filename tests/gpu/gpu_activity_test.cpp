// GpuActivityProbe (the launch counts of `generate -v`) against work whose launches we know: n
// element-wise adds (one kernel each, ops::add_), m memsets and c device-to-device copies enqueued
// between construction and take(), nothing else counted, and the probe's window ends at take().
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "backend/cuda/device.h"
#include "backend/cuda/gpu_activity.h"
#include "backend/cuda/context.h"
#include "ops/activation.h"
#include "core/error.h"

namespace avdit::cuda {
namespace {

TEST(GpuActivity, CountsKnownLaunches) {
  if (!GpuActivityProbe::available()) GTEST_SKIP() << "built without CUPTI";
  Device dev;
  ops::CudaContext ctx(dev);
  Tensor a = cuda_empty(dev, {1 << 20}, DType::F32), b = cuda_empty(dev, {1 << 20}, DType::F32);
  AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(a), 0, size_t(a.nbytes()), dev.stream()));
  AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(b), 0, size_t(b.nbytes()), dev.stream()));
  ops::add_(ctx, a, b);  // before the probe: must not be counted
  dev.synchronize();

  for (int round = 0; round < 2; ++round) {  // take() starts a new window
    GpuActivityProbe probe;
    const int n = 7 + round, m = 3, c = 2;
    for (int i = 0; i < n; ++i) ops::add_(ctx, a, b);
    for (int i = 0; i < m; ++i)
      AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(b), 1, size_t(b.nbytes()), dev.stream()));
    for (int i = 0; i < c; ++i)
      AVDIT_CUDA_CHECK(cudaMemcpyAsync(device_ptr(a), device_ptr(b), size_t(a.nbytes()), cudaMemcpyDeviceToDevice,
                                       dev.stream()));
    dev.synchronize();
    const GpuActivity got = probe.take();
    EXPECT_EQ(got.kernels, n);
    EXPECT_EQ(got.memsets, m);
    EXPECT_EQ(got.memcpys, c);
    EXPECT_GT(got.kernel_ms, 0.0);
    EXPECT_GT(got.busy_ms(), got.kernel_ms);
    // An empty window after take().
    dev.synchronize();
    const GpuActivity none = probe.take();
    EXPECT_EQ(none.launches(), 0);
    std::printf("  round %d: %ld kernels %.3f ms, %ld memsets, %ld copies, busy %.3f ms\n", round, long(got.kernels),
                got.kernel_ms, long(got.memsets), long(got.memcpys), got.busy_ms());
  }
  // One probe at a time.
  GpuActivityProbe first;
  EXPECT_THROW(GpuActivityProbe second, BadInput);
}

}  // namespace
}  // namespace avdit::cuda
