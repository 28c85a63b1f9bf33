// Radix-2 FFT and Bluestein's algorithm (see ops/cpu/fft.h). Twiddles are computed directly with
// cos/sin of exact angles, not by recurrence, so the error stays at float64 rounding.
#include "ops/cpu/fft.h"

#include <cmath>
#include <cstdint>
#include <numbers>
#include <utility>

namespace avdit::ops::cpu {
namespace {

using cd = std::complex<double>;

// The plain product: std::complex's operator* checks for NaN/Inf operands (C Annex G), which
// costs more than the butterfly itself; the operands here are finite.
inline cd mul(const cd& a, const cd& b) {
  return cd(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
}

void radix2(std::vector<cd>& a, bool inverse) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  // One table of exp(-+2 pi i k / n) for every stage (stage `len` reads every (n / len)-th entry).
  const double sign = inverse ? 1.0 : -1.0;
  std::vector<cd> w(n / 2);
  for (size_t k = 0; k < n / 2; ++k) {
    const double ang = sign * 2.0 * std::numbers::pi * static_cast<double>(k) / n;
    w[k] = cd(std::cos(ang), std::sin(ang));
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const size_t half = len / 2, step = n / len;
    for (size_t i = 0; i < n; i += len)
      for (size_t k = 0; k < half; ++k) {
        const cd u = a[i + k], v = mul(a[i + k + half], w[k * step]);
        a[i + k] = u + v;
        a[i + k + half] = u - v;
      }
  }
}

// X[k] = sum_t a[t] w^(kt) with w = exp(-+2 pi i / n), as a convolution with the chirp
// exp(+- pi i t^2 / n) through power-of-two FFTs (kt = (k^2 + t^2 - (k - t)^2) / 2).
void bluestein(std::vector<cd>& a, bool inverse) {
  const size_t n = a.size();
  size_t m = 1;
  while (m < 2 * n - 1) m <<= 1;
  const double sign = inverse ? 1.0 : -1.0;
  std::vector<cd> chirp(n);
  for (size_t t = 0; t < n; ++t) {
    // t^2 mod 2n keeps the angle small and exact.
    const uint64_t sq = (static_cast<uint64_t>(t) * t) % (2 * n);
    const double ang = sign * std::numbers::pi * static_cast<double>(sq) / n;
    chirp[t] = cd(std::cos(ang), std::sin(ang));
  }
  std::vector<cd> p(m), q(m);
  for (size_t t = 0; t < n; ++t) p[t] = mul(a[t], chirp[t]);
  q[0] = std::conj(chirp[0]);
  for (size_t t = 1; t < n; ++t) q[t] = q[m - t] = std::conj(chirp[t]);
  radix2(p, false);
  radix2(q, false);
  for (size_t i = 0; i < m; ++i) p[i] = mul(p[i], q[i]);
  radix2(p, true);
  for (size_t k = 0; k < n; ++k) a[k] = mul(p[k], chirp[k]) / static_cast<double>(m);
}

}  // namespace

void dft(std::vector<cd>& a, bool inverse) {
  const size_t n = a.size();
  if (n <= 1) return;
  if ((n & (n - 1)) == 0)
    radix2(a, inverse);
  else
    bluestein(a, inverse);
}

}  // namespace avdit::ops::cpu
