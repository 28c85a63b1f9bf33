// conv3d's cuDNN path (ops/cuda/conv3d_cudnn.h) against the CPU reference on fresh random inputs:
// odd channel counts, strides, the causal (one-sided) time pad and uneven space pads, BF16 and F16
// at the bf16 bar; which path each case takes (TurboVAED's replicate time pad on cuDNN through a
// padded copy of x), that the operands cuDNN is not given (F32, mixed dtypes) and the shapes it
// refuses run on im2col and are right too, and that a cuDNN convolution gives the same bits twice
// (deterministic engines).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "ops/conv3d.h"
#include "ops/cuda/conv3d_cudnn.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using cuda::Conv3dPath;
using test_util::random_tensor;
using test_util::tol_for;

struct Case {
  Shape x;  // [T, H, W, Cin]
  int64_t co, kt, kh, kw;
  Conv3dGeometry g;
  bool bias;
  DType xd, wd, yd;
};

std::string name_of(const Case& c) {
  return fmt::format("{} -> {} k{}x{}x{} s{}{}{} pad t{}+{} h{}+{} w{}+{} {}{} x{} w{} y{}",
                     shape_str(c.x), c.co, c.kt, c.kh, c.kw, c.g.stride_t, c.g.stride_h,
                     c.g.stride_w, c.g.pad_front, c.g.pad_back, c.g.pad_top, c.g.pad_bottom,
                     c.g.pad_left, c.g.pad_right,
                     c.g.time_pad == TimePad::Zeros ? "zeros" : "replicate", c.bias ? " bias" : "",
                     dtype_name(c.xd), dtype_name(c.wd), dtype_name(c.yd));
}

Conv3dGeometry causal(int64_t kt, int64_t kh, int64_t kw) {
  Conv3dGeometry g;
  g.pad_front = kt - 1;
  g.pad_top = g.pad_bottom = kh / 2;
  g.pad_left = g.pad_right = kw / 2;
  return g;
}

// TurboVAEDCausalConv3d (not causal): (kt - 1) / 2 copies of the edge frames on each side.
Conv3dGeometry replicate(int64_t kt, int64_t kh, int64_t kw) {
  Conv3dGeometry g;
  g.pad_front = g.pad_back = (kt - 1) / 2;
  g.time_pad = TimePad::Replicate;
  g.pad_top = g.pad_bottom = kh / 2;
  g.pad_left = g.pad_right = kw / 2;
  return g;
}

class Conv3dCudnn : public test_util::BackendOpsTest {
 protected:
  // Runs the case through the public entry on both contexts, checks it against the CPU at the
  // output dtype's bar, and returns the path the GPU took.
  Conv3dPath check_case(const Case& c, uint32_t seed) {
    const std::string name = name_of(c);
    const int64_t ci = c.x[3];
    const Tensor x = random_tensor(c.x, c.xd, seed);
    const float wstd = 1.0f / std::sqrt(static_cast<float>(c.kt * c.kh * c.kw * ci));
    const Tensor w = random_tensor({c.co, c.kt, c.kh, c.kw, ci}, c.wd, seed + 1, wstd);
    const Tensor b = random_tensor({c.co}, c.wd, seed + 2, 0.5f);

    const Tensor bc = cpu().upload(b);
    const Tensor want = conv3d(cpu(), x, w, c.bias ? &bc : nullptr, c.g, c.yd);

    CudaContext& gc = gpu();
    const Tensor xg = gc.upload(x), wg = gc.upload(w), bg = gc.upload(b);
    const Tensor* bias = c.bias ? &bg : nullptr;
    Tensor probe = gc.empty(want.shape(), c.yd);
    std::string why;
    const Conv3dPath path = cuda::conv3d_path(gc, xg, wg, bias, c.g, probe, &why);
    const Tensor got = gc.download(conv3d(gc, xg, wg, bias, c.g, c.yd));
    const double e = test_util::nmse(got, want);
    std::printf("  %-72s %-6s NMSE %.2e%s%s\n", name.c_str(), cuda::conv3d_path_name(path), e,
                why.empty() ? "" : "  (", why.empty() ? "" : (why + ")").c_str());
    EXPECT_LE(e, tol_for(c.yd)) << name << " on " << cuda::conv3d_path_name(path);
    EXPECT_TRUE(std::isfinite(e)) << name;

    // The path is what the entry runs: conv3d_cudnn enqueues exactly when conv3d_path says Cudnn
    // (a refused or ungated shape enqueues nothing and the entry falls back to im2col).
    Tensor direct = gc.empty(want.shape(), c.yd);
    const bool ran = cuda::conv3d_cudnn(gc, xg, wg, bias, c.g, direct);
    EXPECT_EQ(ran, path == Conv3dPath::Cudnn) << name;
    if (ran) {
      // Deterministic engines: the same bits as the entry's run.
      const Tensor again = gc.download(direct);
      EXPECT_EQ(std::memcmp(again.raw(), got.raw(), static_cast<size_t>(got.nbytes())), 0)
          << name << ": two cuDNN runs differ";
    }
    // im2col on the same operands is right as well (the fallback of every refused shape).
    Tensor fallback = gc.empty(want.shape(), c.yd);
    cuda::conv3d_im2col(gc, xg, wg, bias, c.g, fallback);
    EXPECT_LE(test_util::nmse(gc.download(fallback), want), tol_for(c.yd)) << name << " im2col";
    return path;
  }
};

// Shapes the cuDNN path is for: channels in multiples of 8, the decoders' causal (and TurboVAED's
// replicate-padded) 3x3x3 and 3x1x1 time convolutions, a 1x3x3 space convolution; with cuDNN
// built in they must run there.
TEST_F(Conv3dCudnn, DecoderLikeShapesRunOnCudnn) {
  const Conv3dGeometry rep333 = replicate(3, 3, 3), rep311 = replicate(3, 1, 1);
  const Case cases[] = {
      {{4, 9, 11, 16}, 24, 3, 3, 3, causal(3, 3, 3), true, DType::BF16, DType::BF16, DType::BF16},
      {{3, 10, 7, 32}, 16, 3, 1, 1, causal(3, 1, 1), true, DType::BF16, DType::BF16, DType::BF16},
      {{2, 13, 9, 24}, 40, 1, 3, 3, causal(1, 3, 3), false, DType::BF16, DType::BF16, DType::BF16},
      {{4, 9, 11, 16}, 16, 3, 3, 3, causal(3, 3, 3), true, DType::F16, DType::F16, DType::F16},
      // A head-like thin output (12 channels) and an F32 y from BF16 operands.
      {{3, 12, 10, 64}, 12, 3, 3, 3, causal(3, 3, 3), true, DType::BF16, DType::BF16, DType::F32},
      // TurboVAED's replicate time pad (one edge frame on each side; 3x3x3 and the 3x1x1 time
      // conv), one frame only (every tap reads it), and F16.
      {{4, 9, 11, 16}, 24, 3, 3, 3, rep333, true, DType::BF16, DType::BF16, DType::BF16},
      {{3, 10, 7, 32}, 64, 3, 1, 1, rep311, true, DType::BF16, DType::BF16, DType::BF16},
      {{1, 6, 5, 16}, 8, 3, 3, 3, rep333, true, DType::BF16, DType::BF16, DType::BF16},
      {{4, 9, 11, 16}, 16, 3, 3, 3, rep333, false, DType::F16, DType::F16, DType::F16},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    const Conv3dPath p = check_case(c, seed += 10);
#if AVDIT_HAVE_CUDNN
    EXPECT_EQ(p, Conv3dPath::Cudnn) << name_of(c) << " fell back to im2col";
#else
    EXPECT_EQ(p, Conv3dPath::Im2col) << name_of(c);
#endif
  }
}

// Odd sizes: channels that are not multiples of 8, strides in time and space, uneven pads, pads
// wider than the kernel's reach, an output of one voxel. cuDNN may take or refuse each; either way
// the result must match the CPU.
TEST_F(Conv3dCudnn, OddSizesMatchTheCpuOnEitherPath) {
  Conv3dGeometry strided = causal(3, 3, 3);
  strided.stride_t = 2;
  strided.stride_h = strided.stride_w = 2;
  Conv3dGeometry uneven;
  uneven.pad_front = 1;
  uneven.pad_back = 2;
  uneven.pad_top = 0;
  uneven.pad_bottom = 2;
  uneven.pad_left = 2;
  uneven.pad_right = 1;
  uneven.stride_h = 3;
  Conv3dGeometry tiny;  // [1, 3, 3] -> one output voxel
  const Case cases[] = {
      {{3, 5, 7, 13}, 11, 3, 3, 3, causal(3, 3, 3), true, DType::BF16, DType::BF16, DType::BF16},
      {{3, 5, 7, 13}, 11, 3, 3, 3, causal(3, 3, 3), false, DType::F16, DType::F16, DType::F16},
      {{5, 9, 8, 7}, 5, 3, 3, 3, strided, true, DType::BF16, DType::BF16, DType::BF16},
      {{5, 9, 8, 16}, 24, 3, 3, 3, strided, true, DType::BF16, DType::BF16, DType::BF16},
      {{4, 7, 6, 3}, 9, 2, 3, 2, uneven, true, DType::BF16, DType::BF16, DType::BF16},
      {{1, 3, 3, 17}, 19, 1, 3, 3, tiny, true, DType::BF16, DType::BF16, DType::BF16},
      {{2, 6, 5, 1}, 3, 3, 3, 3, causal(3, 3, 3), true, DType::BF16, DType::BF16, DType::F32},
  };
  uint32_t seed = 300;
  for (const Case& c : cases) check_case(c, seed += 10);
}

// What cuDNN is never given runs on im2col: F32 (cuDNN's fp32 convolutions may use TF32, the
// replicate time pad included), x and w of different dtypes.
TEST_F(Conv3dCudnn, UngatedOperandsRunOnIm2col) {
  const Case cases[] = {
      {{3, 6, 5, 16}, 8, 3, 3, 3, causal(3, 3, 3), true, DType::F32, DType::F32, DType::F32},
      {{3, 6, 5, 16}, 8, 3, 3, 3, replicate(3, 3, 3), true, DType::F32, DType::F32, DType::F32},
      {{3, 6, 5, 16}, 8, 3, 3, 3, causal(3, 3, 3), true, DType::BF16, DType::F32, DType::BF16},
  };
  uint32_t seed = 500;
  for (const Case& c : cases)
    EXPECT_EQ(check_case(c, seed += 10), Conv3dPath::Im2col) << name_of(c);
}

}  // namespace
}  // namespace avdit::ops
