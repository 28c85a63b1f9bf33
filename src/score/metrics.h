// The numbers `avdit score` reports, on host float32 tensors in float64 arithmetic: the
// teacher-forced one-step error of each update, the latent SNR, and their per-step series.
#pragma once

#include <array>
#include <vector>

#include "core/tensor.h"
#include "sample/sampler_loop.h"

namespace avdit::score {

// ||a - b||_2 over all elements (shapes must match; BadInput otherwise).
double l2_distance(const Tensor& a, const Tensor& b);
double l2_norm(const Tensor& a);

// The teacher-forced error of one step: ||c[k] - t[k]|| / ||t[k] - t[k-1]||, the candidate's
// distance from the teacher's latent after the step over the size of the teacher's update. NaN
// when the teacher did not move (no update to measure against).
double step_error(const Tensor& candidate, const Tensor& teacher, const Tensor& teacher_before);

// 10 log10(||ref||^2 / ||x - ref||^2) in dB; +infinity when x equals ref exactly.
double snr_db(const Tensor& x, const Tensor& ref);

// Per modality m and step k = 1..steps: error[m][k-1] = step_error(c[k], t[k], t[k-1]) and
// snr[m][k-1] = snr_db(c[k], t[k]), from a candidate's trajectory taken teacher-forced (c[k] made
// from t[k-1]) or free-running (then the error column is not meaningful: snr only).
struct StepSeries {
  std::array<std::vector<double>, 2> error, snr;
};
StepSeries step_series(const sample::Trajectory& candidate, const sample::Trajectory& teacher);

// Means that skip NaN, and keep +infinity when every value is +infinity (the teacher scored as its
// own candidate); NaN when nothing is left.
double mean_finite_or_inf(const std::vector<double>& v);

}  // namespace avdit::score
