// Degree-4 least squares with leverages (see step_cache_fit.h).
#include "sample/step_cache_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"

namespace avdit::sample {
namespace {

constexpr int kP = 5;

struct Qr {
  int n = 0;
  std::vector<double> a;  // n x kP, column-major: R above the diagonal, reflectors below
  std::array<double, kP> diag{}, scale{};
  std::vector<double> q;  // n x kP thin Q, column-major
};

// Householder QR of V D^-1 (V the Vandermonde matrix, D its column norms: the powers of a small x
// differ by orders of magnitude), with the thin Q formed explicitly for the leverages.
Qr factor(const std::vector<double>& x) {
  Qr f;
  f.n = static_cast<int>(x.size());
  const int n = f.n;
  f.a.assign(static_cast<size_t>(n) * kP, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < kP; ++j) f.a[j * n + i] = std::pow(x[i], kP - 1 - j);
  for (int j = 0; j < kP; ++j) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += f.a[j * n + i] * f.a[j * n + i];
    f.scale[j] = s > 0 ? std::sqrt(s) : 1.0;
    for (int i = 0; i < n; ++i) f.a[j * n + i] /= f.scale[j];
  }
  std::vector<std::vector<double>> v(kP);
  for (int k = 0; k < kP; ++k) {
    double norm = 0;
    for (int i = k; i < n; ++i) norm += f.a[k * n + i] * f.a[k * n + i];
    norm = std::sqrt(norm);
    const double alpha = f.a[k * n + k] > 0 ? -norm : norm;
    v[k].assign(n, 0);
    for (int i = k; i < n; ++i) v[k][i] = f.a[k * n + i];
    v[k][k] -= alpha;
    double vv = 0;
    for (int i = k; i < n; ++i) vv += v[k][i] * v[k][i];
    if (vv > 0)
      for (int j = k; j < kP; ++j) {
        double d = 0;
        for (int i = k; i < n; ++i) d += v[k][i] * f.a[j * n + i];
        d = 2 * d / vv;
        for (int i = k; i < n; ++i) f.a[j * n + i] -= d * v[k][i];
      }
    f.diag[k] = f.a[k * n + k];
  }
  // Q = H_0 ... H_4 applied to the first kP columns of the identity (back to front).
  f.q.assign(static_cast<size_t>(n) * kP, 0);
  for (int j = 0; j < kP; ++j) f.q[j * n + j] = 1;
  for (int k = kP - 1; k >= 0; --k) {
    double vv = 0;
    for (int i = k; i < n; ++i) vv += v[k][i] * v[k][i];
    if (vv == 0) continue;
    for (int j = 0; j < kP; ++j) {
      double d = 0;
      for (int i = k; i < n; ++i) d += v[k][i] * f.q[j * n + i];
      d = 2 * d / vv;
      for (int i = k; i < n; ++i) f.q[j * n + i] -= d * v[k][i];
    }
  }
  return f;
}

// Coefficients from the factorisation: R c' = Q^T y, then c = D^-1 c'.
std::array<double, kP> solve(const Qr& f, const std::vector<double>& y) {
  const int n = f.n;
  std::array<double, kP> qty{}, c{};
  for (int j = 0; j < kP; ++j)
    for (int i = 0; i < n; ++i) qty[j] += f.q[j * n + i] * y[i];
  for (int j = kP - 1; j >= 0; --j) {
    double s = qty[j];
    for (int k = j + 1; k < kP; ++k) s -= f.a[k * n + j] * c[k];
    c[j] = s / f.diag[j];
  }
  for (int j = 0; j < kP; ++j) c[j] /= f.scale[j];
  return c;
}

double eval(const std::array<double, kP>& c, double x) {
  double y = 0;
  for (double v : c) y = y * x + v;
  return y;
}

void check_points(const std::vector<double>& x, const std::vector<double>& y, size_t min_points) {
  AVDIT_REQUIRE(x.size() == y.size(), "indicator fit: {} indicator values but {} changes", x.size(),
                y.size());
  AVDIT_REQUIRE(
      x.size() >= min_points,
      "indicator fit: {} points; a degree-4 fit with a leave-one-out figure needs at least {} "
      "(run more steps)",
      x.size(), min_points);
  for (size_t i = 0; i < x.size(); ++i)
    AVDIT_REQUIRE(std::isfinite(x[i]) && std::isfinite(y[i]),
                  "indicator fit: point {} is not finite ({}, {})", i, x[i], y[i]);
  AVDIT_REQUIRE(
      std::set<double>(x.begin(), x.end()).size() >= kP,
      "indicator fit: fewer than {} distinct indicator values; the quartic is not determined", kP);
}

}  // namespace

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= n;
  my /= n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

std::array<double, 5> polyfit4(const std::vector<double>& x, const std::vector<double>& y) {
  check_points(x, y, kP);
  return solve(factor(x), y);
}

IndicatorFit fit_indicator(const std::vector<double>& x, const std::vector<double>& y) {
  check_points(x, y, kP + 1);
  const Qr f = factor(x);
  IndicatorFit r;
  r.n = static_cast<int>(x.size());
  r.coef = solve(f, y);
  r.pearson = pearson(x, y);
  double mean = 0;
  for (double v : y) mean += v;
  mean /= r.n;
  double ss_tot = 0, ss_res = 0, press = 0;
  bool determined = true;
  for (int i = 0; i < r.n; ++i) {
    const double e = y[i] - eval(r.coef, x[i]);
    double h = 0;
    for (int j = 0; j < kP; ++j) h += f.q[j * r.n + i] * f.q[j * r.n + i];
    ss_tot += (y[i] - mean) * (y[i] - mean);
    ss_res += e * e;
    if (1 - h < 1e-12)
      determined = false;
    else
      press += (e / (1 - h)) * (e / (1 - h));
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : nan;
  r.loo_r2 = ss_tot > 0 && determined ? 1 - press / ss_tot : nan;
  return r;
}

}  // namespace avdit::sample
