// SnakeBeta on the CPU, in the reference's order of float32 operations: exp of the log-scale
// parameters, sin(x * alpha)^2 times 1 / (beta + 1e-9), plus x. One task per (row, channel).
#include "ops/snake_beta.h"

#include <cmath>

#include "core/thread_pool.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"

namespace avdit::ops::cpu {

void snake_beta(const Tensor& x_in, const Tensor& alpha_in, const Tensor& beta_in, Tensor& y) {
  const Tensor x = f32(x_in), alpha = f32(alpha_in), beta = f32(beta_in);
  AVDIT_CHECK(y.shape() == x.shape(), "snake_beta: output {} for {}", y.shape_str(), x.shape_str());
  const int64_t C = x.size(1), L = x.size(2), rows = x.size(0) * C;
  Tensor y32 = y.dtype() == DType::F32 ? y : Tensor::empty(y.shape(), DType::F32);
  const float* px = x.f32();
  float* py = y32.f32();
  cpu_pool().run(rows, [&](int64_t r) {
    const float a = std::exp(alpha.f32()[r % C]);
    const float inv = 1.0f / (std::exp(beta.f32()[r % C]) + kSnakeEps);
    const float* xr = px + r * L;
    float* yr = py + r * L;
    for (int64_t t = 0; t < L; ++t) {
      const float s = std::sin(xr[t] * a);
      yr[t] = xr[t] + inv * (s * s);
    }
  });
  if (y32.raw() != y.raw()) store(y, y32.f32());
}

}  // namespace avdit::ops::cpu
