// 3-D convolution on channel-last video [T, H, W, C], the layout the video VAEs run in (a voxel's
// channels are one GEMM row, so their RMSNorms, 1x1 convolutions and attention are the row ops
// already in the set). Time padding is zeros (Wan2.2's causal convolutions: the left frames come
// from the caller's feature cache or are zeros) or copies of the edge frames (TurboVAED); space is
// zero-padded. The CPU runs im2col over fixed blocks of output voxels and the deterministic
// sgemm_fixed, so the bits depend on the shapes alone.
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

enum class TimePad { Zeros, Replicate };

struct Conv3dGeometry {
  int64_t stride_t = 1, stride_h = 1, stride_w = 1;
  int64_t pad_front = 0, pad_back = 0;  // frames before / after (TimePad decides what they hold)
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;  // zeros
  TimePad time_pad = TimePad::Zeros;
};

namespace cpu {
void conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g,
            Tensor& y);
}
namespace cuda {
void conv3d(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
            const Conv3dGeometry& g, Tensor& y);
}

// The output extent of one dimension: (in + pads - k) / stride + 1 (0 when the kernel does not
// fit).
inline int64_t conv_out_size(int64_t in, int64_t pad_lo, int64_t pad_hi, int64_t k,
                             int64_t stride) {
  const int64_t span = in + pad_lo + pad_hi - k;
  return span < 0 ? 0 : span / stride + 1;
}

// y[to, ho, wo, co] = bias[co] + sum over (a, i, j, ci) of w[co, a, i, j, ci] *
// x_padded[to*st + a, ho*sh + i, wo*sw + j, ci], accumulated in fp32 and rounded once to y's dtype.
// x [T, H, W, Cin]; w [Cout, kt, kh, kw, Cin] (conv3d_weight packs PyTorch's layout); bias [Cout].
inline Tensor conv3d(Context& ctx, const Tensor& x, const Tensor& w, const Tensor* bias,
                     const Conv3dGeometry& g, DType out = DType::F32) {
  const Shape& s = x.shape();
  const Shape& k = w.shape();
  Tensor y = ctx.empty({conv_out_size(s[0], g.pad_front, g.pad_back, k[1], g.stride_t),
                        conv_out_size(s[1], g.pad_top, g.pad_bottom, k[2], g.stride_h),
                        conv_out_size(s[2], g.pad_left, g.pad_right, k[3], g.stride_w), k[0]},
                       out);
  AVDIT_OP(ctx, conv3d, x, w, bias, g, y);
  return y;
}

// PyTorch's Conv3d weight [Cout, Cin, kt, kh, kw] (or Conv2d's [Cout, Cin, kh, kw], kt = 1) as
// conv3d takes it, [Cout, kt, kh, kw, Cin], in F32 on the host (a load-time repack).
Tensor conv3d_weight(const Tensor& torch_weight);

}  // namespace avdit::ops
