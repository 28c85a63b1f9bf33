// The per-channel affine map on the CPU (see ops/conv1d_affine.h): x * scale, then + shift, in
// float32 as the references compute latent * std + mean (no fused multiply-add), then the clamp.
#include "ops/conv1d_affine.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/common.h"

namespace avdit::ops::cpu {

void conv1d_affine(const Tensor& x_in, const Tensor& scale_in, const Tensor* shift_in, float lo,
                   float hi, Tensor& y) {
  const Tensor x = f32(x_in), scale = f32(scale_in);
  const Tensor shift = shift_in ? f32(*shift_in) : Tensor();
  AVDIT_CHECK(y.numel() == x.numel(), "conv1d_affine: output {} for {}", y.shape_str(),
              x.shape_str());
  const int64_t C = x.size(1), L = x.size(2), rows = x.size(0) * C;
  std::vector<float> out(static_cast<size_t>(x.numel()));
  const float* px = x.f32();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r % C;
    const float a = scale.f32()[scale.numel() == 1 ? 0 : c];
    const float b = shift.defined() ? shift.f32()[shift.numel() == 1 ? 0 : c] : 0.0f;
    for (int64_t t = 0; t < L; ++t) out[r * L + t] = std::clamp(px[r * L + t] * a + b, lo, hi);
  }
  store(y, out.data());
}

}  // namespace avdit::ops::cpu
