// swiglu7 and the dense MLP of a MAGI-2 preview layer (see layers.h).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "models/magi2/layers.h"
#include "ops/ops.h"

namespace avdit::models::magi2 {
namespace {

// g' = min(g, 7), l' = clamp(l, -7, 7): g' sigmoid(1.702 g') (l' + 1) (GPT-OSS style, +1 on the linear part).
inline float swiglu7(float g, float l) {
  const float gc = std::min(g, kSwiglu7Limit);
  const float lc = std::clamp(l, -kSwiglu7Limit, kSwiglu7Limit);
  const float sig = 1.0f / (1.0f + std::exp(-(kSwiglu7Alpha * gc)));
  return gc * sig * (lc + 1.0f);
}

}  // namespace

Tensor swiglu7_interleaved(const Tensor& u_in, const Rounding& rnd) {
  const Tensor u = u_in.to_f32();
  const int64_t width = u.size(-1);
  AVDIT_CHECK(width % 2 == 0, "swiglu7 on an odd width {}", width);
  const int64_t rows = u.numel() / width, half = width / 2;
  Shape shape = u.shape();
  shape.back() = half;
  Tensor out = Tensor::empty(shape, DType::F32);
  const float* s = u.f32();
  float* o = out.f32();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < half; ++i) o[r * half + i] = rnd(swiglu7(s[r * width + 2 * i], s[r * width + 2 * i + 1]));
  return out;
}

Tensor swiglu7_split(const Tensor& g, const Tensor& l, const Rounding& rnd) {
  AVDIT_CHECK(g.shape() == l.shape(), "swiglu7 halves differ: {} vs {}", g.shape_str(), l.shape_str());
  Tensor out = Tensor::empty(g.shape(), DType::F32);
  const float* gv = g.f32();
  const float* lv = l.f32();
  float* o = out.f32();
  for (int64_t i = 0; i < g.numel(); ++i) o[i] = rnd(swiglu7(gv[i], lv[i]));
  return out;
}

Tensor dense_mlp_forward(const DenseMlpWeights& w, int64_t groups, const Tensor& mlp_in, const TokenLayout& layout,
                         const Rounding& rnd) {
  const int64_t hidden = mlp_in.size(1);
  const int64_t inter2 = w.up_gate_proj.size(0) / groups;
  return apply_grouped(mlp_in, groups, layout, [&](int64_t m, const Tensor& rows) {
    // bf16 mode: the norm output, both bf16 linears and swiglu7 (fp32 inside, cast back) are bf16 tensors.
    const Tensor a = rnd(ops::rms_norm(rows, w.pre_norm.slice_rows(m * hidden, (m + 1) * hidden), kNormEps, true));
    const Tensor u = rnd(ops::linear(a, w.up_gate_proj.slice_rows(m * inter2, (m + 1) * inter2)));  // [n, 2I]
    return rnd(ops::linear(swiglu7_interleaved(u, rnd), w.down_proj.slice_rows(m * hidden, (m + 1) * hidden)));
  });
}

}  // namespace avdit::models::magi2
