// H3 Euler update: x0 from the data-ward velocity, then the eta-0 interpolation toward x0.
#include "sample/euler.h"

#include "core/error.h"
#include "sample/elementwise.h"

namespace avdit::sample {

void h3_euler_step(std::span<float> x, std::span<const float> velocity, float t, float ratio,
                   std::span<float> denoised) {
  AVDIT_REQUIRE(velocity.size() == x.size(), "H3 Euler step: velocity has {} elements, expected {} (the latent's)",
                velocity.size(), x.size());
  AVDIT_REQUIRE(denoised.empty() || denoised.size() == x.size(),
                "H3 Euler step: denoised output has {} elements, expected {}", denoised.size(), x.size());
  const float c = 1.0f - t;          // (1.0 - cond_t), a float32 0-d tensor
  const float one_minus_r = 1.0f - ratio;
  const size_t n = x.size();
  for (size_t k = 0; k < n; ++k)
    x[k] = elem::h3_euler(x[k], velocity[k], c, ratio, one_minus_r, denoised.empty() ? nullptr : &denoised[k]);
}

Tensor h3_euler_step(const Tensor& x, const Tensor& velocity, float t, float ratio, Tensor* denoised) {
  AVDIT_REQUIRE(x.shape() == velocity.shape(), "H3 Euler step: velocity shape {} differs from latent shape {}",
                velocity.shape_str(), x.shape_str());
  const Tensor v = velocity.to_f32();
  Tensor out = x.to_f32().clone();
  std::span<float> d;
  if (denoised) {
    *denoised = Tensor::empty(x.shape(), DType::F32);
    d = std::span<float>(denoised->f32(), static_cast<size_t>(denoised->numel()));
  }
  h3_euler_step(std::span<float>(out.f32(), static_cast<size_t>(out.numel())),
                std::span<const float>(v.f32(), static_cast<size_t>(v.numel())), t, ratio, d);
  return out;
}

}  // namespace avdit::sample
