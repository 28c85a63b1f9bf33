// The step-cache indicator fit (sample/step_cache_fit.h): an exact quartic is recovered (the
// float64 closed form: the data's own coefficients, R² = 1); on noisy data of the indicator's scale
// the leave-one-out R² from the leverages equals a brute-force refit without each point, the
// in-sample R² equals 1 - SS_res / SS_tot of the returned polynomial, Pearson r its definition;
// bad input is refused. (numpy.polyfit on real calibration data: tests/cli/step_cache_cli.sh.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "sample/step_cache_fit.h"

namespace avdit::sample {
namespace {

double eval(const std::array<double, 5>& c, double x) {
  return (((c[0] * x + c[1]) * x + c[2]) * x + c[3]) * x + c[4];
}

TEST(IndicatorFit, RecoversAnExactQuartic) {
  const std::array<double, 5> truth = {120.0, -45.0, 6.5, -0.25, 0.03};
  std::vector<double> x, y;
  for (int i = 0; i < 40; ++i) {
    x.push_back(0.01 + 0.3 * i / 39.0);
    y.push_back(eval(truth, x.back()));
  }
  const IndicatorFit f = fit_indicator(x, y);
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(f.coef[j], truth[j], 1e-7 * std::fabs(truth[j])) << j;
  EXPECT_NEAR(f.r2, 1.0, 1e-12);
  EXPECT_NEAR(f.loo_r2, 1.0, 1e-10);
}

TEST(IndicatorFit, LeaveOneOutEqualsBruteForceRefits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ux(0.02, 0.6);
  std::normal_distribution<double> noise(0, 0.05);
  for (int n : {6, 9, 49}) {
    std::vector<double> x, y;
    for (int i = 0; i < n; ++i) {
      x.push_back(ux(rng));
      y.push_back(0.3 + 0.8 * x.back() - 0.5 * x.back() * x.back() + noise(rng));
    }
    const IndicatorFit f = fit_indicator(x, y);
    double mean = 0;
    for (double v : y) mean += v;
    mean /= n;
    double ss_tot = 0, ss_res = 0, press = 0, sxy = 0, sxx = 0, mx = 0;
    for (double v : x) mx += v;
    mx /= n;
    for (int i = 0; i < n; ++i) {
      std::vector<double> xi = x, yi = y;
      xi.erase(xi.begin() + i);
      yi.erase(yi.begin() + i);
      const double e = y[i] - eval(polyfit4(xi, yi), x[i]);
      press += e * e;
      ss_tot += (y[i] - mean) * (y[i] - mean);
      ss_res += (y[i] - eval(f.coef, x[i])) * (y[i] - eval(f.coef, x[i]));
      sxy += (x[i] - mx) * (y[i] - mean);
      sxx += (x[i] - mx) * (x[i] - mx);
    }
    EXPECT_NEAR(f.loo_r2, 1 - press / ss_tot, 1e-8 * std::max(1.0, std::fabs(f.loo_r2))) << n;
    EXPECT_NEAR(f.r2, 1 - ss_res / ss_tot, 1e-12) << n;
    EXPECT_NEAR(f.pearson, sxy / std::sqrt(sxx * ss_tot), 1e-12) << n;
    EXPECT_LT(f.loo_r2, f.r2) << n;  // out of sample never fits better than in sample
    EXPECT_EQ(f.n, n);
  }
}

TEST(IndicatorFit, RefusesWhatCannotBeFitted) {
  EXPECT_THROW(fit_indicator({0.1, 0.2, 0.3, 0.4, 0.5}, {1, 2, 3, 4, 5}), BadInput);  // 5 points
  EXPECT_THROW(fit_indicator({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {1, 2, 3}), BadInput);
  EXPECT_THROW(fit_indicator({0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4}, {1, 2, 3, 4, 5, 6, 7}), BadInput);
  EXPECT_THROW(fit_indicator({0.1, 0.2, 0.3, 0.4, 0.5, NAN}, {1, 2, 3, 4, 5, 6}), BadInput);
}

}  // namespace
}  // namespace avdit::sample
