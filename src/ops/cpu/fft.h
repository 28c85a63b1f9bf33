// Complex discrete Fourier transforms of any length in float64, for the CPU ops that need a
// spectrum (resample_fft): radix-2 for powers of two, Bluestein's chirp-z through a power of two
// otherwise. Sequential and deterministic.
#pragma once

#include <complex>
#include <vector>

namespace avdit::ops::cpu {

// In place: X[k] = sum_t a[t] exp(-+2 pi i k t / n) (minus forward, plus inverse), unscaled.
void dft(std::vector<std::complex<double>>& a, bool inverse);

}  // namespace avdit::ops::cpu
