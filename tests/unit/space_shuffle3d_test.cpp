// ops::channels_to_space3d, space_to_channels_mean3d and relu on the CPU against float64 loops
// over their definitions at odd sizes: the Wan2.2 VAE's DupUp3D (repeat + spread), time_conv frame
// interleave and nearest x2 upsampling, AvgDown3D's grouped mean, and relu's NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/rng.h"
#include "ops/context.h"
#include "ops/relu.h"
#include "ops/space_shuffle3d.h"

namespace avdit::ops {
namespace {

Tensor randn(Shape shape, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  fill_normal(t, 11, stream);
  return t;
}

void check_to_space(Shape xs, const ChannelsToSpace& s, uint64_t stream) {
  CpuContext ctx;
  const Tensor x = randn(xs, stream);
  const Tensor y = channels_to_space3d(ctx, x, s);
  const int64_t T = xs[0], H = xs[1], W = xs[2], C = xs[3];
  ASSERT_EQ(y.shape(), (Shape{T * s.ft, H * s.fs, W * s.fs, s.out_channels}));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        for (int64_t a = 0; a < s.ft; ++a)
          for (int64_t i = 0; i < s.fs; ++i)
            for (int64_t j = 0; j < s.fs; ++j)
              for (int64_t o = 0; o < s.out_channels; ++o) {
                const int64_t c = (o * s.so + a * s.sa + i * s.si + j * s.sj) / s.div;
                const float want = x.f32()[((t * H + h) * W + w) * C + c];
                const float got =
                    y.f32()[(((t * s.ft + a) * H * s.fs + h * s.fs + i) * W * s.fs + w * s.fs + j) *
                                s.out_channels +
                            o];
                ASSERT_EQ(got, want) << t << " " << h << " " << w << " " << o;
              }
}

TEST(SpaceShuffle3d, DupUpSpreadsRepeatedChannels) {
  // DupUp3D(6 -> 3, f_t 2, f_s 2): 3 * 8 / 6 = 4 repeats.
  check_to_space({3, 5, 7, 6}, {2, 2, 3, 8, 4, 2, 1, 4}, 1);
  // f_t 1 (upsample2d stages): 5 -> 5 with 4 repeats.
  check_to_space({2, 3, 5, 5}, {1, 2, 5, 4, 4, 2, 1, 4}, 2);
}

TEST(SpaceShuffle3d, TimeInterleaveAndNearestUpsample) {
  check_to_space({3, 5, 7, 2 * 9}, {2, 1, 9, 1, 9, 0, 0, 1}, 3);
  CpuContext ctx;
  const Tensor x = randn({2, 3, 5, 7}, 4);
  const Tensor y = upsample_nearest2x(ctx, x);
  ASSERT_EQ(y.shape(), (Shape{2, 6, 10, 7}));
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t h = 0; h < 6; ++h)
      for (int64_t w = 0; w < 10; ++w)
        for (int64_t c = 0; c < 7; ++c)
          ASSERT_EQ(y.f32()[((t * 6 + h) * 10 + w) * 7 + c],
                    x.f32()[((t * 3 + h / 2) * 5 + w / 2) * 7 + c]);
}

TEST(SpaceShuffle3d, GroupedMeanIsAvgDown) {
  CpuContext ctx;
  for (const auto& [xs, s] : {std::pair{Shape{4, 6, 10, 5}, SpaceToChannelsMean{2, 2, 10}},
                              std::pair{Shape{3, 6, 4, 3}, SpaceToChannelsMean{1, 2, 3}},
                              std::pair{Shape{3, 5, 7, 9}, SpaceToChannelsMean{1, 1, 9}}}) {
    const Tensor x = randn(xs, 5);
    const Tensor y = space_to_channels_mean3d(ctx, x, s);
    const int64_t F = s.ft * s.fs * s.fs, C = xs[3], g = C * F / s.out_channels;
    const int64_t To = xs[0] / s.ft, Ho = xs[1] / s.fs, Wo = xs[2] / s.fs;
    ASSERT_EQ(y.shape(), (Shape{To, Ho, Wo, s.out_channels}));
    for (int64_t v = 0; v < To * Ho * Wo; ++v)
      for (int64_t o = 0; o < s.out_channels; ++o) {
        const int64_t t = v / (Ho * Wo), h = (v / Wo) % Ho, w = v % Wo;
        double sum = 0;
        for (int64_t k = 0; k < g; ++k) {
          const int64_t flat = o * g + k, c = flat / F, r = flat % F;
          const int64_t a = r / (s.fs * s.fs), i = (r / s.fs) % s.fs, j = r % s.fs;
          sum += x.f32()[(((t * s.ft + a) * xs[1] + h * s.fs + i) * xs[2] + w * s.fs + j) * C + c];
        }
        EXPECT_NEAR(y.f32()[v * s.out_channels + o], sum / g, 1e-6);
      }
  }
}

TEST(Relu, ClampsNegativesAndKeepsNaN) {
  CpuContext ctx;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_floats({-2.f, -0.f, 0.5f, 3.f, nan}, {5});
  const Tensor y = relu(ctx, x);
  EXPECT_EQ(y.f32()[0], 0.f);
  EXPECT_EQ(y.f32()[1], 0.f);
  EXPECT_EQ(y.f32()[2], 0.5f);
  EXPECT_EQ(y.f32()[3], 3.f);
  EXPECT_TRUE(std::isnan(y.f32()[4]));
}

}  // namespace
}  // namespace avdit::ops
