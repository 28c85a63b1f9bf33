// The text rotary tables, on the host (built once per prompt length).
#include "models/text/qwen3vl/rope.h"

#include <cmath>
#include <vector>

namespace avdit::models::text::qwen3vl {

RopeTable rope_table(int64_t tokens, int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  const float base = static_cast<float>(theta);
  for (int64_t j = 0; j < half; ++j)
    inv[j] = 1.0f / std::pow(base, static_cast<float>(2 * j) / static_cast<float>(head_dim));
  std::vector<float> c(static_cast<size_t>(tokens * head_dim)), s(c.size());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < half; ++j) {
      const float angle = static_cast<float>(t) * inv[j];
      const float cj = static_cast<float>(std::cos(static_cast<double>(angle)));
      const float sj = static_cast<float>(std::sin(static_cast<double>(angle)));
      c[t * head_dim + j] = c[t * head_dim + j + half] = cj;
      s[t * head_dim + j] = s[t * head_dim + j + half] = sj;
    }
  return {Tensor::from_floats(std::move(c), {tokens, head_dim}),
          Tensor::from_floats(std::move(s), {tokens, head_dim})};
}

RopeTable per_head(const RopeTable& t, int64_t heads, DType dtype) {
  const int64_t T = t.cos.size(0), D = t.cos.size(1), half = D / 2;
  // Rounded to the activation dtype first, as the reference's cos.to(x.dtype).
  const Tensor c = t.cos.to(dtype).to_f32(), s = t.sin.to(dtype).to_f32();
  std::vector<float> cr(static_cast<size_t>(T * heads * D)), sr(cr.size());
  for (int64_t r = 0; r < T; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < D; ++i) {
        const int64_t o = (r * heads + h) * D + i;
        cr[o] = c.f32()[r * D + i];
        sr[o] = i < half ? -s.f32()[r * D + i] : s.f32()[r * D + i];
      }
  return {Tensor::from_floats(std::move(cr), {T * heads, D}).to(dtype),
          Tensor::from_floats(std::move(sr), {T * heads, D}).to(dtype)};
}

}  // namespace avdit::models::text::qwen3vl
