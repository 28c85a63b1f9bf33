// range_stats on the CPU against a direct float64 computation: random tensors of odd shapes in F32,
// F16 and BF16 with inf and NaN planted at known rows (and fp16 overflow by rounding), the empty
// and 0-d cases, and the slot checks (a slot is written once).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/error.h"
#include "ops/context.h"
#include "ops/range_stats.h"

namespace avdit::ops {
namespace {

struct Want {
  double max_abs = 0;
  int64_t count = 0, first_row = -1;
};

// The answer from the stored values, in float64.
Want direct(const Tensor& x) {
  const Tensor v = x.to(DType::F64);
  const int64_t width = x.ndim() == 0 ? 1 : x.shape().back();
  Want w;
  for (int64_t i = 0; i < v.numel(); ++i) {
    const double d = v.data<double>()[i];
    if (std::isfinite(d)) {
      w.max_abs = std::max(w.max_abs, std::fabs(d));
    } else if (w.count++ == 0) {
      w.first_row = i / width;
    }
  }
  return w;
}

std::array<float, kRangeSlotWidth> run(const Tensor& x) {
  CpuContext ctx;
  Tensor slots = ctx.zeros({3, kRangeSlotWidth}, DType::F32);
  Tensor slot = slots.slice_rows(1, 2);
  range_stats(ctx, x, slot);
  std::array<float, kRangeSlotWidth> out{};
  for (int64_t i = 0; i < kRangeSlotWidth; ++i) out[i] = slots.f32()[kRangeSlotWidth + i];
  // The neighbouring slots are untouched.
  for (int64_t i = 0; i < kRangeSlotWidth; ++i) {
    EXPECT_EQ(slots.f32()[i], 0.f);
    EXPECT_EQ(slots.f32()[2 * kRangeSlotWidth + i], 0.f);
  }
  return out;
}

void expect_matches(const Tensor& x, const std::string& what) {
  const Want w = direct(x);
  const auto got = run(x);
  EXPECT_EQ(static_cast<double>(got[0]), w.max_abs) << what;
  EXPECT_EQ(static_cast<int64_t>(got[1]), w.count) << what;
  EXPECT_EQ(static_cast<int64_t>(got[2]), w.first_row) << what;
  for (int64_t i = 3; i < kRangeSlotWidth; ++i) EXPECT_EQ(got[i], 0.f) << what;
}

TEST(RangeStats, MatchesFloat64WithPlantedNonFinites) {
  std::mt19937 rng(37);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Shape& shape : std::vector<Shape>{{1}, {7}, {5, 3}, {33, 257}, {2, 9, 17}, {1025, 3}})
    for (const DType dt : {DType::F32, DType::F16, DType::BF16}) {
      Tensor x = Tensor::empty(shape, DType::F32);
      std::normal_distribution<float> d(0.f, 30.f);
      for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = d(rng);
      const std::string what = fmt::format("{} {}", x.shape_str(), dtype_name(dt));
      expect_matches(x.to(dt), what + " clean");
      // Plant at most three non-finites, the first at a known row, later ones after it.
      const int64_t width = shape.back(), rows = x.numel() / width;
      const int64_t row = rows / 2, first = row * width + width / 2;
      x.f32()[first] = nan;
      if (first + 1 < x.numel()) x.f32()[first + 1] = -inf;
      x.f32()[x.numel() - 1] = inf;
      const Tensor y = x.to(dt);
      const Want w = direct(y);
      EXPECT_EQ(w.first_row, row) << what;
      expect_matches(y, what + " planted");
    }
}

// Values beyond fp16's 65504 become inf when stored as F16: counted, not taken as the max.
TEST(RangeStats, Fp16OverflowIsNonFinite) {
  Tensor x = Tensor::empty({4, 5}, DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = static_cast<float>(i);
  x.f32()[2 * 5 + 1] = 70000.f;   // row 2: inf in fp16
  x.f32()[3 * 5 + 4] = -65504.f;  // the largest finite magnitude
  const auto got = run(x.to(DType::F16));
  EXPECT_EQ(got[0], 65504.f);
  EXPECT_EQ(got[1], 1.f);
  EXPECT_EQ(got[2], 2.f);
  const auto f32 = run(x);
  EXPECT_EQ(f32[0], 70000.f);
  EXPECT_EQ(f32[1], 0.f);
  EXPECT_EQ(f32[2], -1.f);
}

TEST(RangeStats, EmptyZeroDimAndAllNonFinite) {
  const auto empty = run(Tensor::empty({0, 8}, DType::BF16));
  EXPECT_EQ(empty[0], 0.f);
  EXPECT_EQ(empty[1], 0.f);
  EXPECT_EQ(empty[2], -1.f);
  Tensor scalar = Tensor::empty({}, DType::F32);
  scalar.f32()[0] = -3.5f;
  const auto s = run(scalar);
  EXPECT_EQ(s[0], 3.5f);
  EXPECT_EQ(s[2], -1.f);
  Tensor bad = Tensor::empty({3, 2}, DType::F32);
  for (int64_t i = 0; i < 6; ++i) bad.f32()[i] = std::numeric_limits<float>::quiet_NaN();
  const auto b = run(bad);
  EXPECT_EQ(b[0], 0.f);
  EXPECT_EQ(b[1], 6.f);
  EXPECT_EQ(b[2], 0.f);
}

TEST(RangeStats, ASlotIsWrittenOnceAndMustFit) {
  CpuContext ctx;
  const Tensor x = Tensor::zeros({2, 3}, DType::F32);
  Tensor slots = ctx.zeros({2, kRangeSlotWidth}, DType::F32);
  Tensor slot = slots.slice_rows(0, 1);
  Tensor y = Tensor::empty({2, 3}, DType::F32);
  for (int64_t i = 0; i < 6; ++i) y.f32()[i] = 1.f + static_cast<float>(i);
  range_stats(ctx, y, slot);
  EXPECT_THROW(range_stats(ctx, y, slot), RuntimeFailure);
  Tensor small = ctx.zeros({4}, DType::F32);
  EXPECT_THROW(range_stats(ctx, x, small), RuntimeFailure);
  Tensor ints = ctx.zeros({kRangeSlotWidth}, DType::F32);
  EXPECT_THROW(range_stats(ctx, Tensor::zeros({3}, DType::I32), ints), RuntimeFailure);
}

}  // namespace
}  // namespace avdit::ops
