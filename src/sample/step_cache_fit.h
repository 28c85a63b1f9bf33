// The indicator calibration of step caching: pairs (indicator, true relative change of the reused
// residual) collected over a run without skips, the degree-4 polynomial TeaCache rescales with
// (least squares in float64), and how much it explains: Pearson r, the in-sample R² and the
// leave-one-out R², which an in-sample figure alone hides (a quartic through a few dozen noisy
// points fits well and predicts badly).
#pragma once

#include <array>
#include <vector>

namespace avdit::sample {

struct IndicatorFit {
  int n = 0;
  std::array<double, 5> coef{};  // highest power first (numpy.polyfit's order)
  double pearson = 0;            // of x and y
  double r2 = 0;                 // 1 - SS_res / SS_tot of the fit on all points
  // 1 - PRESS / SS_tot: each point predicted by the fit on the others (NaN when a point has
  // leverage 1: the fit without it is not determined).
  double loo_r2 = 0;
};

// Least squares of y on [x^4, x^3, x^2, x, 1] by Householder QR of the column-scaled Vandermonde
// matrix; the leave-one-out residuals from the hat matrix, e_i / (1 - h_ii). BadInput for fewer
// than 6 points, unequal lengths, non-finite values, or x with fewer than 5 distinct values.
IndicatorFit fit_indicator(const std::vector<double>& x, const std::vector<double>& y);

// The coefficients only (a refit without one point, for instance).
std::array<double, 5> polyfit4(const std::vector<double>& x, const std::vector<double>& y);

// Pearson's r (0 when either side is constant).
double pearson(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace avdit::sample
