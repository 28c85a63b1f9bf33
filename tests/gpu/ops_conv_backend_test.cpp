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
#include "ops/conv3d.h"
#include "ops/relu.h"
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
    const std::string name = fmt::format(
        "conv3d {} -> {} k{}x{}x{} s{}{}{} pad t{}+{} h{}+{} w{}+{} {}{} x{} w{} y{}",
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
      for (bool bias : {true, false}) conv3d_case({3, 5, 7, 13}, 11, 3, 3, 3, same_pad(3, 3, 3, tp), bias, d, 1);
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
  const std::vector<Case> cases = {{{4, 6, 10, 13}, {2, 2, 13}}, {{3, 5, 7, 12}, {1, 1, 4}},
                                   {{2, 6, 4, 3}, {2, 2, 8}},    {{4, 16, 24, 96}, {2, 2, 192}},
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

}  // namespace
}  // namespace avdit::ops
