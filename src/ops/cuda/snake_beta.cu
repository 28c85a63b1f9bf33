// SnakeBeta on the GPU (ops/snake_beta.h): one thread per element, in the CPU's order of float32
// operations with the accurate expf / sinf (not the fast intrinsics), so the result tracks the CPU
// to a few ulps.
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/snake_beta.h"

namespace avdit::cuda {
namespace {

__global__ void snake_beta_kernel(const void* x, Elt xt, const void* alpha, Elt at,
                                  const void* beta, Elt bt, void* y, Elt yt, int64_t C, int64_t L,
                                  int64_t n) {
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t c = (i / L) % C;
    const float a = expf(load_elt(alpha, at, c));
    const float inv = 1.0f / (expf(load_elt(beta, bt, c)) + ::avdit::ops::kSnakeEps);
    const float v = load_elt(x, xt, i);
    const float s = sinf(v * a);
    store_elt(y, yt, i, v + inv * (s * s));
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void snake_beta(CudaContext& c, const Tensor& x, const Tensor& alpha, const Tensor& beta,
                Tensor& y) {
  c.require_here(x, "snake_beta x");
  c.require_here(alpha, "snake_beta alpha");
  c.require_here(beta, "snake_beta beta");
  c.require_here(y, "snake_beta y");
  AVDIT_CHECK(x.ndim() == 3 && y.shape() == x.shape() && alpha.numel() == x.size(1) &&
                  beta.numel() == x.size(1),
              "snake_beta: x {} y {} with alpha {} and beta {}", x.shape_str(), y.shape_str(),
              alpha.shape_str(), beta.shape_str());
  const Elt xt = elt_of(x, "snake_beta x"), at = elt_of(alpha, "snake_beta alpha"),
            bt = elt_of(beta, "snake_beta beta"), yt = elt_of(y, "snake_beta y");
  const int64_t n = x.numel();
  if (n == 0) return;
  snake_beta_kernel<<<grid_for(n), kThreads, 0, c.stream()>>>(
      x.raw(), xt, alpha.raw(), at, beta.raw(), bt, device_ptr(y), yt, x.size(1), x.size(2), n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
