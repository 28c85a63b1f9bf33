// The per-channel affine map on the GPU (ops/conv1d_affine.h): one thread per element; the product
// and the sum rounded separately (no FMA contraction), as the CPU and the references compute
// latent * std + mean, then the clamp, so the result matches the CPU bit for bit.
#include "backend/cuda/context.h"
#include "ops/conv1d_affine.h"
#include "ops/cuda/common.cuh"

namespace avdit::cuda {
namespace {

__global__ void affine_kernel(const void* x, Elt xt, const void* scale, Elt st, int64_t scale_n,
                              const void* shift, Elt ht, int64_t shift_n, float lo, float hi,
                              void* y, Elt yt, int64_t C, int64_t L, int64_t n) {
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t c = (i / L) % C;
    const float a = load_elt(scale, st, scale_n == 1 ? 0 : c);
    const float b = shift ? load_elt(shift, ht, shift_n == 1 ? 0 : c) : 0.0f;
    const float v = __fadd_rn(__fmul_rn(load_elt(x, xt, i), a), b);
    // std::clamp's order: NaN passes through.
    store_elt(y, yt, i, v < lo ? lo : (hi < v ? hi : v));
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void conv1d_affine(CudaContext& c, const Tensor& x, const Tensor& scale, const Tensor* shift,
                   float lo, float hi, Tensor& y) {
  c.require_here(x, "conv1d_affine x");
  c.require_here(scale, "conv1d_affine scale");
  if (shift) c.require_here(*shift, "conv1d_affine shift");
  c.require_here(y, "conv1d_affine y");
  AVDIT_CHECK(x.ndim() == 3 && y.numel() == x.numel(), "conv1d_affine: output {} for {}",
              y.shape_str(), x.shape_str());
  const int64_t C = x.size(1), L = x.size(2);
  AVDIT_CHECK((scale.numel() == C || scale.numel() == 1) &&
                  (!shift || shift->numel() == C || shift->numel() == 1),
              "conv1d_affine: x {} with scale {} and shift {}", x.shape_str(), scale.shape_str(),
              shift ? shift->shape_str() : std::string("none"));
  const Elt xt = elt_of(x, "conv1d_affine x"), st = elt_of(scale, "conv1d_affine scale"),
            yt = elt_of(y, "conv1d_affine y");
  const Elt ht = shift ? elt_of(*shift, "conv1d_affine shift") : Elt::F32;
  const int64_t n = x.numel();
  if (n == 0) return;
  affine_kernel<<<grid_for(n), kThreads, 0, c.stream()>>>(
      x.raw(), xt, scale.raw(), st, scale.numel(), shift ? shift->raw() : nullptr, ht,
      shift ? shift->numel() : 0, lo, hi, device_ptr(y), yt, C, L, n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
