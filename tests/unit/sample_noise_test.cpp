// Seeded latent noise: deterministic, seed- and stream-dependent, and tied to the unpacked element
// index only (any reshape or sub-range gives the same numbers; a GPU fill computes the same values).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "sample/noise.h"

namespace avdit::sample {
namespace {

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

TEST(SampleNoise, DeterministicPerSeedAndStream) {
  const Shape shape{1, 48, 2, 4, 6};
  const Tensor a = make_noise(shape, 42, kVideoNoiseStream);
  EXPECT_EQ(a.shape(), shape);
  EXPECT_EQ(a.dtype(), DType::F32);
  EXPECT_TRUE(bit_equal(a, make_noise(shape, 42, kVideoNoiseStream)));
  EXPECT_FALSE(bit_equal(a, make_noise(shape, 43, kVideoNoiseStream)));
  EXPECT_FALSE(bit_equal(a, make_noise(shape, 42, kAudioNoiseStream)));
}

TEST(SampleNoise, LayoutIndependent) {
  const Tensor a = make_noise({1, 48, 2, 4, 6}, 7, kAudioNoiseStream);
  // Only the row-major index matters: another shape of the same size gives the same values,
  // a longer tensor starts with them, and each element is rng_normal(seed, stream, i).
  EXPECT_TRUE(bit_equal(a, make_noise({96, 24}, 7, kAudioNoiseStream)));
  const Tensor longer = make_noise({3000}, 7, kAudioNoiseStream);
  EXPECT_EQ(std::memcmp(a.raw(), longer.raw(), static_cast<size_t>(a.nbytes())), 0);
  for (int64_t i : {0, 1, 2, 777, 2303}) EXPECT_EQ(a.f32()[i], rng_normal(7, kAudioNoiseStream, i)) << i;
  // Odd sizes: the last element does not depend on whether its Box-Muller partner exists.
  const Tensor odd = make_noise({5}, 7, kAudioNoiseStream);
  EXPECT_EQ(odd.f32()[4], a.f32()[4]);
}

TEST(SampleNoise, LargeFillsAreChunkedWithoutChangingAValue) {
  // Above 2^20 elements the fill runs in chunks on threads: every value, at the chunk edges and at
  // the odd tail, is still rng_normal(seed, stream, i).
  const int64_t n = 3 * (int64_t{1} << 20) + 5;
  Tensor t = Tensor::empty({n}, DType::F32);
  fill_normal(t, 11, 5, 0.5f, 2.f);
  for (int64_t i : {int64_t{0}, int64_t{1}, (int64_t{1} << 20) - 1, int64_t{1} << 20,
                    (int64_t{1} << 21) + 1, n - 2, n - 1})
    EXPECT_EQ(t.f32()[i], 0.5f + 2.f * rng_normal(11, 5, static_cast<uint64_t>(i))) << i;
}

TEST(SampleNoise, LooksGaussian) {
  const Tensor a = make_noise({1 << 16}, 1, kVideoNoiseStream);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    sum += a.f32()[i];
    sq += static_cast<double>(a.f32()[i]) * a.f32()[i];
  }
  const double mean = sum / a.numel(), var = sq / a.numel() - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.02);
}

}  // namespace
}  // namespace avdit::sample
