// BigVGAN's anti-aliased activation (Activation1d): each channel upsampled by `ratio` with a
// low-pass FIR, SnakeBeta applied at the high rate, then low-passed and decimated back. Fused in
// one op so the upsampled signal (ratio x the activations) never exists as a whole.
//   up:   replicate-pad K/ratio - 1 samples each side, ratio * conv_transpose1d(x, up, stride
//         ratio) per channel, crop pad*ratio + (K - ratio)/2 (left) and pad*ratio + (K - ratio +
//         1)/2 (right);
//   down: replicate-pad K/2 - (K even) left and K/2 right, conv1d(x, down, stride ratio).
// fp32 math; the result is rounded to the output's dtype.
#pragma once

#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void conv1d_alias_free_snake(const Tensor& x, const Tensor& up, const Tensor& down,
                             const Tensor& alpha, const Tensor& beta, int64_t ratio, Tensor& y);
}  // namespace cpu
namespace cuda {
void conv1d_alias_free_snake(CudaContext& c, const Tensor& x, const Tensor& up, const Tensor& down,
                             const Tensor& alpha, const Tensor& beta, int64_t ratio, Tensor& y);
}  // namespace cuda

// x: [B, C, L]; up, down: the K-tap filters (any shape of K values, e.g. the state dict's
// [1, 1, K]); alpha, beta: [C] (SnakeBeta, log scale) -> [B, C, L].
inline Tensor conv1d_alias_free_snake(Context& ctx, const Tensor& x, const Tensor& up,
                                      const Tensor& down, const Tensor& alpha, const Tensor& beta,
                                      int64_t ratio = 2) {
  AVDIT_CHECK(x.ndim() == 3 && alpha.numel() == x.size(1) && beta.numel() == x.size(1),
              "conv1d_alias_free_snake: x {} with alpha {} and beta {}", x.shape_str(),
              alpha.shape_str(), beta.shape_str());
  AVDIT_CHECK(ratio >= 1 && up.numel() >= ratio && down.numel() >= 1,
              "conv1d_alias_free_snake: filters {} and {} for ratio {}", up.shape_str(),
              down.shape_str(), ratio);
  Tensor y = ctx.empty(x.shape(), x.dtype());
  AVDIT_OP(ctx, conv1d_alias_free_snake, x, up, down, alpha, beta, ratio, y);
  return y;
}

}  // namespace avdit::ops
