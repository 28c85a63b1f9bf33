// LayerNorm on the CPU: mean and variance in double, then the affine map in float32
// (ops/layer_norm.h).
#include <algorithm>
#include <cmath>

#include "ops/cpu/common.h"
#include "ops/layer_norm.h"

namespace avdit::ops::cpu {

void layer_norm(const Tensor& x_in, const Tensor* w_in, const Tensor* b_in, float eps, Tensor& y) {
  const int64_t d = x_in.size(-1), rows = x_in.numel() / std::max<int64_t>(d, 1);
  AVDIT_CHECK(y.numel() == x_in.numel(), "layer_norm: output {} for x {}", y.shape_str(),
              x_in.shape_str());
  AVDIT_CHECK(!w_in || w_in->numel() == d, "layer_norm: weight {} for rows of {}",
              w_in->shape_str(), d);
  AVDIT_CHECK(!b_in || b_in->numel() == d, "layer_norm: bias {} for rows of {}", b_in->shape_str(),
              d);
  const Tensor x = f32(x_in);
  const Tensor w = w_in ? f32(*w_in) : Tensor(), b = b_in ? f32(*b_in) : Tensor();
  Tensor y32 = y.dtype() == DType::F32 ? y : Tensor::empty(x.shape(), DType::F32);
  float* py = y32.f32();
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = x.f32() + r * d;
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += a[i];
    const double mean = sum / static_cast<double>(d);
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += (a[i] - mean) * (a[i] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
    const float m = static_cast<float>(mean);
    float* o = py + r * d;
    for (int64_t i = 0; i < d; ++i) {
      float v = (a[i] - m) * inv;
      if (w.defined()) v *= w.f32()[i];
      if (b.defined()) v += b.f32()[i];
      o[i] = v;
    }
  }
  if (y32.raw() != y.raw()) store(y, py);
}

}  // namespace avdit::ops::cpu
