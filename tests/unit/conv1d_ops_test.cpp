// The audio decoders' ops on the CPU against float64 computations written from their definitions,
// at odd sizes: conv1d (stride, padding, dilation, groups), conv1d_transpose, snake_beta, the
// alias-free SnakeBeta, resample_fft (shrinking and growing, odd and even lengths) and
// conv1d_affine; and the same bits from two runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <numbers>
#include <random>
#include <vector>

#include "ops/context.h"
#include "ops/conv1d.h"
#include "ops/conv1d_affine.h"
#include "ops/conv1d_alias_free.h"
#include "ops/conv1d_transpose.h"
#include "ops/resample_fft.h"
#include "ops/snake_beta.h"

namespace avdit::ops {
namespace {

Tensor random(Shape shape, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  Tensor t = Tensor::empty(shape, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = n(rng);
  return t;
}

// max |got - want| / max |want|.
double rel(const Tensor& got, const std::vector<double>& want) {
  EXPECT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  double d = 0, r = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d = std::max(d, std::fabs(got.f32()[i] - want[i]));
    r = std::max(r, std::fabs(want[i]));
  }
  return r > 0 ? d / r : d;
}

struct ConvCase {
  int64_t B, Cin, Cout, L, K;
  Conv1dParams p;
};

TEST(Conv1dOps, Conv1dMatchesFloat64) {
  CpuContext ctx;
  const ConvCase cases[] = {
      {1, 3, 5, 17, 7, {.padding = 3}},
      {2, 6, 4, 31, 3, {.stride = 2, .padding = 2, .dilation = 3, .groups = 2}},
      {1, 5, 7, 4099, 1, {}},  // pointwise, longer than one GEMM span
      {3, 4, 4, 2051, 11, {.padding = 25, .dilation = 5, .groups = 4}},
      {1, 7, 3, 9, 10, {.stride = 3, .padding = 1}},
  };
  uint32_t seed = 1;
  for (const ConvCase& c : cases) {
    const Tensor x = random({c.B, c.Cin, c.L}, seed++);
    const Tensor w = random({c.Cout, c.Cin / c.p.groups, c.K}, seed++);
    const Tensor b = random({c.Cout}, seed++);
    const Tensor y = conv1d(ctx, x, w, &b, c.p);
    const int64_t Lout = conv1d_out_length(c.L, c.K, c.p), Cg = c.Cin / c.p.groups,
                  Og = c.Cout / c.p.groups;
    ASSERT_EQ(y.shape(), (Shape{c.B, c.Cout, Lout}));
    std::vector<double> want;
    for (int64_t n = 0; n < c.B; ++n)
      for (int64_t o = 0; o < c.Cout; ++o)
        for (int64_t t = 0; t < Lout; ++t) {
          double acc = b.f32()[o];
          const int64_t g = o / Og;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t k = 0; k < c.K; ++k) {
              const int64_t s = t * c.p.stride - c.p.padding + k * c.p.dilation;
              if (s < 0 || s >= c.L) continue;
              acc += double(x.f32()[(n * c.Cin + g * Cg + ci) * c.L + s]) *
                     w.f32()[(o * Cg + ci) * c.K + k];
            }
          want.push_back(acc);
        }
    EXPECT_LE(rel(y, want), 1e-5) << "L " << c.L << " K " << c.K;
    const Tensor again = conv1d(ctx, x, w, &b, c.p);
    EXPECT_EQ(0, std::memcmp(y.raw(), again.raw(), y.nbytes()));
  }
}

TEST(Conv1dOps, Conv1dTransposeMatchesFloat64) {
  CpuContext ctx;
  struct Case {
    int64_t B, Cin, Cout, L, K, stride, padding;
  };
  const Case cases[] = {{1, 3, 5, 13, 16, 8, 4},
                        {2, 4, 3, 7, 9, 5, 2},
                        {1, 5, 2, 1500, 4, 2, 1},
                        {1, 2, 3, 5, 3, 1, 0},
                        {3, 3, 3, 11, 6, 3, 2}};
  uint32_t seed = 100;
  for (const Case& c : cases) {
    const Tensor x = random({c.B, c.Cin, c.L}, seed++);
    const Tensor w = random({c.Cin, c.Cout, c.K}, seed++);
    const Tensor b = random({c.Cout}, seed++);
    const Conv1dTransposeParams p{.stride = c.stride, .padding = c.padding};
    const Tensor y = conv1d_transpose(ctx, x, w, &b, p);
    const int64_t Lout = (c.L - 1) * c.stride - 2 * c.padding + c.K;
    ASSERT_EQ(y.shape(), (Shape{c.B, c.Cout, Lout}));
    std::vector<double> want(static_cast<size_t>(c.B * c.Cout * Lout));
    for (int64_t n = 0; n < c.B; ++n)
      for (int64_t o = 0; o < c.Cout; ++o) {
        for (int64_t t = 0; t < Lout; ++t) want[(n * c.Cout + o) * Lout + t] = b.f32()[o];
        for (int64_t ci = 0; ci < c.Cin; ++ci)
          for (int64_t i = 0; i < c.L; ++i)
            for (int64_t k = 0; k < c.K; ++k) {
              const int64_t t = i * c.stride + k - c.padding;
              if (t >= 0 && t < Lout)
                want[(n * c.Cout + o) * Lout + t] += double(x.f32()[(n * c.Cin + ci) * c.L + i]) *
                                                     w.f32()[(ci * c.Cout + o) * c.K + k];
            }
      }
    EXPECT_LE(rel(y, want), 1e-5) << "L " << c.L << " K " << c.K << " stride " << c.stride;
  }
}

TEST(Conv1dOps, SnakeBetaMatchesFloat64) {
  CpuContext ctx;
  const Tensor x = random({2, 5, 37}, 7, 2.0f), a = random({5}, 8, 0.3f), b = random({5}, 9, 0.3f);
  const Tensor y = snake_beta(ctx, x, a, b);
  std::vector<double> want;
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t t = 0; t < 37; ++t) {
      const double v = x.f32()[r * 37 + t], s = std::sin(v * std::exp(double(a.f32()[r % 5])));
      want.push_back(v + 1.0 / (std::exp(double(b.f32()[r % 5])) + 1e-9) * s * s);
    }
  EXPECT_LE(rel(y, want), 2e-6);
}

// Activation1d written out in float64 from its definition: replicate pad, zero-stuffed transposed
// conv times ratio, crop, SnakeBeta, replicate pad, strided conv.
std::vector<double> alias_free_f64(const Tensor& x, const Tensor& up, const Tensor& down,
                                   const Tensor& a, const Tensor& b, int64_t r) {
  const int64_t C = x.size(1), L = x.size(2), Ku = up.numel(), Kd = down.numel();
  const int64_t pad = Ku / r - 1, crop_l = pad * r + (Ku - r) / 2,
                crop_r = pad * r + (Ku - r + 1) / 2;
  const int64_t pl = Kd / 2 - (Kd % 2 == 0), pr = Kd / 2;
  std::vector<double> out;
  for (int64_t row = 0; row < x.size(0) * C; ++row) {
    std::vector<double> xp;
    for (int64_t i = -pad; i < L + pad; ++i)
      xp.push_back(x.f32()[row * L + std::clamp<int64_t>(i, 0, L - 1)]);
    std::vector<double> full((xp.size() - 1) * r + Ku, 0.0);
    for (size_t i = 0; i < xp.size(); ++i)
      for (int64_t k = 0; k < Ku; ++k) full[i * r + k] += r * xp[i] * up.f32()[k];
    std::vector<double> h(full.begin() + crop_l, full.end() - crop_r);
    EXPECT_EQ(static_cast<int64_t>(h.size()), L * r);
    const double al = std::exp(double(a.f32()[row % C])), be = std::exp(double(b.f32()[row % C]));
    for (double& v : h) v = v + 1.0 / (be + 1e-9) * std::pow(std::sin(v * al), 2);
    std::vector<double> hp;
    for (int64_t i = -pl; i < L * r + pr; ++i)
      hp.push_back(h[std::clamp<int64_t>(i, 0, L * r - 1)]);
    for (int64_t j = 0; j < L; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < Kd; ++k) acc += hp[j * r + k] * down.f32()[k];
      out.push_back(acc);
    }
  }
  return out;
}

TEST(Conv1dOps, AliasFreeSnakeMatchesFloat64) {
  CpuContext ctx;
  struct Case {
    int64_t B, C, L, Ku, Kd, r;
  };
  // BigVGAN's 12-tap ratio-2 filters, and odd lengths and ratios the formula also covers.
  const Case cases[] = {{2, 3, 19, 12, 12, 2}, {1, 4, 1, 12, 12, 2}, {1, 2, 23, 9, 7, 3}};
  uint32_t seed = 200;
  for (const Case& c : cases) {
    const Tensor x = random({c.B, c.C, c.L}, seed++, 1.5f);
    const Tensor up = random({1, 1, c.Ku}, seed++, 0.3f), down = random({1, 1, c.Kd}, seed++, 0.3f);
    const Tensor a = random({c.C}, seed++, 0.2f), b = random({c.C}, seed++, 0.2f);
    const Tensor y = conv1d_alias_free_snake(ctx, x, up, down, a, b, c.r);
    EXPECT_LE(rel(y, alias_free_f64(x, up, down, a, b, c.r)), 1e-5) << "L " << c.L;
  }
}

// scipy.signal.resample from its definition, by direct DFTs in float64.
std::vector<double> resample_f64(const float* x, int64_t n, int64_t m) {
  using cd = std::complex<double>;
  std::vector<cd> X(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k)
    for (int64_t t = 0; t < n; ++t)
      X[k] += double(x[t]) * std::polar(1.0, -2 * std::numbers::pi * double(k * t % n) / n);
  const int64_t N = std::min(n, m);
  std::vector<cd> Y(static_cast<size_t>(m / 2 + 1));
  for (int64_t k = 0; k < N / 2 + 1 && k <= m / 2; ++k) Y[k] = X[k];
  if (N % 2 == 0 && m != n) Y[N / 2] *= m < n ? 2.0 : 0.5;
  std::vector<double> y(static_cast<size_t>(m));
  for (int64_t t = 0; t < m; ++t) {
    double acc = Y[0].real();
    for (int64_t k = 1; k <= m / 2; ++k) {
      const cd e = std::polar(1.0, 2 * std::numbers::pi * double(k * t % m) / m);
      acc += (m % 2 == 0 && k == m / 2) ? Y[k].real() * e.real() : 2 * (Y[k] * e).real();
    }
    y[t] = acc / m * double(m) / n;
  }
  return y;
}

TEST(Conv1dOps, ResampleFftMatchesFloat64) {
  CpuContext ctx;
  const int64_t sizes[][2] = {{512, 441}, {1024, 882}, {97, 60}, {60, 97},
                              {101, 57},  {64, 64},    {33, 48}};
  uint32_t seed = 300;
  for (const auto& s : sizes) {
    const Tensor x = random({2, s[0]}, seed++);
    const Tensor y = resample_fft(ctx, x, s[1]);
    ASSERT_EQ(y.shape(), (Shape{2, s[1]}));
    std::vector<double> want = resample_f64(x.f32(), s[0], s[1]);
    const std::vector<double> row1 = resample_f64(x.f32() + s[0], s[0], s[1]);
    want.insert(want.end(), row1.begin(), row1.end());
    EXPECT_LE(rel(y, want), 1e-6) << s[0] << " -> " << s[1];
  }
}

TEST(Conv1dOps, AffineScalesShiftsAndClamps) {
  CpuContext ctx;
  const Tensor x = random({2, 3, 5}, 400, 2.0f), s = random({3}, 401), b = random({3}, 402);
  const Tensor y = conv1d_affine(ctx, x, s, &b, -1.0f, 1.5f);
  std::vector<double> want;
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t t = 0; t < 5; ++t)
      want.push_back(
          std::clamp(double(x.f32()[r * 5 + t]) * s.f32()[r % 3] + b.f32()[r % 3], -1.0, 1.5));
  EXPECT_LE(rel(y, want), 1e-6);
}

}  // namespace
}  // namespace avdit::ops
