// Random NVFP4 stacks (quant/nvfp4_random.h): the packed layout of quant/nvfp4.h, decoded weights
// of mean 0 and the asked standard deviation, every e2m1 code about equally often, the same bytes
// for the same seed, and bad shapes refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_random.h"

namespace avdit::quant {
namespace {

TEST(Nvfp4Random, LayoutAndStatistics) {
  const int64_t G = 3, K = 64, N = 40;
  const float sd = 0.02f;
  const Nvfp4Matrix m = random_nvfp4({G, K, N}, 7, sd);
  EXPECT_EQ(m.values.shape(), (Shape{G, N, K / 2}));
  EXPECT_EQ(m.values.dtype(), DType::U8);
  EXPECT_EQ(m.block_scales.shape(), (Shape{G, N, K / 16}));
  EXPECT_EQ(m.block_scales.dtype(), DType::F8_E4M3);
  EXPECT_EQ(m.global_scales.shape(), (Shape{G}));
  EXPECT_EQ(m.k(), K);
  EXPECT_EQ(m.n(), N);

  int64_t counts[16] = {};
  const uint8_t* v = m.values.data<uint8_t>();
  for (int64_t i = 0; i < m.values.numel(); ++i) {
    ++counts[v[i] & 0xF];
    ++counts[v[i] >> 4];
  }
  const double expected = 2.0 * static_cast<double>(m.values.numel()) / 16;
  for (int c = 0; c < 16; ++c)
    EXPECT_NEAR(counts[c], expected, 6 * std::sqrt(expected)) << "code " << c;

  const Tensor w = dequantize_nvfp4(m, DType::F32);
  ASSERT_EQ(w.shape(), (Shape{G, K, N}));
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(w.f32()[i]));
    sum += w.f32()[i];
    sq += static_cast<double>(w.f32()[i]) * w.f32()[i];
  }
  const double n = static_cast<double>(w.numel());
  EXPECT_NEAR(sum / n, 0.0, 0.05 * sd);
  EXPECT_NEAR(std::sqrt(sq / n), sd, 0.03 * sd);
}

TEST(Nvfp4Random, DeterministicInTheSeed) {
  const Nvfp4Matrix a = random_nvfp4({2, 32, 17}, 11, 1.f), b = random_nvfp4({2, 32, 17}, 11, 1.f);
  const Nvfp4Matrix c = random_nvfp4({2, 32, 17}, 12, 1.f);
  EXPECT_EQ(std::memcmp(a.values.raw(), b.values.raw(), a.values.nbytes()), 0);
  EXPECT_NE(std::memcmp(a.values.raw(), c.values.raw(), a.values.nbytes()), 0);
}

TEST(Nvfp4Random, BadShapesRefused) {
  EXPECT_THROW(random_nvfp4({2, 24, 8}, 1, 1.f), BadInput);  // K not a multiple of 16
  EXPECT_THROW(random_nvfp4({32, 8}, 1, 1.f), BadInput);     // not [G, K, N]
  EXPECT_THROW(random_nvfp4({1, 16, 8}, 1, 0.f), BadInput);
}

}  // namespace
}  // namespace avdit::quant
