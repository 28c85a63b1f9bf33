// The fused steps of an adaLN DiT block (MiniMax-H3): the gated residual, RMSNorm and the adaLN
// modulation in one row pass, and the per-head QK-norm + RoPE + q/k/v split of the grouped qkv
// projection in one pass. Each rounds where the reference's separate bf16 ops round, so the result
// is the same whether the steps run fused (GPU) or one by one (the CPU reference).
#pragma once

#include <cstdint>
#include <optional>

#include "ops/dispatch.h"

namespace avdit::ops {

// Columns [col, col + H) of the rows of a per-timestep table [R, W] (adaLN outputs keep shift,
// scale and gate side by side); each token picks its table row through an index.
struct TableColumns {
  Tensor table;  // [R, W] on the context, in the activation dtype
  int64_t col = 0;
  bool defined() const { return table.defined(); }
};

// For every row r of x [S, H]:
//   if f:    x[r] = Rx(x[r] + Rx(gate[row[r]] * f[r]))  (gate undefined: x[r] = Rx(x[r] + f[r]))
//   if out:  h = R(rmsnorm(x[r]) * w)                   (eps; w [H] in the activation dtype)
//            if shift: h = R(R(h * R(1 + scale[row2[r]])) + shift[row2[r]])
//            out[r] = h   (out in the activation dtype, or F32 holding the rounded values)
// R rounds to the activation dtype `act` (unset: x's; F32, BF16 or F16), the dtype of w and the
// tables on the GPU. The residual x and the branch f share one dtype, the activation dtype or F32
// (the fp16 recipe's widened residual: an F32 x with act F16); Rx rounds to it. row / row2: I32 [S].
// zero_gate_guard: a zero gate adds nothing even when f is not finite (the fp16 recipe's guard:
// 0 * inf is NaN); without it the product is the reference's.
struct ResidualNormModulate {
  const Tensor* f = nullptr;
  TableColumns gate;
  const Tensor* row = nullptr;
  Tensor w;
  float eps = 1e-6f;
  TableColumns shift, scale;
  const Tensor* row2 = nullptr;
  std::optional<DType> act;
  bool zero_gate_guard = false;
};

namespace cpu {
void residual_norm_modulate(Tensor& x, const ResidualNormModulate& a, Tensor* out);
void qk_norm_rope_per_head(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                           const Tensor* cos, const Tensor* sin, Tensor& q, Tensor& k, Tensor& v);
}  // namespace cpu
namespace cuda {
void residual_norm_modulate(CudaContext& c, Tensor& x, const ResidualNormModulate& a, Tensor* out);
void qk_norm_rope_per_head(CudaContext& c, const Tensor& qkv, const Tensor& q_norm,
                           const Tensor& k_norm, float eps, const Tensor* cos, const Tensor* sin,
                           Tensor& q, Tensor& k, Tensor& v);
}  // namespace cuda

inline void residual_norm_modulate(Context& ctx, Tensor& x, const ResidualNormModulate& a,
                                   Tensor* out) {
  AVDIT_OP(ctx, residual_norm_modulate, x, a, out);
}

// qkv [S, heads, 3, D] (the grouped projection's rows: q, k, v of each head side by side) ->
// q = R(rope(R(rmsnorm(q) * q_norm))), k likewise, v copied; q, k, v [S, heads, D] preallocated in
// qkv's dtype (R rounds to it). RoPE (when cos is given): split-half rotation of dims [0, 2 half)
// with cos, sin F32 [S, half] (indexed by row). The GPU kernel takes D a multiple of 4 up to 128
// (F16: D = 128).
inline void qk_norm_rope_per_head(Context& ctx, const Tensor& qkv, const Tensor& q_norm,
                                  const Tensor& k_norm, float eps, const Tensor* cos,
                                  const Tensor* sin, Tensor& q, Tensor& k, Tensor& v) {
  AVDIT_OP(ctx, qk_norm_rope_per_head, qkv, q_norm, k_norm, eps, cos, sin, q, k, v);
}

}  // namespace avdit::ops
