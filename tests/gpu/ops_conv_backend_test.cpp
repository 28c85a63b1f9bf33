// The convolution and signal ops of the VAE decoders, CPU (the oracle) against CUDA on fresh random
// inputs (tests/testing/backend_ops.h): odd sizes that hit every edge and padding path, and the
// shapes the Wan2.2 / TurboVAED video decoders and the Oobleck / BigVGAN audio decoders run. GEMM-
// backed ops within the fp32 bar (another summation order) and the bf16 bar; moves, the mean, relu
// and the affine map bit-exact.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "ops/conv1d.h"
#include "ops/conv1d_affine.h"
#include "ops/conv1d_alias_free.h"
#include "ops/conv1d_transpose.h"
#include "ops/conv3d.h"
#include "ops/relu.h"
#include "ops/resample_fft.h"
#include "ops/snake_beta.h"
#include "ops/space_shuffle3d.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using test_util::kExact;
using test_util::random_tensor;
using test_util::tol_for;

class ConvBackendOps : public test_util::BackendOpsTest {
 protected:
  // conv3d on x [T, H, W, ci] with a [co, kt, kh, kw, ci] weight; x, w, y in the given dtypes.
  void conv3d_case(Shape xs, int64_t co, int64_t kt, int64_t kh, int64_t kw,
                   const Conv3dGeometry& g, bool with_bias, DType xd, DType wd, DType yd,
                   uint32_t seed) {
    const int64_t ci = xs[3];
    const Tensor x = random_tensor(xs, xd, seed);
    const float wstd = 1.0f / std::sqrt(static_cast<float>(kt * kh * kw * ci));
    const Tensor w = random_tensor({co, kt, kh, kw, ci}, wd, seed + 1, wstd);
    const Tensor b = random_tensor({co}, wd, seed + 2, 0.5f);
    const std::string name =
        fmt::format("conv3d {} -> {} k{}x{}x{} s{}{}{} pad t{}+{} h{}+{} w{}+{} {}{} x{} w{} y{}",
                    shape_str(xs), co, kt, kh, kw, g.stride_t, g.stride_h, g.stride_w, g.pad_front,
                    g.pad_back, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right,
                    g.time_pad == TimePad::Zeros ? "zeros" : "replicate", with_bias ? " bias" : "",
                    dtype_name(xd), dtype_name(wd), dtype_name(yd));
    check({name, tol_for(yd), [&](Context& c) {
             const Tensor wc = c.upload(w), bc = c.upload(b);
             return std::vector<Tensor>{
                 conv3d(c, c.upload(x), wc, with_bias ? &bc : nullptr, g, yd)};
           }});
  }
  void conv3d_case(Shape xs, int64_t co, int64_t kt, int64_t kh, int64_t kw,
                   const Conv3dGeometry& g, bool with_bias, DType d, uint32_t seed) {
    conv3d_case(std::move(xs), co, kt, kh, kw, g, with_bias, d, d, d, seed);
  }

  // conv1d on x [B, cin, L] with a [cout, cin / groups, k] weight; x and y in xd, w in wd.
  void conv1d_case(int64_t B, int64_t cin, int64_t L, int64_t cout, int64_t k,
                   const Conv1dParams& p, bool with_bias, DType xd, DType wd, uint32_t seed) {
    const Tensor x = random_tensor({B, cin, L}, xd, seed);
    const float wstd = 1.0f / std::sqrt(static_cast<float>(cin / p.groups * k));
    const Tensor w = random_tensor({cout, cin / p.groups, k}, wd, seed + 1, wstd);
    const Tensor b = random_tensor({cout}, wd, seed + 2, 0.5f);
    check({fmt::format("conv1d [{}, {}, {}] -> {} k{} s{} p{} d{} g{}{} x{} w{}", B, cin, L, cout,
                       k, p.stride, p.padding, p.dilation, p.groups, with_bias ? " bias" : "",
                       dtype_name(xd), dtype_name(wd)),
           tol_for(xd), [&](Context& c) {
             const Tensor wc = c.upload(w), bc = c.upload(b);
             return std::vector<Tensor>{conv1d(c, c.upload(x), wc, with_bias ? &bc : nullptr, p)};
           }});
  }

  // conv1d_transpose on x [B, cin, L] with a [cin, cout, k] weight.
  void conv1d_transpose_case(int64_t B, int64_t cin, int64_t L, int64_t cout, int64_t k,
                             int64_t stride, int64_t padding, bool with_bias, DType xd, DType wd,
                             uint32_t seed) {
    const Tensor x = random_tensor({B, cin, L}, xd, seed);
    const float wstd = 1.0f / std::sqrt(static_cast<float>(cin * k / stride));
    const Tensor w = random_tensor({cin, cout, k}, wd, seed + 1, wstd);
    const Tensor b = random_tensor({cout}, wd, seed + 2, 0.5f);
    check(
        {fmt::format("conv1d_transpose [{}, {}, {}] -> {} k{} s{} p{}{} x{} w{}", B, cin, L, cout,
                     k, stride, padding, with_bias ? " bias" : "", dtype_name(xd), dtype_name(wd)),
         tol_for(xd), [&](Context& c) {
           const Tensor wc = c.upload(w), bc = c.upload(b);
           return std::vector<Tensor>{
               conv1d_transpose(c, c.upload(x), wc, with_bias ? &bc : nullptr, {stride, padding})};
         }});
  }
};

Conv3dGeometry same_pad(int64_t kt, int64_t kh, int64_t kw, TimePad tp = TimePad::Zeros) {
  Conv3dGeometry g;
  g.pad_front = g.pad_back = kt / 2;
  g.pad_top = g.pad_bottom = kh / 2;
  g.pad_left = g.pad_right = kw / 2;
  g.time_pad = tp;
  return g;
}

// Wan2.2's causal convolution: `front` frames of zeros (kt - 1 less the cached frames), none
// behind.
Conv3dGeometry causal(int64_t kh, int64_t kw, int64_t front) {
  Conv3dGeometry g = same_pad(1, kh, kw);
  g.pad_front = front;
  return g;
}

TEST_F(ConvBackendOps, Conv3dOddSizes) {
  for (DType d : {DType::F32, DType::BF16}) {
    for (TimePad tp : {TimePad::Zeros, TimePad::Replicate})
      for (bool bias : {true, false})
        conv3d_case({3, 5, 7, 13}, 11, 3, 3, 3, same_pad(3, 3, 3, tp), bias, d, 1);
    // Strides in space and time, uneven pads, a replicate pad wider than the clip.
    Conv3dGeometry g = same_pad(3, 3, 3);
    g.stride_h = g.stride_w = 2;
    g.pad_top = 0;
    g.pad_right = 2;
    conv3d_case({3, 5, 7, 13}, 11, 3, 3, 3, g, true, d, 4);
    g = same_pad(3, 1, 1, TimePad::Replicate);
    g.stride_t = 2;
    g.pad_front = 4;
    g.pad_back = 3;
    conv3d_case({2, 3, 5, 6}, 9, 3, 1, 1, g, true, d, 7);
    // Pointwise (the GEMM on the voxel rows as they are), a per-frame 2-D kernel, the causal pad.
    conv3d_case({3, 5, 7, 13}, 5, 1, 1, 1, {}, true, d, 10);
    conv3d_case({1, 5, 7, 3}, 4, 1, 3, 3, same_pad(1, 3, 3), true, d, 13);
    conv3d_case({2, 5, 7, 13}, 11, 3, 3, 3, causal(3, 3, 2), true, d, 16);
    // Channels in whole 16-byte words (the word-wise im2col) at an odd spatial size.
    conv3d_case({3, 5, 7, 16}, 24, 3, 3, 3, same_pad(3, 3, 3), true, d, 19);
  }
  // Mixed dtypes: the operands widened to F32 (x bf16 with an F32 weight, and the reverse).
  conv3d_case({3, 5, 7, 16}, 12, 3, 3, 3, same_pad(3, 3, 3), true, DType::BF16, DType::F32,
              DType::F32, 22);
  conv3d_case({3, 5, 7, 16}, 12, 3, 3, 3, same_pad(3, 3, 3), true, DType::F32, DType::BF16,
              DType::BF16, 25);
  conv3d_case({3, 5, 7, 13}, 12, 1, 1, 1, {}, true, DType::BF16, DType::F32, DType::BF16, 28);
}

TEST_F(ConvBackendOps, Conv3dDecoderSizes) {
  for (DType d : {DType::F32, DType::BF16}) {
    // Residual-block convs of the Wan2.2 decoder (causal, two cached frames) and TurboVAED
    // (replicate), at widths 96 .. 384 and the production middle's 1024 on a small frame.
    conv3d_case({3, 9, 11, 96}, 96, 3, 3, 3, causal(3, 3, 2), true, d, 31);
    conv3d_case({4, 6, 10, 384}, 384, 3, 3, 3, causal(3, 3, 0), true, d, 34);
    conv3d_case({2, 6, 10, 384}, 384, 3, 3, 3, same_pad(3, 3, 3, TimePad::Replicate), true, d, 37);
    conv3d_case({2, 6, 10, 192}, 384, 3, 3, 3, same_pad(3, 3, 3), false, d, 40);
    conv3d_case({1, 4, 5, 1024}, 1024, 3, 3, 3, causal(3, 3, 2), true, d, 43);
    // time_conv (C -> 2C frames interleaved later), the head (-> 12 patchified channels), a 1x1
    // shortcut, the per-frame upsampler conv.
    conv3d_case({3, 6, 8, 256}, 512, 3, 1, 1, causal(1, 1, 2), true, d, 46);
    conv3d_case({2, 8, 12, 256}, 12, 3, 3, 3, causal(3, 3, 2), true, d, 49);
    conv3d_case({2, 8, 12, 384}, 192, 1, 1, 1, {}, true, d, 52);
    conv3d_case({2, 12, 16, 192}, 192, 1, 3, 3, same_pad(1, 3, 3), true, d, 55);
    // The encoder's stride-2 downsample (one zero row and column at the end) and its stride-2 time
    // conv.
    Conv3dGeometry down;
    down.stride_h = down.stride_w = 2;
    down.pad_bottom = down.pad_right = 1;
    conv3d_case({2, 10, 14, 96}, 96, 1, 3, 3, down, true, d, 58);
    Conv3dGeometry tdown;
    tdown.stride_t = 2;
    conv3d_case({5, 4, 6, 192}, 192, 3, 1, 1, tdown, true, d, 61);
  }
  // More output voxels than one im2col block holds (the block loop and its last, shorter block).
  conv3d_case({2, 96, 160, 96}, 96, 3, 3, 3, causal(3, 3, 2), true, DType::F32, 64);
  conv3d_case({3, 120, 160, 96}, 96, 3, 3, 3, same_pad(3, 3, 3, TimePad::Replicate), true,
              DType::BF16, 67);
}

TEST_F(ConvBackendOps, ChannelsToSpace) {
  struct Case {
    std::string what;
    Shape x;
    ChannelsToSpace s;
  };
  const std::vector<Case> cases = {
      {"nearest x2", {3, 5, 7, 13}, {1, 2, 13, 1, 0, 0, 0, 1}},
      {"time interleave", {3, 5, 7, 26}, {2, 1, 13, 1, 13, 0, 0, 1}},
      // DupUp3D(in, out, ft, 2): {ft, 2, out, 4 ft, 4, 2, 1, out * 4 ft / in}.
      {"DupUp3D 13 -> 13 ft 2", {3, 5, 7, 13}, {2, 2, 13, 8, 4, 2, 1, 8}},
      {"DupUp3D 1024 -> 1024 ft 2", {2, 6, 10, 1024}, {2, 2, 1024, 8, 4, 2, 1, 8}},
      {"DupUp3D 512 -> 256 ft 1", {2, 12, 20, 512}, {1, 2, 256, 4, 4, 2, 1, 2}},
      {"time interleave 384", {4, 12, 20, 768}, {2, 1, 384, 1, 384, 0, 0, 1}},
      {"nearest x2 192", {3, 24, 40, 192}, {1, 2, 192, 1, 0, 0, 0, 1}},
  };
  for (const Case& k : cases)
    for (DType d : {DType::F32, DType::BF16}) {
      const Tensor x = random_tensor(k.x, d, 70);
      check({fmt::format("channels_to_space3d {} {} {}", k.what, shape_str(k.x), dtype_name(d)),
             kExact, [&](Context& c) {
               return std::vector<Tensor>{channels_to_space3d(c, c.upload(x), k.s)};
             }});
    }
}

TEST_F(ConvBackendOps, SpaceToChannelsMean) {
  struct Case {
    Shape x;
    SpaceToChannelsMean s;
  };
  // AvgDown3D(in, out, ft, fs): groups of C ft fs^2 / out values, across channels too.
  const std::vector<Case> cases = {{{4, 6, 10, 13}, {2, 2, 13}},
                                   {{3, 5, 7, 12}, {1, 1, 4}},
                                   {{2, 6, 4, 3}, {2, 2, 8}},
                                   {{4, 16, 24, 96}, {2, 2, 192}},
                                   {{2, 16, 24, 192}, {1, 2, 384}}};
  for (const Case& k : cases)
    for (DType xd : {DType::F32, DType::BF16})
      for (DType yd : {DType::F32, DType::BF16}) {
        const Tensor x = random_tensor(k.x, xd, 73);
        check({fmt::format("space_to_channels_mean3d {} ft {} fs {} -> {} x{} y{}", shape_str(k.x),
                           k.s.ft, k.s.fs, k.s.out_channels, dtype_name(xd), dtype_name(yd)),
               kExact, [&](Context& c) {
                 return std::vector<Tensor>{space_to_channels_mean3d(c, c.upload(x), k.s, yd)};
               }});
      }
}

TEST_F(ConvBackendOps, Relu) {
  for (const Shape& s : {Shape{1}, Shape{3, 5, 7, 13}, Shape{2, 24, 40, 384}})
    for (DType xd : {DType::F32, DType::BF16})
      for (DType yd : {DType::F32, DType::BF16}) {
        const Tensor x = random_tensor(s, xd, 76);
        check({fmt::format("relu {} x{} y{}", shape_str(s), dtype_name(xd), dtype_name(yd)), kExact,
               [&](Context& c) { return std::vector<Tensor>{relu(c, c.upload(x), yd)}; }});
      }
}

TEST_F(ConvBackendOps, Conv1d) {
  for (DType d : {DType::F32, DType::BF16}) {
    // Odd sizes: padding, stride, dilation, groups, pointwise, no bias, batch rows.
    conv1d_case(2, 13, 37, 11, 7, {.padding = 9, .dilation = 3}, true, d, d, 80);
    conv1d_case(2, 13, 37, 11, 7, {.stride = 2, .padding = 1}, true, d, d, 83);
    conv1d_case(1, 13, 5, 11, 7, {.padding = 3}, false, d, d, 86);
    conv1d_case(2, 12, 29, 8, 3, {.padding = 1, .groups = 4}, true, d, d, 89);
    conv1d_case(1, 13, 37, 11, 1, {}, true, d, d, 92);
    // Oobleck: conv_in 64 -> 2048, the residual units' k7 at dilations 1, 3, 9 and their 1x1,
    // conv_out 128 -> 2 without bias.
    conv1d_case(1, 64, 50, 2048, 7, {.padding = 3}, true, d, d, 95);
    for (int64_t dil : {1, 3, 9})
      conv1d_case(1, 256, 600, 256, 7, {.padding = 3 * dil, .dilation = dil}, true, d, d, 98);
    conv1d_case(1, 1024, 400, 1024, 1, {}, true, d, d, 101);
    conv1d_case(1, 128, 4096, 2, 7, {.padding = 3}, false, d, d, 104);
    // BigVGAN: conv_pre, the AMP blocks' k3 / k7 / k11 at dilations 1, 3, 5, conv_post.
    conv1d_case(1, 32, 40, 1024, 7, {.padding = 3}, true, d, d, 107);
    for (int64_t k : {3, 7, 11})
      for (int64_t dil : {1, 3, 5})
        conv1d_case(1, 128, 800, 128, k, {.padding = dil * (k - 1) / 2, .dilation = dil}, true, d,
                    d, 110);
    conv1d_case(1, 8, 6400, 2, 7, {.padding = 3}, false, d, d, 113);
  }
  // Longer than one unfolded span (the span loop and its last, shorter span).
  conv1d_case(1, 1024, 10000, 16, 7, {.padding = 3}, true, DType::F32, DType::F32, 116);
  conv1d_case(1, 1024, 20000, 16, 7, {.padding = 9, .dilation = 3}, true, DType::BF16, DType::BF16,
              119);
  // Mixed dtypes: widened to F32 for the GEMM.
  conv1d_case(2, 13, 37, 11, 7, {.padding = 3}, true, DType::BF16, DType::F32, 122);
  conv1d_case(2, 13, 37, 11, 7, {.padding = 3}, true, DType::F32, DType::BF16, 125);
}

TEST_F(ConvBackendOps, Conv1dTranspose) {
  for (DType d : {DType::F32, DType::BF16}) {
    conv1d_transpose_case(2, 13, 9, 11, 5, 2, 1, true, d, d, 130);
    conv1d_transpose_case(1, 13, 9, 11, 16, 8, 4, false, d, d, 133);
    conv1d_transpose_case(2, 7, 11, 5, 9, 5, 2, true, d, d, 136);
    conv1d_transpose_case(1, 7, 11, 5, 3, 1, 0, true, d, d, 139);
    conv1d_transpose_case(1, 7, 6, 5, 2, 4, 0, true, d, d, 142);  // kernel < stride: gaps
    // Oobleck's first and last upsamplers (kernel 2s, padding ceil(s / 2)), BigVGAN's x5 and x2.
    conv1d_transpose_case(1, 2048, 50, 1024, 16, 8, 4, true, d, d, 145);
    conv1d_transpose_case(1, 128, 3000, 128, 4, 2, 1, true, d, d, 148);
    conv1d_transpose_case(1, 1024, 40, 512, 9, 5, 2, true, d, d, 151);
    conv1d_transpose_case(1, 64, 2000, 32, 4, 2, 1, true, d, d, 154);
  }
  // More outputs than one span (the spans' overlapping input samples).
  conv1d_transpose_case(1, 16, 8500, 512, 16, 8, 4, true, DType::F32, DType::F32, 157);
  conv1d_transpose_case(2, 13, 9, 11, 5, 2, 1, true, DType::BF16, DType::F32, 160);
}

TEST_F(ConvBackendOps, Conv1dAffine) {
  for (DType d : {DType::F32, DType::BF16}) {
    struct Case {
      Shape x;
      bool per_channel, shift;
      float lo, hi;
    };
    for (const Case& k :
         {Case{{2, 13, 37}, true, true, -kNoLimit, kNoLimit},
          Case{{2, 13, 37}, false, false, -1.0f, 1.0f}, Case{{2, 13, 37}, true, false, -0.5f, 2.0f},
          Case{{1, 32, 400}, true, true, -kNoLimit, kNoLimit},
          Case{{1, 2, 64000}, false, false, -1.0f, 1.0f}}) {
      const int64_t C = k.x[1];
      const Tensor x = random_tensor(k.x, d, 170, 1.5f);
      const Tensor scale = random_tensor({k.per_channel ? C : 1}, DType::F32, 171, 0.5f, 1.f);
      const Tensor shift = random_tensor({k.per_channel ? C : 1}, DType::F32, 172, 0.3f);
      check({fmt::format("conv1d_affine {} scale [{}]{} clamp [{}, {}] {}", shape_str(k.x),
                         scale.numel(), k.shift ? " shift" : "", k.lo, k.hi, dtype_name(d)),
             kExact, [&](Context& c) {
               const Tensor sc = c.upload(scale), sh = c.upload(shift);
               return std::vector<Tensor>{
                   conv1d_affine(c, c.upload(x), sc, k.shift ? &sh : nullptr, k.lo, k.hi)};
             }});
    }
  }
}

TEST_F(ConvBackendOps, SnakeBeta) {
  for (DType d : {DType::F32, DType::BF16})
    for (const Shape& s : {Shape{2, 13, 37}, Shape{1, 1024, 400}, Shape{1, 128, 50000}}) {
      const Tensor x = random_tensor(s, d, 180, 1.5f);
      const Tensor alpha = random_tensor({s[1]}, DType::F32, 181, 0.2f);
      const Tensor beta = random_tensor({s[1]}, DType::F32, 182, 0.2f);
      check({fmt::format("snake_beta {} {}", shape_str(s), dtype_name(d)), tol_for(d),
             [&](Context& c) {
               return std::vector<Tensor>{
                   snake_beta(c, c.upload(x), c.upload(alpha), c.upload(beta))};
             }});
    }
}

TEST_F(ConvBackendOps, AliasFreeSnake) {
  struct Case {
    Shape x;
    int64_t ku, kd, ratio;
  };
  // BigVGAN: 12-tap filters at ratio 2, from 1024 channels to the last stage's 8; odd and short
  // rows, odd filters and another ratio for the edges.
  for (const Case& k :
       {Case{{2, 13, 37}, 12, 12, 2}, Case{{1, 3, 1}, 12, 12, 2}, Case{{2, 5, 300}, 6, 5, 3},
        Case{{1, 4, 77}, 4, 7, 2}, Case{{1, 1024, 80}, 12, 12, 2}, Case{{1, 64, 3000}, 12, 12, 2},
        Case{{1, 8, 64000}, 12, 12, 2}})
    for (DType d : {DType::F32, DType::BF16}) {
      const int64_t C = k.x[1];
      const Tensor x = random_tensor(k.x, d, 190, 1.5f);
      const Tensor up = random_tensor({1, 1, k.ku}, DType::F32, 191, 0.3f);
      const Tensor down = random_tensor({1, 1, k.kd}, DType::F32, 192, 0.3f);
      const Tensor alpha = random_tensor({C}, DType::F32, 193, 0.2f);
      const Tensor beta = random_tensor({C}, DType::F32, 194, 0.2f);
      check({fmt::format("conv1d_alias_free_snake {} up {} down {} ratio {} {}", shape_str(k.x),
                         k.ku, k.kd, k.ratio, dtype_name(d)),
             tol_for(d), [&](Context& c) {
               return std::vector<Tensor>{conv1d_alias_free_snake(c, c.upload(x), c.upload(up),
                                                                  c.upload(down), c.upload(alpha),
                                                                  c.upload(beta), k.ratio)};
             }});
    }
}

TEST_F(ConvBackendOps, ResampleFft) {
  // Shrinking and growing, odd and even lengths (the Nyquist rule), powers of two (radix-2 alone)
  // and not (Bluestein), a single sample; then MAGI-2's 2 s of Oobleck audio, 102,400 samples at
  // 51.2 kHz onto 88,200 at 44.1 kHz.
  for (const auto& [n, m] : {std::pair<int64_t, int64_t>{7, 5},
                             {5, 7},
                             {8, 6},
                             {6, 8},
                             {13, 13},
                             {1, 4},
                             {4, 1},
                             {1024, 882},
                             {100, 441},
                             {441, 100},
                             {102400, 88200}})
    for (DType d : {DType::F32, DType::BF16}) {
      const Tensor x = random_tensor({2, n}, d, 200);
      check({fmt::format("resample_fft [2, {}] -> {} {}", n, m, dtype_name(d)), tol_for(d),
             [&](Context& c) { return std::vector<Tensor>{resample_fft(c, c.upload(x), m)}; }});
    }
}

}  // namespace
}  // namespace avdit::ops
