// Decoded-clip metrics of `avdit score e2e` (see media_metrics.h), in float64.
#include "score/media_metrics.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "core/error.h"
#include "ops/cpu/fft.h"

namespace avdit::score {

namespace {

void require_frames(const Tensor& a, const Tensor& b) {
  AVDIT_REQUIRE(a.ndim() == 4 && a.size(1) == 3 && a.shape() == b.shape(),
                "score: frames {} and {}: expected two [T, 3, H, W] clips of one shape",
                a.shape_str(), b.shape_str());
}

double unit(float v) { return std::clamp((static_cast<double>(v) + 1.0) * 0.5, 0.0, 1.0); }

// Luma planes [T][H * W] in [0, 1].
std::vector<std::vector<double>> luma(const Tensor& frames_in) {
  const Tensor f = frames_in.to_f32();
  const int64_t T = f.size(0), HW = f.size(2) * f.size(3);
  std::vector<std::vector<double>> out(static_cast<size_t>(T),
                                       std::vector<double>(static_cast<size_t>(HW)));
  for (int64_t t = 0; t < T; ++t) {
    const float* p = f.f32() + t * 3 * HW;
    for (int64_t i = 0; i < HW; ++i)
      out[t][i] = 0.299 * unit(p[i]) + 0.587 * unit(p[HW + i]) + 0.114 * unit(p[2 * HW + i]);
  }
  return out;
}

// Separable 'valid' Gaussian filtering of an H x W plane with a normalised 1-D window.
std::vector<double> filter_valid(const std::vector<double>& x, int64_t H, int64_t W,
                                 const std::vector<double>& g) {
  const int64_t n = static_cast<int64_t>(g.size()), Ho = H - n + 1, Wo = W - n + 1;
  std::vector<double> rows(static_cast<size_t>(H * Wo));
  for (int64_t y = 0; y < H; ++y)
    for (int64_t xo = 0; xo < Wo; ++xo) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += g[k] * x[y * W + xo + k];
      rows[y * Wo + xo] = s;
    }
  std::vector<double> out(static_cast<size_t>(Ho * Wo));
  for (int64_t yo = 0; yo < Ho; ++yo)
    for (int64_t xo = 0; xo < Wo; ++xo) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += g[k] * rows[(yo + k) * Wo + xo];
      out[yo * Wo + xo] = s;
    }
  return out;
}

double hz_to_mel(double f) {  // Slaney: linear below 1 kHz, logarithmic above
  constexpr double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  return f >= min_log_hz ? min_log_mel + std::log(f / min_log_hz) / logstep : f / f_sp;
}

double mel_to_hz(double m) {
  constexpr double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  return m >= min_log_mel ? min_log_hz * std::exp(logstep * (m - min_log_mel)) : f_sp * m;
}

}  // namespace

double frame_psnr_db(const Tensor& a_in, const Tensor& b_in) {
  require_frames(a_in, b_in);
  const Tensor a = a_in.to_f32(), b = b_in.to_f32();
  const int64_t T = a.size(0), n = a.numel() / std::max<int64_t>(T, 1);
  double sum = 0;
  int differ = 0;
  for (int64_t t = 0; t < T; ++t) {
    double se = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = unit(a.f32()[t * n + i]) - unit(b.f32()[t * n + i]);
      se += d * d;
    }
    if (se == 0) continue;
    sum += 10.0 * std::log10(1.0 / (se / double(n)));
    ++differ;
  }
  return differ ? sum / differ : std::numeric_limits<double>::infinity();
}

double ssim_luma(const Tensor& a_in, const Tensor& b_in) {
  require_frames(a_in, b_in);
  const int64_t H = a_in.size(2), W = a_in.size(3);
  int64_t n = 11;
  while (n > std::min(H, W)) n -= 2;
  n = std::max<int64_t>(n, 1);
  std::vector<double> g(static_cast<size_t>(n));
  double gs = 0;
  for (int64_t k = 0; k < n; ++k)
    gs += g[k] = std::exp(-std::pow(double(k - (n - 1) / 2), 2) / (2 * 1.5 * 1.5));
  for (double& v : g) v /= gs;
  constexpr double C1 = (0.01 * 1.0) * (0.01 * 1.0), C2 = (0.03 * 1.0) * (0.03 * 1.0);
  const auto A = luma(a_in), B = luma(b_in);
  double total = 0;
  for (size_t t = 0; t < A.size(); ++t) {
    std::vector<double> aa(A[t].size()), bb(A[t].size()), ab(A[t].size());
    for (size_t i = 0; i < A[t].size(); ++i)
      aa[i] = A[t][i] * A[t][i], bb[i] = B[t][i] * B[t][i], ab[i] = A[t][i] * B[t][i];
    const auto ma = filter_valid(A[t], H, W, g), mb = filter_valid(B[t], H, W, g);
    const auto saa = filter_valid(aa, H, W, g), sbb = filter_valid(bb, H, W, g),
               sab = filter_valid(ab, H, W, g);
    double s = 0;
    for (size_t i = 0; i < ma.size(); ++i) {
      const double va = saa[i] - ma[i] * ma[i], vb = sbb[i] - mb[i] * mb[i],
                   cov = sab[i] - ma[i] * mb[i];
      s += ((2 * ma[i] * mb[i] + C1) * (2 * cov + C2)) /
           ((ma[i] * ma[i] + mb[i] * mb[i] + C1) * (va + vb + C2));
    }
    total += s / double(ma.size());
  }
  return A.empty() ? std::numeric_limits<double>::quiet_NaN() : total / double(A.size());
}

std::vector<double> mel_filters(double sr, int n_fft, int n_mels, double fmin, double fmax) {
  const int bins = n_fft / 2 + 1;
  std::vector<double> mel_f(static_cast<size_t>(n_mels + 2));
  const double lo = hz_to_mel(fmin), hi = hz_to_mel(fmax);
  for (int i = 0; i < n_mels + 2; ++i)
    mel_f[i] = mel_to_hz(lo + (hi - lo) * i / double(n_mels + 1));
  std::vector<double> w(static_cast<size_t>(n_mels * bins), 0.0);
  for (int m = 0; m < n_mels; ++m) {
    const double enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
    for (int k = 0; k < bins; ++k) {
      const double f = sr / 2.0 * k / double(bins - 1);
      const double lower = (f - mel_f[m]) / (mel_f[m + 1] - mel_f[m]);
      const double upper = (mel_f[m + 2] - f) / (mel_f[m + 2] - mel_f[m + 1]);
      w[m * bins + k] = std::max(0.0, std::min(lower, upper)) * enorm;
    }
  }
  return w;
}

std::vector<double> log_mel(const float* x, int64_t samples, double sr, int window, int n_mels) {
  const int pad = window / 2, hop = window / 4, bins = window / 2 + 1;
  AVDIT_REQUIRE(samples > pad, "log-mel: {} samples are too few for a window of {}", samples,
                window);
  const int64_t frames = 1 + samples / hop;
  // Reflect padding (torch.stft(center=True, pad_mode="reflect")): x[-i] = x[i], x[n-1+i] =
  // x[n-1-i].
  auto at = [&](int64_t i) {
    if (i < 0) i = -i;
    if (i >= samples) i = 2 * (samples - 1) - i;
    return static_cast<double>(x[i]);
  };
  std::vector<double> hann(static_cast<size_t>(window));
  for (int i = 0; i < window; ++i)
    hann[i] = 0.5 - 0.5 * std::cos(2.0 * M_PI * i / window);  // periodic
  const std::vector<double> fb = mel_filters(sr, window, n_mels, 0.0, sr / 2.0);
  std::vector<double> out(static_cast<size_t>(n_mels * frames));
  std::vector<std::complex<double>> buf(static_cast<size_t>(window));
  std::vector<double> mag(static_cast<size_t>(bins));
  for (int64_t f = 0; f < frames; ++f) {
    for (int i = 0; i < window; ++i) buf[i] = {at(f * hop - pad + i) * hann[i], 0.0};
    ops::cpu::dft(buf, /*inverse=*/false);
    for (int k = 0; k < bins; ++k) mag[k] = std::abs(buf[k]);
    for (int m = 0; m < n_mels; ++m) {
      double s = 0;
      for (int k = 0; k < bins; ++k) s += fb[m * bins + k] * mag[k];
      out[m * frames + f] = std::log10(std::max(s, 1e-5));
    }
  }
  return out;
}

double multiscale_log_mel_l1(const Tensor& a_in, const Tensor& b_in, double sr, int* scales_used) {
  AVDIT_REQUIRE(a_in.ndim() == 2 && a_in.shape() == b_in.shape(),
                "score: waveforms {} and {}: expected two [channels, samples] of one shape",
                a_in.shape_str(), b_in.shape_str());
  const Tensor a = a_in.to_f32(), b = b_in.to_f32();
  const int64_t C = a.size(0), S = a.size(1);
  double total = 0;
  int used = 0;
  for (size_t s = 0; s < kMelWindows.size(); ++s) {
    if (kMelWindows[s] / 2 >= S) continue;
    double l1 = 0;
    int64_t count = 0;
    for (int64_t c = 0; c < C; ++c) {
      const auto ma = log_mel(a.f32() + c * S, S, sr, kMelWindows[s], kMelBands[s]);
      const auto mb = log_mel(b.f32() + c * S, S, sr, kMelWindows[s], kMelBands[s]);
      for (size_t i = 0; i < ma.size(); ++i) l1 += std::fabs(ma[i] - mb[i]);
      count += static_cast<int64_t>(ma.size());
    }
    total += l1 / double(count);
    ++used;
  }
  if (scales_used) *scales_used = used;
  return used ? total : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace avdit::score
