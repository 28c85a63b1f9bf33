// RoPE angle tables in float32 (the reference's fp32 island): angle = float32(p) * inv_freq.
#include "models/h3/rope.h"

#include <cmath>

#include "core/error.h"

namespace avdit::models::h3 {

RopeTables rope_tables(const std::vector<double>& positions, const Tensor& inv_freq_any) {
  AVDIT_CHECK(positions.size() % 3 == 0, "rope_tables: positions must be [S, 3]");
  const Tensor inv_freq = inv_freq_any.to_f32();
  const int64_t S = static_cast<int64_t>(positions.size()) / 3, L = inv_freq.numel();
  RopeTables t{Tensor::empty({S, 3 * L}, DType::F32), Tensor::empty({S, 3 * L}, DType::F32)};
  for (int64_t s = 0; s < S; ++s)
    for (int64_t axis = 0; axis < 3; ++axis) {
      const float p = static_cast<float>(positions[s * 3 + axis]);
      for (int64_t j = 0; j < L; ++j) {
        const float angle = p * inv_freq.f32()[j];
        t.cos.f32()[s * 3 * L + axis * L + j] = std::cos(angle);
        t.sin.f32()[s * 3 * L + axis * L + j] = std::sin(angle);
      }
    }
  return t;
}

Tensor rope_cos_sin_cache(const RopeTables& t) {
  const int64_t S = t.cos.size(0), n = t.cos.size(1);
  Tensor out = Tensor::empty({S, 2 * n}, DType::F32);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < n; ++i) {
      out.f32()[s * 2 * n + i] = t.cos.f32()[s * n + i];
      out.f32()[s * 2 * n + n + i] = t.sin.f32()[s * n + i];
    }
  return out;
}

}  // namespace avdit::models::h3
