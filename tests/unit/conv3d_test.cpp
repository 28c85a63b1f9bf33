// ops::conv3d on the CPU against a float64 loop over the definition, at odd sizes: causal zero
// time padding, replicate time padding, strides, asymmetric spatial padding (the encoder's
// ZeroPad2d((0, 1, 0, 1))), 1x1x1, a kernel wider than the padded input, and the weight repack.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "ops/context.h"
#include "ops/conv3d.h"

namespace avdit::ops {
namespace {

Tensor randn(Shape shape, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  fill_normal(t, 7, stream);
  return t;
}

// y[to, ho, wo, co] in float64 from x [T, H, W, Ci] and PyTorch's weight [Co, Ci, kt, kh, kw].
std::vector<double> reference(const Tensor& x, const Tensor& w, const Tensor& b,
                              const Conv3dGeometry& g, Shape& out) {
  const int64_t T = x.size(0), H = x.size(1), W = x.size(2), Ci = x.size(3);
  const int64_t Co = w.size(0), kt = w.size(2), kh = w.size(3), kw = w.size(4);
  const int64_t To = conv_out_size(T, g.pad_front, g.pad_back, kt, g.stride_t),
                Ho = conv_out_size(H, g.pad_top, g.pad_bottom, kh, g.stride_h),
                Wo = conv_out_size(W, g.pad_left, g.pad_right, kw, g.stride_w);
  out = {To, Ho, Wo, Co};
  std::vector<double> y(static_cast<size_t>(To * Ho * Wo * Co));
  for (int64_t to = 0; to < To; ++to)
    for (int64_t ho = 0; ho < Ho; ++ho)
      for (int64_t wo = 0; wo < Wo; ++wo)
        for (int64_t o = 0; o < Co; ++o) {
          double s = b.f32()[o];
          for (int64_t a = 0; a < kt; ++a) {
            int64_t t = to * g.stride_t + a - g.pad_front;
            if (t < 0 || t >= T) {
              if (g.time_pad == TimePad::Zeros) continue;
              t = std::clamp<int64_t>(t, 0, T - 1);
            }
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t h = ho * g.stride_h + i - g.pad_top,
                              ww = wo * g.stride_w + j - g.pad_left;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                for (int64_t c = 0; c < Ci; ++c)
                  s += static_cast<double>(w.f32()[(((o * Ci + c) * kt + a) * kh + i) * kw + j]) *
                       x.f32()[((t * H + h) * W + ww) * Ci + c];
              }
          }
          y[static_cast<size_t>(((to * Ho + ho) * Wo + wo) * Co + o)] = s;
        }
  return y;
}

void check(Shape xs, int64_t co, int64_t kt, int64_t kh, int64_t kw, const Conv3dGeometry& g,
           uint64_t stream) {
  CpuContext ctx;
  const Tensor x = randn(xs, stream), w = randn({co, xs[3], kt, kh, kw}, stream + 1),
               b = randn({co}, stream + 2);
  Shape want_shape;
  const std::vector<double> want = reference(x, w, b, g, want_shape);
  const Tensor y = conv3d(ctx, x, conv3d_weight(w), &b, g);
  ASSERT_EQ(y.shape(), want_shape);
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    diff = std::max(diff, std::fabs(y.f32()[i] - want[static_cast<size_t>(i)]));
    ref = std::max(ref, std::fabs(want[static_cast<size_t>(i)]));
  }
  EXPECT_LE(diff, 2e-6 * std::max(ref, 1.0)) << "x " << shape_str(xs) << " k " << kt << kh << kw;
}

TEST(Conv3dTest, CausalZeroPaddingInTime) {
  Conv3dGeometry g;
  g.pad_front = 2;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
  check({5, 7, 9, 11}, 13, 3, 3, 3, g, 10);
  check({1, 3, 5, 3}, 5, 3, 3, 3, g, 20);  // one frame: both earlier frames are zeros
}

TEST(Conv3dTest, ReplicatePaddingInTime) {
  Conv3dGeometry g;
  g.pad_front = g.pad_back = 1;
  g.time_pad = TimePad::Replicate;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
  check({4, 5, 6, 7}, 9, 3, 3, 3, g, 30);
  check({1, 3, 3, 2}, 3, 3, 1, 1, g, 40);  // a time-only kernel over one frame
}

TEST(Conv3dTest, StridesAndAsymmetricPadding) {
  Conv3dGeometry g;
  g.stride_h = g.stride_w = 2;
  g.pad_bottom = g.pad_right = 1;
  check({3, 9, 11, 5}, 7, 1, 3, 3, g, 50);
  Conv3dGeometry t;
  t.stride_t = 2;
  check({5, 3, 4, 6}, 6, 3, 1, 1, t, 60);
}

TEST(Conv3dTest, PointwiseAndLargeBlocks) {
  check({3, 5, 7, 17}, 19, 1, 1, 1, Conv3dGeometry{}, 70);
  // K = 27 * 512: more voxels than one im2col block holds (two blocks, one GEMM each).
  Conv3dGeometry g;
  g.pad_front = 2;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
  check({2, 33, 35, 512}, 4, 3, 3, 3, g, 80);
}

TEST(Conv3dTest, KernelLargerThanInputGivesNoOutput) {
  CpuContext ctx;
  const Tensor x = randn({1, 2, 2, 3}, 90), w = conv3d_weight(randn({4, 3, 1, 3, 3}, 91));
  const Tensor y = conv3d(ctx, x, w, nullptr, Conv3dGeometry{});
  EXPECT_EQ(y.shape(), (Shape{1, 0, 0, 4}));
}

TEST(Conv3dTest, WeightRepackIsChannelLast) {
  const Tensor w = randn({2, 3, 2, 1, 2}, 100), p = conv3d_weight(w);
  ASSERT_EQ(p.shape(), (Shape{2, 2, 1, 2, 3}));
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t j = 0; j < 2; ++j)
          EXPECT_EQ(p.f32()[((o * 2 + a) * 2 + j) * 3 + c], w.f32()[((o * 3 + c) * 2 + a) * 2 + j]);
  // A Conv2d weight is a kt = 1 Conv3d.
  EXPECT_EQ(conv3d_weight(randn({4, 5, 3, 3}, 101)).shape(), (Shape{4, 1, 3, 3, 5}));
}

}  // namespace
}  // namespace avdit::ops
