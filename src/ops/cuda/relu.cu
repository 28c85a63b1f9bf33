// relu on the GPU (ops/relu.h): one thread per element in a grid-stride loop; exact, and NaN stays
// NaN as on the CPU (the comparison is false for it).
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/relu.h"

namespace avdit::cuda {
namespace {

__global__ void relu_kernel(const void* x, Elt xt, void* y, Elt yt, int64_t n) {
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const float v = load_elt(x, xt, i);
    store_elt(y, yt, i, v < 0.0f ? 0.0f : v);
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void relu(CudaContext& c, const Tensor& x, Tensor& y) {
  c.require_here(x, "relu x");
  c.require_here(y, "relu y");
  AVDIT_CHECK(y.numel() == x.numel(), "relu: output {} for x {}", y.shape_str(), x.shape_str());
  const Elt xt = elt_of(x, "relu x"), yt = elt_of(y, "relu y");
  const int64_t n = x.numel();
  if (n == 0) return;
  relu_kernel<<<grid_for(n), kThreads, 0, c.stream()>>>(x.raw(), xt, device_ptr(y), yt, n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
