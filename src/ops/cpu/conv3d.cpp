// conv3d on the CPU: im2col of a fixed block of output voxels into [voxels, kt*kh*kw*Cin] rows
// (each tap a contiguous run of Cin), one sgemm_fixed against the [Cout, K] weight per block. The
// block size is a function of the shape alone, so results are bit-identical for any thread count.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "ops/conv3d.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"

namespace avdit::ops::cpu {
namespace {

// About 64 MiB of im2col rows per block, at least 64 voxels.
constexpr int64_t kColFloats = int64_t{1} << 24;
constexpr int64_t kRowsPerTask = 64;

// The input frame a padded frame index reads: -1 for a zero frame.
int64_t source_frame(int64_t padded, int64_t frames, const Conv3dGeometry& g) {
  const int64_t t = padded - g.pad_front;
  if (t >= 0 && t < frames) return t;
  if (g.time_pad == TimePad::Zeros || frames == 0) return -1;
  return t < 0 ? 0 : frames - 1;
}

// One im2col row: the taps of output voxel v, each a contiguous run of Ci (zeros outside).
void im2col_row(const float* px, int64_t T, int64_t H, int64_t W, int64_t Ci, int64_t kt,
                int64_t kh, int64_t kw, const Conv3dGeometry& g, int64_t v, int64_t Ho, int64_t Wo,
                float* row) {
  const int64_t wo = v % Wo, ho = (v / Wo) % Ho, to = v / (Wo * Ho);
  for (int64_t a = 0; a < kt; ++a) {
    const int64_t t = source_frame(to * g.stride_t + a, T, g);
    for (int64_t i = 0; i < kh; ++i) {
      const int64_t h = ho * g.stride_h + i - g.pad_top;
      for (int64_t j = 0; j < kw; ++j, row += Ci) {
        const int64_t w = wo * g.stride_w + j - g.pad_left;
        if (t < 0 || h < 0 || h >= H || w < 0 || w >= W) {
          std::fill(row, row + Ci, 0.f);
        } else {
          const float* src = px + ((t * H + h) * W + w) * Ci;
          std::copy(src, src + Ci, row);
        }
      }
    }
  }
}

}  // namespace

void conv3d(const Tensor& x_in, const Tensor& w_in, const Tensor* bias_in, const Conv3dGeometry& g,
            Tensor& y) {
  AVDIT_CHECK(x_in.ndim() == 4 && w_in.ndim() == 5 && y.ndim() == 4,
              "conv3d: x {} w {} y {} (expected [T, H, W, Cin], [Cout, kt, kh, kw, Cin])",
              x_in.shape_str(), w_in.shape_str(), y.shape_str());
  const int64_t T = x_in.size(0), H = x_in.size(1), W = x_in.size(2), Ci = x_in.size(3);
  const int64_t Co = w_in.size(0), kt = w_in.size(1), kh = w_in.size(2), kw = w_in.size(3);
  AVDIT_CHECK(w_in.size(4) == Ci, "conv3d: weight {} for {} input channels", w_in.shape_str(), Ci);
  AVDIT_CHECK(g.stride_t > 0 && g.stride_h > 0 && g.stride_w > 0, "conv3d: strides must be > 0");
  const int64_t To = conv_out_size(T, g.pad_front, g.pad_back, kt, g.stride_t),
                Ho = conv_out_size(H, g.pad_top, g.pad_bottom, kh, g.stride_h),
                Wo = conv_out_size(W, g.pad_left, g.pad_right, kw, g.stride_w);
  AVDIT_CHECK(y.size(0) == To && y.size(1) == Ho && y.size(2) == Wo && y.size(3) == Co,
              "conv3d: output {} for x {} w {}", y.shape_str(), x_in.shape_str(), w_in.shape_str());
  if (bias_in)
    AVDIT_CHECK(bias_in->numel() == Co, "conv3d: bias {} for {} outputs", bias_in->shape_str(), Co);
  const Tensor x = f32(x_in), w = f32(w_in);
  const Tensor bias = bias_in ? f32(*bias_in) : Tensor();
  Tensor y32 = y.dtype() == DType::F32 ? y : Tensor::empty(y.shape(), DType::F32);
  const int64_t K = kt * kh * kw * Ci, voxels = To * Ho * Wo;
  if (voxels == 0) return;
  const float* px = x.f32();
  float* py = y32.f32();
  const bool pointwise = kt == 1 && kh == 1 && kw == 1 && g.stride_t == 1 && g.stride_h == 1 &&
                         g.stride_w == 1 && g.pad_front == 0 && g.pad_back == 0 && g.pad_top == 0 &&
                         g.pad_bottom == 0 && g.pad_left == 0 && g.pad_right == 0;
  if (pointwise) {
    // A 1x1x1 convolution is a GEMM on the voxel rows as they are.
    sgemm_fixed(true, voxels, Co, K, 1.f, px, K, w.f32(), K, 0.f, py, Co);
  } else {
    const int64_t block = std::min(voxels, std::max<int64_t>(64, kColFloats / K));
    std::vector<float> col(static_cast<size_t>(block * K));
    for (int64_t v0 = 0; v0 < voxels; v0 += block) {
      const int64_t n = std::min(block, voxels - v0);
      // The rows are independent copies: filled in parallel groups (the bits do not depend on
      // the split), then one GEMM for the block.
      const int64_t groups = (n + kRowsPerTask - 1) / kRowsPerTask;
      cpu_pool().run(groups, [&](int64_t grp) {
        const int64_t r1 = std::min(n, (grp + 1) * kRowsPerTask);
        for (int64_t r = grp * kRowsPerTask; r < r1; ++r)
          im2col_row(px, T, H, W, Ci, kt, kh, kw, g, v0 + r, Ho, Wo, col.data() + r * K);
      });
      sgemm_fixed(true, n, Co, K, 1.f, col.data(), K, w.f32(), K, 0.f, py + v0 * Co, Co);
    }
  }
  if (bias.defined()) {
    const float* pb = bias.f32();
    const int64_t groups = (voxels + kRowsPerTask - 1) / kRowsPerTask;
    cpu_pool().run(groups, [&](int64_t grp) {
      const int64_t v1 = std::min(voxels, (grp + 1) * kRowsPerTask);
      for (int64_t v = grp * kRowsPerTask; v < v1; ++v)
        for (int64_t o = 0; o < Co; ++o) py[v * Co + o] += pb[o];
    });
  }
  if (y32.raw() != y.raw()) store(y, py);
}

}  // namespace avdit::ops::cpu
