// The Gated DeltaNet recurrence (Qwen3.5's linear-attention layers) and its per-token gates. The
// reference runs a chunked form; the token-by-token recurrence here is its exact definition, with
// an fp32 state per value head.
#pragma once

#include <optional>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void delta_rule_gates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias,
                      Tensor& g, Tensor& beta);
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                      const Tensor& beta, Tensor& out);
}  // namespace cpu
namespace cuda {
void delta_rule_gates(CudaContext& c, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, Tensor& g, Tensor& beta);
void gated_delta_rule(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& g, const Tensor& beta, Tensor& out);
}  // namespace cuda

// The decay (log space) and the write strength of each token and value head, in fp32:
//   g[t, h] = -exp(a_log[h]) * softplus(a[t, h] + dt_bias[h])    (softplus(x) = x above 20)
//   beta[t, h] = sigmoid(b[t, h])
// a, b [T, H] (the in_proj_a / in_proj_b outputs); a_log, dt_bias [H]; g, beta F32 [T, H].
inline void delta_rule_gates(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& a_log,
                             const Tensor& dt_bias, Tensor& g, Tensor& beta) {
  AVDIT_OP(ctx, delta_rule_gates, a, b, a_log, dt_bias, g, beta);
}

// Per value head h (key head h / (Hv / Hk)), with q, k l2-normalised per head inside
// (x / sqrt(sum x^2 + 1e-6)) and q scaled by 1 / sqrt(dk), over t = 0..T-1 from S = 0 [dk, dv]:
//   S <- S * exp(g[t, h]);  S <- S + k_t (beta[t, h] (v_t - S^T k_t))^T;  out[t, h] = S^T q_t
// q, k [T, Hk, dk]; v [T, Hv, dv] (Hv a multiple of Hk); g, beta [T, Hv]; out [T, Hv, dv] rounded
// once to its dtype.
inline Tensor gated_delta_rule(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& g, const Tensor& beta, std::optional<DType> out = {}) {
  Tensor o = ctx.empty(v.shape(), out.value_or(v.dtype()));
  AVDIT_OP(ctx, gated_delta_rule, q, k, v, g, beta, o);
  return o;
}

}  // namespace avdit::ops
