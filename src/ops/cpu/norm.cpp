// RMSNorm on the CPU: the sum of squares in double, then x * inv * g in float32 (see ops/norm.h).
#include <cmath>
#include <utility>

#include "ops/cpu/common.h"
#include "ops/norm.h"

namespace avdit::ops::cpu {

void rms_norm(const Tensor& x_in, const RmsNormWeight& w, float eps, Tensor& y) {
  const int64_t d = x_in.size(-1), rows = x_in.numel() / std::max<int64_t>(d, 1);
  AVDIT_CHECK(y.numel() == x_in.numel(), "rms_norm: output {} for x {}", y.shape_str(),
              x_in.shape_str());
  const Tensor x = f32(x_in);
  Tensor wf;
  int64_t groups = 1;
  if (w.w.defined()) {
    AVDIT_CHECK(w.w.numel() % d == 0, "rms_norm: weight {} for rows of {}", w.w.shape_str(), d);
    groups = w.w.numel() / d;
    AVDIT_CHECK(groups == 1 || w.group, "rms_norm: {} weight rows need a group index", groups);
    wf = f32(w.w);
  }
  const int64_t tokens = x.ndim() > 0 ? x.size(0) : 1,
                rows_per_token = rows / std::max<int64_t>(tokens, 1);
  if (groups > 1)
    AVDIT_CHECK(w.group->numel() == tokens, "rms_norm: {} group ids for {} tokens",
                w.group->numel(), tokens);
  Tensor y32 = y.dtype() == DType::F32 ? y : Tensor::empty(x.shape(), DType::F32);
  const float* px = x.f32();
  float* py = y32.f32();
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = px + r * d;
    const float* pw = nullptr;
    if (wf.defined()) {
      const int64_t g = groups > 1 ? index_at(*w.group, r / rows_per_token) : 0;
      AVDIT_CHECK(g >= 0 && g < groups, "rms_norm: group {} outside [0, {})", g, groups);
      pw = std::as_const(wf).f32() + g * d;
    }
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(a[i]) * a[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
    float* o = py + r * d;
    for (int64_t i = 0; i < d; ++i) {
      const float g = pw ? (w.one_plus ? 1.f + pw[i] : pw[i]) : 1.f;
      o[i] = a[i] * inv * g;
    }
  }
  if (y32.raw() != y.raw()) store(y, py);
}

}  // namespace avdit::ops::cpu
