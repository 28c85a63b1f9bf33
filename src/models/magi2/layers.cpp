// The shared MAGI-2 sub-layers (see layers.h), in the reference's order of operations and
// rounding points.
#include "models/magi2/layers.h"

#include <cmath>

#include "core/error.h"
#include "models/magi2/model.h"
#include "ops/activation.h"
#include "ops/attention_prologue.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::models::magi2 {

Tensor grouped_linear(ops::Context& ctx, const TokenLayout& layout, const Tensor& x,
                      const Tensor& w, int64_t groups, DType act, const ops::Fp8Gemms* fp8) {
  AVDIT_CHECK(w.size(0) % groups == 0, "magi2: weight {} for {} groups", w.shape_str(), groups);
  const int64_t L = x.size(0), N = w.size(0) / groups;
  Tensor y = ctx.empty({L, N}, act);
  auto product = [&](const Tensor& xm, const Tensor& wm, Tensor& ym) {
    if (fp8)
      fp8->linear_into(ctx, xm, wm, ym);
    else
      ops::linear_into(ctx, xm, wm, nullptr, ym);
  };
  if (groups == 1) {
    product(x, w, y);
    return y;
  }
  for (int64_t m = 0; m < groups; ++m) {
    const int64_t b = layout.begin[m], n = layout.size[m];
    if (n == 0) continue;
    Tensor ym = y.slice_rows(b, b + n);
    product(x.slice_rows(b, b + n), w.slice_rows(m * N, (m + 1) * N), ym);
  }
  return y;
}

Tensor gated_attention(ops::Context& ctx, const RowOrder& rows, const AttentionWeights& w,
                       int64_t groups, int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                       int64_t rope_half, DType act, const Tensor& attn_in,
                       const AttentionCore& core, const ops::Fp8Gemms* fp8) {
  const int64_t L = attn_in.size(0), Hq = heads_q, Hkv = heads_kv, D = head_dim;
  const Tensor* grp = groups > 1 ? &rows.group : nullptr;
  const Tensor a =
      ops::rms_norm(ctx, attn_in, ops::RmsNormWeight{w.pre_norm, true, grp}, kNormEps, act);
  const Tensor g = grouped_linear(ctx, rows.layout, a, w.linear_g, groups, act);  // [L, Hq]
  // [L, (Hq + 2 Hkv) D]: q | k | v, head-major.
  const Tensor qkv = grouped_linear(ctx, rows.layout, a, w.linear_qkv, groups, act, fp8);
  // q and k stay fp32 through the norm and RoPE in the reference (out_dtype=float32) and meet the
  // kernel in the activation dtype: the prologue rounds once, at its store.
  Tensor q = ctx.empty({L, Hq, D}, act), k = ctx.empty({L, Hkv, D}, act),
         v = ctx.empty({L, Hkv, D}, act);
  ops::qkv_prologue(ctx, qkv, w.q_norm, w.k_norm, grp, rows.inv, rows.rope, rope_half, q, k, v);
  const Tensor o = core(q, k, v);  // [L, Hq, D] packed
  Tensor gated = ctx.empty({L, Hq * D}, act);
  ops::gate_unpermute(ctx, o, g, rows.perm, gated);
  return grouped_linear(ctx, rows.layout, gated, w.linear_proj, groups, act, fp8);
}

Tensor dense_mlp(ops::Context& ctx, const RowOrder& rows, const DenseMlpWeights& w, int64_t groups,
                 DType act, const Tensor& mlp_in, const ops::Fp8Gemms* fp8) {
  const Tensor a = ops::rms_norm(
      ctx, mlp_in, ops::RmsNormWeight{w.pre_norm, true, groups > 1 ? &rows.group : nullptr},
      kNormEps, act);
  const Tensor u = grouped_linear(ctx, rows.layout, a, w.up_gate_proj, groups, act, fp8);  // [L, 2I]
  return grouped_linear(ctx, rows.layout, ops::gated(ctx, ops::Gated::Swiglu7Interleaved, u),
                        w.down_proj, groups, act, fp8);
}

Tensor post_adapter(ops::Context& ctx, const TokenLayout& layout, const Tensor& group,
                    const Tensor& final_norm, const Tensor (&final_linear)[2], int64_t out_channels,
                    const Tensor& s) {
  const Tensor yn =
      ops::rms_norm(ctx, s, ops::RmsNormWeight{final_norm, true, &group}, kNormEps, DType::F32);
  Tensor out = ctx.zeros({layout.tokens(), out_channels}, DType::F32);
  for (int m = 0; m < 2; ++m) {
    const int64_t b = layout.begin[m], n = layout.size[m];
    if (n == 0) continue;
    const Tensor y = ops::linear(ctx, yn.slice_rows(b, b + n), final_linear[m], nullptr, DType::F32);
    Tensor rows = out.slice_rows(b, b + n);
    ops::copy_columns(ctx, y, 0, rows, 0, final_linear[m].size(0));
  }
  return out;
}

}  // namespace avdit::models::magi2
