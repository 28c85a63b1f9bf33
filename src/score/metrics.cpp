// Latent metrics of `avdit score` (see metrics.h).
#include "score/metrics.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace avdit::score {

namespace {

void require_same(const Tensor& a, const Tensor& b) {
  AVDIT_REQUIRE(a.shape() == b.shape(), "score: comparing latents of shapes {} and {}",
                a.shape_str(), b.shape_str());
}

}  // namespace

double l2_distance(const Tensor& a_in, const Tensor& b_in) {
  require_same(a_in, b_in);
  const Tensor a = a_in.to_f32(), b = b_in.to_f32();
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = static_cast<double>(a.f32()[i]) - b.f32()[i];
    s += d * d;
  }
  return std::sqrt(s);
}

double l2_norm(const Tensor& a_in) {
  const Tensor a = a_in.to_f32();
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += static_cast<double>(a.f32()[i]) * a.f32()[i];
  return std::sqrt(s);
}

double step_error(const Tensor& c, const Tensor& t, const Tensor& t_before) {
  const double update = l2_distance(t, t_before);
  if (update == 0) return std::numeric_limits<double>::quiet_NaN();
  return l2_distance(c, t) / update;
}

double snr_db(const Tensor& x, const Tensor& ref) {
  const double noise = l2_distance(x, ref);
  if (noise == 0) return std::numeric_limits<double>::infinity();
  const double signal = l2_norm(ref);
  return 20.0 * std::log10(signal / noise);
}

StepSeries step_series(const sample::Trajectory& c, const sample::Trajectory& t) {
  AVDIT_REQUIRE(c.steps() == t.steps(), "score: a run of {} steps against a teacher of {}",
                c.steps(), t.steps());
  StepSeries s;
  for (int k = 1; k <= t.steps(); ++k)
    for (size_t m = 0; m < 2; ++m) {
      AVDIT_CHECK(c.latents[k].size() == 2 && t.latents[k].size() == 2,
                  "score: trajectories of two modalities");
      s.error[m].push_back(step_error(c.latents[k][m], t.latents[k][m], t.latents[k - 1][m]));
      s.snr[m].push_back(snr_db(c.latents[k][m], t.latents[k][m]));
    }
  return s;
}

double mean_finite_or_inf(const std::vector<double>& v) {
  double sum = 0;
  int n = 0, inf = 0;
  for (const double x : v) {
    if (std::isnan(x)) continue;
    if (std::isinf(x) && x > 0) {
      ++inf;
      continue;
    }
    sum += x;
    ++n;
  }
  if (n == 0)
    return inf > 0 ? std::numeric_limits<double>::infinity()
                   : std::numeric_limits<double>::quiet_NaN();
  // A finite mean over the finite values: an infinite SNR at some step means "no error there"; the
  // mean of the rest is what is left to report (the count of exact steps is reported beside it).
  return sum / n;
}

}  // namespace avdit::score
