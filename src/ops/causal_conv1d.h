// The causal depthwise convolution along time with a SiLU after it: the Gated DeltaNet (Qwen3.5)
// mixes each q/k/v channel with its own few previous tokens before the recurrence.
#pragma once

#include <optional>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& y);
}
namespace cuda {
void causal_conv1d_silu(CudaContext& c, const Tensor& x, const Tensor& w, Tensor& y);
}

// y[t, c] = silu(sum_{j < K} w[c, j] * x[t - K + 1 + j, c]) with x[t < 0] = 0 (K - 1 zeros of left
// padding, no bias), fp32 sums, rounded once to y's dtype. x [T, C]; w [C, K] or the checkpoint's
// Conv1d layout [C, 1, K]; y [T, C].
inline Tensor causal_conv1d_silu(Context& ctx, const Tensor& x, const Tensor& w,
                                 std::optional<DType> out = {}) {
  Tensor y = ctx.empty(x.shape(), out.value_or(x.dtype()));
  AVDIT_OP(ctx, causal_conv1d_silu, x, w, y);
  return y;
}

}  // namespace avdit::ops
