// SnakeBeta with log-scale parameters (BigVGAN, Stable Audio's Oobleck), per channel c:
//   y = x + 1 / (exp(beta_c) + 1e-9) * sin(x * exp(alpha_c))^2
// over [batch, channels, length]. fp32 math; the result is rounded to the output's dtype.
#pragma once

#include <fmt/format.h>

#include "core/error.h"
#include "ops/dispatch.h"

namespace avdit::ops {

inline constexpr float kSnakeEps = 1e-9f;

namespace cpu {
void snake_beta(const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y);
}  // namespace cpu
namespace cuda {
void snake_beta(CudaContext& c, const Tensor& x, const Tensor& alpha, const Tensor& beta,
                Tensor& y);
}  // namespace cuda

// x: [B, C, L]; alpha, beta: [C] (log scale).
inline Tensor snake_beta(Context& ctx, const Tensor& x, const Tensor& alpha, const Tensor& beta) {
  AVDIT_CHECK(x.ndim() == 3 && alpha.numel() == x.size(1) && beta.numel() == x.size(1),
              "snake_beta: x {} with alpha {} and beta {}", x.shape_str(), alpha.shape_str(),
              beta.shape_str());
  Tensor y = ctx.empty(x.shape(), x.dtype());
  AVDIT_OP(ctx, snake_beta, x, alpha, beta, y);
  return y;
}

}  // namespace avdit::ops
