// 1-D convolution over [batch, channels, length] (PyTorch's Conv1d: cross-correlation, zero
// padding, dilation, groups): the audio decoders' residual units, projections and output convs.
// fp32 math; the result is rounded to the output's dtype.
#pragma once

#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "ops/dispatch.h"

namespace avdit::ops {

struct Conv1dParams {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
};

// The output length of a Conv1d over `length` samples with kernel k.
inline int64_t conv1d_out_length(int64_t length, int64_t k, const Conv1dParams& p) {
  const int64_t span = length + 2 * p.padding - p.dilation * (k - 1) - 1;
  return span < 0 ? 0 : span / p.stride + 1;
}

namespace cpu {
void conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv1dParams& p, Tensor& y);
}  // namespace cpu
namespace cuda {
void conv1d(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
            const Conv1dParams& p, Tensor& y);
}  // namespace cuda

// x: [B, Cin, L]; w: [Cout, Cin / groups, K]; bias: [Cout] or null -> [B, Cout, Lout].
inline Tensor conv1d(Context& ctx, const Tensor& x, const Tensor& w, const Tensor* bias,
                     const Conv1dParams& p = {}) {
  AVDIT_CHECK(x.ndim() == 3 && w.ndim() == 3, "conv1d: x {} and weight {} must be 3-D",
              x.shape_str(), w.shape_str());
  const int64_t lout = conv1d_out_length(x.size(2), w.size(2), p);
  AVDIT_CHECK(lout >= 1, "conv1d: input {} too short for kernel {} (dilation {}, padding {})",
              x.shape_str(), w.size(2), p.dilation, p.padding);
  Tensor y = ctx.empty({x.size(0), w.size(0), lout}, x.dtype());
  AVDIT_OP(ctx, conv1d, x, w, bias, p, y);
  return y;
}

}  // namespace avdit::ops
