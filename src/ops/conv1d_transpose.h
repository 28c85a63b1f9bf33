// 1-D transposed convolution over [batch, channels, length] (PyTorch's ConvTranspose1d, groups 1,
// no output padding): the audio decoders' learned upsampling. fp32 math; the result is rounded to
// the output's dtype.
#pragma once

#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "ops/dispatch.h"

namespace avdit::ops {

struct Conv1dTransposeParams {
  int64_t stride = 1, padding = 0;
};

// (L - 1) * stride - 2 * padding + K.
inline int64_t conv1d_transpose_out_length(int64_t length, int64_t k,
                                           const Conv1dTransposeParams& p) {
  return (length - 1) * p.stride - 2 * p.padding + k;
}

namespace cpu {
void conv1d_transpose(const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Conv1dTransposeParams& p, Tensor& y);
}  // namespace cpu
namespace cuda {
void conv1d_transpose(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Conv1dTransposeParams& p, Tensor& y);
}  // namespace cuda

// x: [B, Cin, L]; w: [Cin, Cout, K] (PyTorch's layout); bias: [Cout] or null -> [B, Cout, Lout].
inline Tensor conv1d_transpose(Context& ctx, const Tensor& x, const Tensor& w, const Tensor* bias,
                               const Conv1dTransposeParams& p) {
  AVDIT_CHECK(x.ndim() == 3 && w.ndim() == 3, "conv1d_transpose: x {} and weight {} must be 3-D",
              x.shape_str(), w.shape_str());
  const int64_t lout = conv1d_transpose_out_length(x.size(2), w.size(2), p);
  AVDIT_CHECK(lout >= 1, "conv1d_transpose: no output for x {} and weight {}", x.shape_str(),
              w.shape_str());
  Tensor y = ctx.empty({x.size(0), w.size(1), lout}, x.dtype());
  AVDIT_OP(ctx, conv1d_transpose, x, w, bias, p, y);
  return y;
}

}  // namespace avdit::ops
