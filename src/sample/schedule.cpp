// Sigma schedules of MAGI-2 (FlowUniPC, float64 grid) and H3 (float32 grid, two shifts).
// Every expression keeps the reference's types and evaluation order; the comments say which.
#include "sample/schedule.h"

#include <cmath>

#include "core/error.h"

namespace avdit::sample {

FlowUniPCSchedule magi2_schedule(int steps, double shift) {
  AVDIT_REQUIRE(steps >= 1, "MAGI-2 schedule: expected at least 1 step, got {}", steps);
  AVDIT_REQUIRE(shift > 0, "MAGI-2 schedule: expected a positive shift, got {}", shift);
  // The training sigmas are 1 - linspace(1, 1/1000, 1000) reversed, stored as float32: the largest
  // one is fp32(0.999).
  const double sigma_max = static_cast<double>(static_cast<float>(1.0 - 1.0 / 1000.0));
  const int num = steps + 1;
  const double step = (0.0 - sigma_max) / static_cast<double>(num - 1);  // numpy: delta / div
  FlowUniPCSchedule out;
  out.sigmas.reserve(num);
  for (int i = 0; i < steps; ++i) {  // [:-1] drops the endpoint
    const double s = static_cast<double>(i) * step + sigma_max;  // numpy: arange * step, then += start
    const double shifted = (shift * s) / (1.0 + (shift - 1.0) * s);
    out.sigmas.push_back(static_cast<float>(shifted));
    out.timesteps.push_back(static_cast<int64_t>(shifted * 1000.0));  // .to(int64) truncates
    // GPU: tensor(float32) / 1000.0 is evaluated as x * (1.0f / 1000.0f).
    out.model_t.push_back(static_cast<float>(out.timesteps.back()) * (1.0f / 1000.0f));
  }
  out.sigmas.push_back(0.0f);
  return out;
}

std::vector<float> h3_sigmas(int points, double shift, int torch_vector_width) {
  AVDIT_REQUIRE(points >= 2, "H3 schedule: expected at least 2 sigma points (1 step), got {}", points);
  AVDIT_REQUIRE(shift > 0, "H3 schedule: expected a positive shift, got {}", shift);
  AVDIT_REQUIRE(torch_vector_width == 0 || torch_vector_width == 8 || torch_vector_width == 16,
                "H3 schedule: torch vector width must be 0, 8 or 16, got {}", torch_vector_width);
  // torch.linspace(1, 0, points, dtype=float32) on the CPU (RangeFactoriesKernel.cpp).
  const float start = 1.0f, end = 0.0f;
  const float step = (end - start) / static_cast<float>(points - 1);
  const int64_t halfway = points / 2;
  auto scalar_at = [&](int64_t idx) {
    return idx < halfway ? start + step * static_cast<float>(idx)
                         : end - step * static_cast<float>(points - idx - 1);
  };
  std::vector<float> base(points);
  int64_t i = 0;
  if (torch_vector_width > 0) {
    const int64_t w = torch_vector_width;
    for (; i + 2 * w <= points; i += 2 * w) {
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t idx = i + half * w;
        const float b0 = scalar_at(idx);  // Vectorized::arange(b0, step): b0 + j * step
        for (int64_t j = 0; j < w; ++j) base[idx + j] = b0 + static_cast<float>(j) * step;
      }
    }
  }
  for (; i < points; ++i) base[i] = scalar_at(i);

  // shift * b / (1.0 + (shift - 1.0) * b): Python scalars become float32 operands.
  const float s = static_cast<float>(shift), s1 = static_cast<float>(shift - 1.0);
  std::vector<float> sigmas;
  sigmas.reserve(points + 1);
  for (float b : base) {
    const float v = (s * b) / (1.0f + s1 * b);
    if (sigmas.empty() || sigmas.back() != v) sigmas.push_back(v);  // unique_consecutive
  }
  if (sigmas.back() > 0.0f) sigmas.push_back(0.0f);
  return sigmas;
}

H3Schedule h3_schedule(int steps, double video_shift, double audio_shift, int torch_vector_width) {
  AVDIT_REQUIRE(steps >= 1, "H3 schedule: expected at least 1 step, got {}", steps);
  H3Schedule out;
  out.video_sigmas = h3_sigmas(steps + 1, video_shift, torch_vector_width);
  out.audio_sigmas = h3_sigmas(steps + 1, audio_shift, torch_vector_width);
  AVDIT_REQUIRE(out.video_sigmas.size() == out.audio_sigmas.size(),
                "H3 schedule: {} steps with shifts {} / {} give {} video but {} audio sigmas after "
                "removing duplicates; expected equal lengths (choose fewer steps)",
                steps, video_shift, audio_shift, out.video_sigmas.size(), out.audio_sigmas.size());
  auto derive = [](const std::vector<float>& sig, std::vector<float>& t, std::vector<float>& ratio) {
    for (size_t k = 0; k + 1 < sig.size(); ++k) {
      // torch.tensor(1.0 - sigma, float32): exact double difference rounded once = fp32 subtraction.
      t.push_back(static_cast<float>(1.0 - static_cast<double>(sig[k])));
      ratio.push_back(sig[k + 1] / sig[k]);
    }
  };
  derive(out.video_sigmas, out.video_t, out.video_ratio);
  derive(out.audio_sigmas, out.audio_t, out.audio_ratio);
  return out;
}

}  // namespace avdit::sample
