// The fp16 recipe's linear (MiniMax-H3 on GPUs without bf16): fp16 GEMM inputs, fp32 accumulation,
// and two of the recipe's fixes, each switchable so that its effect can be measured alone.
//   rowscale   an F32 input row too large for fp16 is scaled by 2^-k (the least k >= 0 with
//              max |row| 2^-k <= 2^15) before the cast, and the fp32 product is multiplied by 2^k:
//              a block's linears are bias-free, hence row-wise homogeneous, and a power of two
//              moves exponents only (exact unless an element drops into fp16's subnormals).
//   reduction  no split-K partial sums in a 16-bit output dtype: cuBLAS may otherwise add the
//              partial products of a deep contraction in fp16 and overflow where the whole sum
//              does not. The CPU emulates the permitted behaviour when the fix is off and y is
//              F16: the contraction in kEmulatedSplits parts, each part rounded to fp16 and the
//              parts summed in fp16.
// Without rowscale an F32 input is simply rounded to fp16 (values past 65,504 become infinite).
#pragma once

#include "ops/dispatch.h"

namespace avdit::ops {

struct F16Linear {
  bool rowscale = true;
  bool reduction = true;
};
inline constexpr int kEmulatedSplits = 4;
inline constexpr float kRowScaleLimit = 32768.0f;

namespace cpu {
void linear_f16(const Tensor& x, const Tensor& w, Tensor& y, F16Linear opt);
}
namespace cuda {
void linear_f16(CudaContext& c, const Tensor& x, const Tensor& w, Tensor& y, F16Linear opt);
}

// y [..., N] = x [..., K] · w [N, K]^T; x F32 or F16, w F16, y F16 or F32 (preallocated).
inline void linear_f16_into(Context& ctx, const Tensor& x, const Tensor& w, Tensor& y,
                            F16Linear opt) {
  AVDIT_OP(ctx, linear_f16, x, w, y, opt);
}
inline Tensor linear_f16(Context& ctx, const Tensor& x, const Tensor& w, DType out, F16Linear opt) {
  Shape shape = x.shape();
  shape.back() = w.size(0);
  Tensor y = ctx.empty(shape, out);
  linear_f16_into(ctx, x, w, y, opt);
  return y;
}

// The power-of-two exponent k rowscale applies to a row whose largest |value| is `max_abs`: 0 for
// rows within the limit (and for zero or non-finite maxima, which scaling cannot help).
inline int row_scale_exponent(float max_abs) {
  int k = 0;
  if (!(max_abs > kRowScaleLimit) || !(max_abs < 3.0e38f)) return 0;
  float m = max_abs;
  while (m > kRowScaleLimit) {
    m *= 0.5f;
    ++k;
  }
  return k;
}

}  // namespace avdit::ops
