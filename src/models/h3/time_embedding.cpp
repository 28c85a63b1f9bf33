// Timestep embedding, written in the reference's float32 order of operations.
#include "models/h3/time_embedding.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace avdit::models::h3 {
namespace {

// torch.lerp on the CPU: the branch keeps the result exact at both ends.
float lerp(float a, float b, float w) {
  return w < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

Tensor interpolate_curve_table(const Tensor& table_any, const std::vector<float>& timesteps) {
  const Tensor table = table_any.to_f32();
  const int64_t grid = table.size(0), k = table.size(1);
  const auto M = static_cast<int64_t>(timesteps.size());
  Tensor out = Tensor::empty({M, k}, DType::F32);
  for (int64_t m = 0; m < M; ++m) {
    const float pos = std::clamp(timesteps[m], 0.0f, 1.0f) * static_cast<float>(grid - 1);
    const int64_t lower = std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), grid - 2);
    const float weight = pos - static_cast<float>(lower);
    const float* a = table.f32() + lower * k;
    const float* b = a + k;
    for (int64_t c = 0; c < k; ++c) out.f32()[m * k + c] = lerp(a[c], b[c], weight);
  }
  return out;
}

}  // namespace

Tensor timestep_sinusoid(const std::vector<float>& timesteps, int64_t dim) {
  const int64_t half = dim / 2;
  const auto M = static_cast<int64_t>(timesteps.size());
  // freq_j = exp(-ln(10000) * j / half) with each step rounded to float32, as torch does.
  const float neg_log = static_cast<float>(-std::log(kRopeBase));
  std::vector<float> freq(half);
  for (int64_t j = 0; j < half; ++j)
    freq[j] = std::exp(neg_log * static_cast<float>(j) / static_cast<float>(half));
  Tensor e = Tensor::empty({M, dim}, DType::F32);
  for (int64_t m = 0; m < M; ++m) {
    float* row = e.f32() + m * dim;
    for (int64_t j = 0; j < half; ++j) {
      const float arg = timesteps[m] * freq[j];
      row[j] = std::cos(arg);  // cos first
      row[half + j] = std::sin(arg);
    }
  }
  return e;
}

Tensor interpolate_adaln_curve(const Tensor& table, const std::vector<float>& unique_timesteps) {
  return interpolate_curve_table(table, unique_timesteps);
}

}  // namespace avdit::models::h3
