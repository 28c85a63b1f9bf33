// Checked size arithmetic (core/checked.h) against 128-bit integer arithmetic, and the element and
// byte counts of shapes built on it (shape_numel, dtype_nbytes), which refuse instead of wrapping.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/tensor.h"

namespace avdit {
namespace {

using I128 = __int128;

std::vector<int64_t> edge_values() {
  std::vector<int64_t> v = {0,
                            1,
                            -1,
                            2,
                            3,
                            7,
                            64,
                            INT32_MAX,
                            int64_t{1} << 31,
                            int64_t{1} << 32,
                            (int64_t{1} << 53) + 1,
                            checked::kMaxElements,
                            checked::kMaxElements + 1,
                            INT64_MAX,
                            INT64_MAX - 1,
                            INT64_MIN,
                            INT64_MIN + 1};
  std::mt19937_64 gen(5);
  for (int i = 0; i < 200; ++i) v.push_back(static_cast<int64_t>(gen()) >> (gen() % 64));
  return v;
}

TEST(Checked, MulAndAddAgreeWith128BitArithmetic) {
  const auto vals = edge_values();
  for (int64_t a : vals)
    for (int64_t b : vals) {
      const I128 p = static_cast<I128>(a) * b, s = static_cast<I128>(a) + b;
      const bool p_fits = p >= INT64_MIN && p <= INT64_MAX,
                 s_fits = s >= INT64_MIN && s <= INT64_MAX;
      const auto m = checked::mul(a, b), ad = checked::add(a, b);
      ASSERT_EQ(m.has_value(), p_fits) << a << " * " << b;
      ASSERT_EQ(ad.has_value(), s_fits) << a << " + " << b;
      if (m) {
        ASSERT_EQ(static_cast<I128>(*m), p);
      }
      if (ad) {
        ASSERT_EQ(static_cast<I128>(*ad), s);
      }
    }
}

TEST(Checked, NumelRefusesWhatWouldWrapOrExceedTheLimit) {
  const auto vals = edge_values();
  for (int64_t a : vals)
    for (int64_t b : vals) {
      const auto n = checked::numel(std::vector<int64_t>{a, b, 3});
      I128 nonzero = 1;
      bool ok = true, empty = false;
      for (int64_t d : {a, b, int64_t{3}}) {
        ok = ok && d >= 0 && d <= checked::kMaxElements;
        if (!ok) break;
        if (d == 0) {
          empty = true;
        } else {
          nonzero *= d;
          ok = nonzero <= checked::kMaxElements;
        }
      }
      ASSERT_EQ(n.has_value(), ok) << a << ", " << b;
      if (n) {
        ASSERT_EQ(static_cast<I128>(*n), empty ? 0 : nonzero);
      }
    }
}

TEST(Checked, ZeroDimensionDoesNotExcuseAHugeOne) {
  EXPECT_FALSE(checked::numel(std::vector<int64_t>{0, INT64_MAX}).has_value());
  EXPECT_FALSE(
      checked::numel(std::vector<int64_t>{0, int64_t{1} << 40, int64_t{1} << 40}).has_value());
  EXPECT_EQ(checked::numel(std::vector<int64_t>{0, 5, 7}), 0);
  EXPECT_EQ(checked::numel(std::vector<int64_t>{}), 1);
}

TEST(Checked, BytesOfEveryWidth) {
  for (int bits : {4, 8, 16, 32, 64})
    for (int64_t n :
         {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1} << 40, checked::kMaxElements}) {
      const auto b = checked::nbytes(n, bits);
      ASSERT_TRUE(b.has_value());
      EXPECT_EQ(static_cast<I128>(*b), (static_cast<I128>(n) * bits + 7) / 8);
    }
  EXPECT_FALSE(checked::nbytes(checked::kMaxElements + 1, 8).has_value());
  EXPECT_FALSE(checked::nbytes(-1, 8).has_value());
}

TEST(Checked, ShapeNumelAndDtypeNbytesThrowBadInput) {
  // The wrap: [2^53 + 1, 64] F32 used to give 256 bytes.
  const Shape wrap = {(int64_t{1} << 53) + 1, 64};
  try {
    shape_numel(wrap);
    FAIL() << "expected BadInput";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("[9007199254740993, 64]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dtype_nbytes(DType::F32, checked::kMaxElements + 1), BadInput);
  EXPECT_EQ(dtype_nbytes(DType::E2M1, 3), 2);
  EXPECT_EQ(shape_numel({2, 0, 5}), 0);
  EXPECT_THROW(Tensor::empty({int64_t{1} << 30, int64_t{1} << 30}, DType::F32), BadInput);
}

}  // namespace
}  // namespace avdit
