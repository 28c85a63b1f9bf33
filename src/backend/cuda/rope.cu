// Rotate-half (NeoX) rotary embedding in place on dims [0, R) of every head; both DiTs apply it
// to part of each head (MAGI-2) or all of it (H3), with cos / sin tables per token.
#include "backend/cuda/common.cuh"
#include "backend/cuda/ops_cuda.h"

namespace avdit::cuda {
namespace {

// One thread per (token, head, pair i < half): it owns x[i] and x[i + half], so the in-place
// update has no hazards.
__global__ void rope_kernel(void* x, Elt xt, const void* cos, Elt ct, const void* sin, Elt st, int64_t S,
                            int64_t H, int64_t D, int64_t half) {
  const int64_t n = S * H * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = i % half, sh = i / half, t = sh / H;
    const int64_t a = sh * D + p, b = a + half;
    const float c = load_elt(cos, ct, t * half + p), s = load_elt(sin, st, t * half + p);
    const float x0 = load_elt(x, xt, a), x1 = load_elt(x, xt, b);
    store_elt(x, xt, a, x0 * c - x1 * s);
    store_elt(x, xt, b, x1 * c + x0 * s);
  }
}

}  // namespace

void rope_rotate_half_(Device& dev, Tensor& x, const Tensor& cos, const Tensor& sin) {
  require_cuda(x, "rope x");
  require_cuda(cos, "rope cos");
  require_cuda(sin, "rope sin");
  AVDIT_REQUIRE(x.ndim() == 3, "rope: x must be [S, H, D], got {}", x.shape_str());
  const int64_t S = x.size(0), H = x.size(1), D = x.size(2), half = cos.size(-1);
  AVDIT_REQUIRE(cos.numel() == S * half && sin.numel() == S * half && 2 * half <= D, "rope: x {} cos {} sin {}",
                x.shape_str(), cos.shape_str(), sin.shape_str());
  const int64_t n = S * H * half;
  if (n == 0) return;
  rope_kernel<<<grid_for(n), kThreads, 0, dev.stream()>>>(device_ptr(x), elt_of(x, "rope x"), cos.raw(),
                                                           elt_of(cos, "rope cos"), sin.raw(), elt_of(sin, "rope sin"),
                                                           S, H, D, half);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda
