// A per-channel affine map of [batch, channels, length] signals, clamped:
//   y = clamp(x * scale[c] + shift[c], lo, hi) in float32
// the audio decoders' latent de-normalisation (latent * std + mean), BigVGAN's mean of its
// parallel residual blocks (scale 1/3) and its final clamp to [-1, 1] (scale 1).
#pragma once

#include <fmt/format.h>

#include <limits>

#include "core/error.h"
#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void conv1d_affine(const Tensor& x, const Tensor& scale, const Tensor* shift, float lo, float hi,
                   Tensor& y);
}  // namespace cpu
namespace cuda {
void conv1d_affine(CudaContext& c, const Tensor& x, const Tensor& scale, const Tensor* shift,
                   float lo, float hi, Tensor& y);
}  // namespace cuda

inline constexpr float kNoLimit = std::numeric_limits<float>::infinity();

// x: [B, C, L]; scale: [C] (or 1 value for all channels); shift: [C], [1] or null.
inline Tensor conv1d_affine(Context& ctx, const Tensor& x, const Tensor& scale,
                            const Tensor* shift = nullptr, float lo = -kNoLimit,
                            float hi = kNoLimit) {
  AVDIT_CHECK(x.ndim() == 3 && (scale.numel() == x.size(1) || scale.numel() == 1) &&
                  (!shift || shift->numel() == x.size(1) || shift->numel() == 1),
              "conv1d_affine: x {} with scale {} and shift {}", x.shape_str(), scale.shape_str(),
              shift ? shift->shape_str() : std::string("none"));
  Tensor y = ctx.empty(x.shape(), x.dtype());
  AVDIT_OP(ctx, conv1d_affine, x, scale, shift, lo, hi, y);
  return y;
}

}  // namespace avdit::ops
