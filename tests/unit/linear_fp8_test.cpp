// The FP8 linear (ops/linear_fp8.h) on the CPU against its definition computed in float64 from
// the scalar e4m3 conversion (core/dtype.h): scales 448 / amax per tensor or per row, e4m3
// rounding of both operands, fp32 products unscaled; the quantization error it leaves against the
// exact product (e4m3 keeps 3 mantissa bits); what row scales save over a tensor scale when one
// row is far larger; an all-zero input; a weight quantized once and reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "ops/context.h"
#include "ops/linear_fp8.h"

namespace avdit::ops {
namespace {

Tensor random(Shape s, uint32_t seed, float std) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, std);
  Tensor t = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(rng);
  return t;
}

// The op's output against the definition in float64, for both scalings: x's scale per tensor or
// per row m, w's per tensor or per output channel n.
void check_definition(Fp8Scaling scaling) {
  CpuContext ctx;
  const int64_t M = 7, N = 5, K = 40;
  Tensor x = random({M, K}, 1, 3.f), w = random({N, K}, 2, 0.05f);
  for (int64_t k = 0; k < K; ++k)
    x.f32()[2 * K + k] *= 50.f, w.f32()[3 * K + k] *= 0.01f;  // wide rows
  const Fp8Weight q = quantize_fp8(ctx, w, scaling);
  const bool row = scaling == Fp8Scaling::Row;
  auto amax = [](const Tensor& t, int64_t r0, int64_t n) {
    double m = 0;
    for (int64_t i = r0; i < r0 + n; ++i) m = std::max(m, std::fabs(double(t.f32()[i])));
    return m;
  };
  ASSERT_EQ(q.scales.size(), static_cast<size_t>(row ? N : 1));
  const Tensor y = linear_fp8(ctx, x, q, DType::F32);
  double worst = 0, exact_err = 0, scale = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const float sx = static_cast<float>(448.0 / (row ? amax(x, m * K, K) : amax(x, 0, M * K)));
      const float sw = static_cast<float>(448.0 / (row ? amax(w, n * K, K) : amax(w, 0, N * K)));
      EXPECT_FLOAT_EQ(q.scales[row ? n : 0], sw);
      double ref = 0, exact = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double xv = x.f32()[m * K + k], wv = w.f32()[n * K + k];
        ref += double(e4m3_to_f32(f32_to_e4m3(float(xv) * sx))) *
               double(e4m3_to_f32(f32_to_e4m3(float(wv) * sw)));
        exact += xv * wv;
      }
      ref /= double(sx) * double(sw);
      const double mag = std::max(std::fabs(exact), 1e-30);
      worst = std::max(worst, std::fabs(y.f32()[m * N + n] - ref) / mag);
      exact_err = std::max(exact_err, std::fabs(y.f32()[m * N + n] - exact));
      scale = std::max(scale, std::fabs(exact));
    }
  EXPECT_LT(worst, 1e-5);
  // 3 mantissa bits: a few percent per element, less after the sum; and not nothing.
  EXPECT_LT(exact_err / scale, 0.1);
  EXPECT_GT(exact_err / scale, 1e-4);
}

TEST(LinearFp8, EqualsTheDefinitionInFloat64PerTensor) { check_definition(Fp8Scaling::Tensor); }
TEST(LinearFp8, EqualsTheDefinitionInFloat64PerRow) { check_definition(Fp8Scaling::Row); }

TEST(LinearFp8, RowScalesKeepSmallRowsThatATensorScaleLoses) {
  // One row 1e5 times the others: per tensor, the small rows fall into e4m3's subnormals (below
  // 2^-6 after scaling; e4m3 is floating point, so within its normal range a scale changes nothing).
  CpuContext ctx;
  Tensor x = random({4, 64}, 5, 1.f);
  for (int64_t k = 0; k < 64; ++k) x.f32()[k] *= 1e5f;
  const Tensor w = random({6, 64}, 6, 1.f);
  auto err_small_rows = [&](Fp8Scaling s) {
    const Tensor y = linear_fp8(ctx, x, quantize_fp8(ctx, w, s), DType::F32);
    double e = 0, mag = 0;
    for (int64_t m = 1; m < 4; ++m)
      for (int64_t n = 0; n < 6; ++n) {
        double exact = 0;
        for (int64_t k = 0; k < 64; ++k) exact += double(x.f32()[m * 64 + k]) * w.f32()[n * 64 + k];
        e = std::max(e, std::fabs(y.f32()[m * 6 + n] - exact));
        mag = std::max(mag, std::fabs(exact));
      }
    return e / mag;
  };
  EXPECT_LT(err_small_rows(Fp8Scaling::Row), 0.1);
  EXPECT_GT(err_small_rows(Fp8Scaling::Tensor), 3 * err_small_rows(Fp8Scaling::Row));
}

TEST(LinearFp8, ZeroInputAndReusedWeight) {
  CpuContext ctx;
  const Tensor w = random({3, 16}, 3, 1.f);
  const Fp8Weight q = quantize_fp8(ctx, w, Fp8Scaling::Row);
  const Tensor y0 = linear_fp8(ctx, Tensor::zeros({2, 16}, DType::F32), q, DType::F32);
  for (int64_t i = 0; i < y0.numel(); ++i) EXPECT_EQ(y0.f32()[i], 0.f);
  const Tensor x = random({4, 16}, 4, 1.f);
  const Tensor a = linear_fp8(ctx, x, q, DType::BF16), b = linear_fp8(ctx, x, q, DType::BF16);
  EXPECT_EQ(a.shape(), (Shape{4, 3}));
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())), 0);
}

}  // namespace
}  // namespace avdit::ops
