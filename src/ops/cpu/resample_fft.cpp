// FFT resampling on the CPU (scipy.signal.resample on a real signal): rfft, keep the bins both
// lengths share, adjust the shared Nyquist bin as scipy does (x2 when shrinking: it stands for
// both +-n/2 of the source; x0.5 when growing: it is split between two bins), irfft to the new
// length, scale by n_out / n. In float64 throughout.
#include "ops/resample_fft.h"

#include <complex>
#include <vector>

#include "ops/cpu/common.h"
#include "ops/cpu/fft.h"

namespace avdit::ops::cpu {

void resample_fft(const Tensor& x_in, Tensor& y) {
  const Tensor x = f32(x_in);
  const int64_t rows = x.size(0), n = x.size(1), m = y.size(1);
  AVDIT_CHECK(y.ndim() == 2 && y.size(0) == rows, "resample_fft: output {} for {}", y.shape_str(),
              x.shape_str());
  std::vector<float> out(static_cast<size_t>(rows * m));
  const int64_t shared = std::min(n, m), nyq = shared / 2 + 1;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<std::complex<double>> a(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) a[t] = x.f32()[r * n + t];
    dft(a, false);
    // Y: the half spectrum of the output, bins [0, m/2].
    std::vector<std::complex<double>> Y(static_cast<size_t>(m / 2 + 1));
    for (int64_t k = 0; k < nyq && k <= m / 2; ++k) Y[k] = a[k];
    if (shared % 2 == 0 && m != n) Y[shared / 2] *= m < n ? 2.0 : 0.5;
    // irfft(Y, m): the Hermitian extension, with the imaginary parts of bin 0 (and of bin m/2
    // when m is even) dropped.
    std::vector<std::complex<double>> z(static_cast<size_t>(m));
    z[0] = Y[0].real();
    for (int64_t k = 1; k <= m / 2; ++k) {
      if (m % 2 == 0 && k == m / 2) {
        z[k] = Y[k].real();
        continue;
      }
      z[k] = Y[k];
      z[m - k] = std::conj(Y[k]);
    }
    dft(z, true);
    // irfft's 1 / m times scipy's m / n.
    for (int64_t t = 0; t < m; ++t) out[r * m + t] = static_cast<float>(z[t].real() / n);
  }
  store(y, out.data());
}

}  // namespace avdit::ops::cpu
