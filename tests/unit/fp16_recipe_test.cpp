// The fp16 recipe's ops on the CPU (the emulation CI runs): the row scaling is exact (bit-identical
// GEMM output wherever the unscaled product is finite) and rescues rows past fp16's range; the
// emulated fp16 split-K reduction overflows where the fp32 reduction does not; the zero-gate guard
// keeps 0 x inf out of the residual; the widened residual is added in fp32 while the norm output
// is rounded to fp16. References: float64 sums and the IEEE fp16 conversions of core/dtype.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "models/fp16_recipe.h"
#include "ops/context.h"
#include "ops/linear_f16.h"
#include "ops/modulation.h"

namespace avdit::ops {
namespace {

float r16(float v) { return f16_to_f32(f32_to_f16(v)); }

// An F32 tensor (of fp16-representable values unless !fp16_exact): each row's max |value| is
// row_max[r] (its first element), the others uniform in [2^-6, 1] of it with random signs (no fp16
// subnormal after a halving).
Tensor rows_with_max(const std::vector<float>& row_max, int64_t K, uint32_t seed,
                     bool fp16_exact = true) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(1.0f / 64, 1.0f);
  const auto M = static_cast<int64_t>(row_max.size());
  Tensor x = Tensor::empty({M, K}, DType::F32);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < K; ++c) {
      const float v = c == 0 ? row_max[r] : mag(rng) * row_max[r] * (rng() % 2 ? 1.f : -1.f);
      x.f32()[r * K + c] = fp16_exact ? r16(v) : v;
    }
  return x;
}

Tensor f16_weight(int64_t N, int64_t K, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  Tensor w = Tensor::empty({N, K}, DType::F32);
  for (int64_t i = 0; i < N * K; ++i) w.f32()[i] = d(rng);
  return w.to(DType::F16);
}

double ref_dot(const Tensor& x, const Tensor& w, int64_t r, int64_t n) {
  const int64_t K = x.size(1);
  const Tensor w32 = w.to_f32();
  double s = 0;
  for (int64_t c = 0; c < K; ++c)
    s += static_cast<double>(x.f32()[r * K + c]) * w32.f32()[n * K + c];
  return s;
}

TEST(Fp16Recipe, RowScaleExponent) {
  EXPECT_EQ(row_scale_exponent(0.0f), 0);
  EXPECT_EQ(row_scale_exponent(32768.0f), 0);
  EXPECT_EQ(row_scale_exponent(32769.0f), 1);
  EXPECT_EQ(row_scale_exponent(65504.0f), 1);
  EXPECT_EQ(row_scale_exponent(2.51e6f), 7);  // 2.51e6 / 128 = 19,609
  EXPECT_EQ(row_scale_exponent(std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(row_scale_exponent(std::numeric_limits<float>::quiet_NaN()), 0);
}

// Rows whose max is in (2^15, 65504] are finite unscaled and scaled by 1/2 under rowscale: the
// product must be the same bits. Rows within 2^15 are not touched.
TEST(Fp16Recipe, RowScaleIsBitExactWhereUnscaledIsFinite) {
  CpuContext ctx;
  const int64_t K = 96, N = 37;
  const Tensor x = rows_with_max({40000.f, 65504.f, 1.5f, 32768.f, 50000.f, 0.f}, K, 1);
  const Tensor w = f16_weight(N, K, 2, 0.05f);
  for (DType out : {DType::F32, DType::F16}) {
    Tensor a = ctx.empty({6, N}, out), b = ctx.empty({6, N}, out);
    linear_f16_into(ctx, x, w, a, {/*rowscale=*/true, true});
    linear_f16_into(ctx, x, w, b, {/*rowscale=*/false, true});
    const Tensor a32 = a.to_f32(), b32 = b.to_f32();
    int finite = 0;
    for (int64_t i = 0; i < 6 * N; ++i) {
      if (!std::isfinite(b32.f32()[i])) continue;
      ++finite;
      EXPECT_EQ(a32.f32()[i], b32.f32()[i]) << dtype_name(out) << " element " << i;
    }
    EXPECT_GT(finite, 6 * N / 2);
  }
}

// Rows past 65,504 (the seed's 2.51e6): without rowscale the fp16 cast is infinite; with it the
// result is the float64 product within fp16's input rounding.
TEST(Fp16Recipe, RowScaleRescuesRowsPastTheRange) {
  CpuContext ctx;
  const int64_t K = 64, N = 9;
  const Tensor x = rows_with_max({2.51e6f, 110154.f, 3.0f}, K, 3, /*fp16_exact=*/false);
  const Tensor w = f16_weight(N, K, 4, 0.1f);
  Tensor on = ctx.empty({3, N}, DType::F32), off = ctx.empty({3, N}, DType::F32);
  linear_f16_into(ctx, x, w, on, {true, true});
  linear_f16_into(ctx, x, w, off, {false, true});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t n = 0; n < N; ++n) {
      const double want = ref_dot(x, w, r, n);
      double scale = 0;
      for (int64_t c = 0; c < K; ++c)
        scale += std::fabs(x.f32()[r * K + c]) * std::fabs(w.to_f32().f32()[n * K + c]);
      EXPECT_NEAR(on.f32()[r * N + n], want, 2e-3 * scale) << r << "," << n;
      if (r < 2) {
        EXPECT_FALSE(std::isfinite(off.f32()[r * N + n]))
            << "row " << r << " should overflow unscaled";
      }
    }
}

// Parts of +61,440 and -61,440: every part is finite in fp16 and the whole sum is 0, but the
// running fp16 sum of the first two parts is 122,880 > 65,504.
TEST(Fp16Recipe, Fp16SplitKReductionOverflowsWhereFp32DoesNot) {
  CpuContext ctx;
  const int64_t K = 4 * 1024;
  Tensor x = Tensor::empty({1, K}, DType::F32);
  Tensor w = Tensor::empty({1, K}, DType::F32);
  for (int64_t c = 0; c < K; ++c) {
    x.f32()[c] = 1.0f;
    w.f32()[c] = c < K / 2 ? 60.0f : -60.0f;
  }
  const Tensor w16 = w.to(DType::F16);
  Tensor fixed = ctx.empty({1, 1}, DType::F16), reduced = ctx.empty({1, 1}, DType::F16);
  linear_f16_into(ctx, x, w16, fixed, {true, /*reduction=*/true});
  linear_f16_into(ctx, x, w16, reduced, {true, /*reduction=*/false});
  EXPECT_EQ(fixed.to_f32().f32()[0], 0.0f);
  EXPECT_FALSE(std::isfinite(reduced.to_f32().f32()[0]));
}

// A zero gate times an infinite branch: NaN in the residual without the guard, nothing added with
// it.
TEST(Fp16Recipe, ZeroGateGuard) {
  CpuContext ctx;
  const int64_t S = 2, H = 4;
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x0 = Tensor::from_floats({1, 2, 3, 4, 5, 6, 7, 8}, {S, H});
  Tensor f = Tensor::from_floats({inf, 1, 1, 1, 2, 2, 2, 2}, {S, H}).to(DType::F16);
  Tensor table = Tensor::from_floats({0, 0.5f, 0.5f, 0.5f, 1, 1, 1, 1}, {2, H}).to(DType::F16);
  Tensor row = Tensor::empty({S}, DType::I32);
  row.data<int32_t>()[0] = 0, row.data<int32_t>()[1] = 1;
  for (bool guard : {false, true}) {
    Tensor x = x0.to(DType::F16);
    ResidualNormModulate a;
    a.f = &f, a.gate = {table, 0}, a.row = &row, a.zero_gate_guard = guard;
    residual_norm_modulate(ctx, x, a, nullptr);
    const Tensor got = x.to_f32();
    EXPECT_EQ(std::isnan(got.f32()[0]), !guard);
    if (guard) {
      EXPECT_EQ(got.f32()[0], 1.0f);
    }
    EXPECT_EQ(got.f32()[1], r16(2 + 0.5f));
    EXPECT_EQ(got.f32()[4], 7.0f);
  }
}

// The widened residual: x F32 beside F16 activations. x + g f is fp32 (no fp16 rounding, values
// past 65,504 kept); the norm output is rounded to fp16 at the reference's points (float64 check).
TEST(Fp16Recipe, WidenedResidualAddsInFp32AndRoundsTheNormToFp16) {
  CpuContext ctx;
  const int64_t S = 1, H = 8;
  std::vector<float> xv(H), fv(H), gv(H), wv(H);
  for (int64_t c = 0; c < H; ++c) {
    xv[c] = 97307.0f + 1000.3f * c;  // past fp16's range, as H3's block-0 residual
    fv[c] = r16(0.1f * c + 0.013f);
    gv[c] = r16(0.75f - 0.05f * c);
    wv[c] = r16(1.0f + 0.01f * c);
  }
  Tensor x = Tensor::from_floats(xv, {S, H});
  const Tensor f = Tensor::from_floats(fv, {S, H});  // the branch shares x's dtype (F32)
  const Tensor table = Tensor::from_floats(gv, {1, H}).to(DType::F16);
  const Tensor w = Tensor::from_floats(wv, {H}).to(DType::F16);
  Tensor row = Tensor::empty({S}, DType::I32);
  row.data<int32_t>()[0] = 0;
  Tensor out = ctx.empty({S, H}, DType::F16);
  ResidualNormModulate a;
  a.f = &f, a.gate = {table, 0}, a.row = &row, a.w = w, a.eps = 1e-5f, a.act = DType::F16;
  residual_norm_modulate(ctx, x, a, &out);
  double ss = 0;
  std::vector<float> want_x(H);
  for (int64_t c = 0; c < H; ++c) {
    volatile float product = gv[c] * fv[c];  // fp32 arithmetic, as the op's (no fused multiply-add)
    want_x[c] = xv[c] + product;
    EXPECT_EQ(x.f32()[c], want_x[c]) << c;
    ss += static_cast<double>(want_x[c]) * want_x[c];
  }
  const double inv = 1.0 / std::sqrt(ss / H + 1e-5);
  const Tensor o = out.to_f32();
  for (int64_t c = 0; c < H; ++c) {
    const double want = want_x[c] * inv * wv[c];
    EXPECT_NEAR(o.f32()[c], want, std::fabs(want) * 1e-3) << c;  // one fp16 rounding
    EXPECT_EQ(o.f32()[c], r16(o.f32()[c])) << "rounded to fp16";
  }
}

TEST(Fp16Recipe, FixListParsing) {
  using models::Fp16Fixes;
  EXPECT_EQ(models::parse_fp16_fixes("all"), Fp16Fixes{});
  EXPECT_EQ(models::parse_fp16_fixes("none"), Fp16Fixes::none());
  const Fp16Fixes f = models::parse_fp16_fixes("gating,rowscale");
  EXPECT_TRUE(f.gating && f.rowscale);
  EXPECT_FALSE(f.residual || f.reduction || f.gate);
  EXPECT_EQ(models::fp16_fixes_str(f), "rowscale,gating");
  EXPECT_THROW(models::parse_fp16_fixes("residual,bogus"), BadInput);
  EXPECT_THROW(models::parse_fp16_fixes(""), BadInput);
}

}  // namespace
}  // namespace avdit::ops
