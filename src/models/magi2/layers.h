// The sub-layers the MAGI-2 preview DiT and the 1080p refiner share, written once against the op
// set: the per-modality (grouped) linear, the gated attention around its core (pre_norm, linear_g /
// linear_qkv, QK-norm + RoPE into packed order, core, sigmoid gate back to modality-sorted order,
// linear_proj) and the dense swiglu7 MLP. The two networks differ in the core only (the preview's
// full attention with sinks, the refiner's windowed attention), which the caller passes in.
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"
#include "models/magi2/token_layout.h"
#include "models/magi2/weights.h"
#include "ops/context.h"
#include "ops/fp8_gemms.h"

namespace avdit::models::magi2 {

// The modality-sorted row order of one packed sequence on the context: permuted row r holds packed
// token perm[r] (inv the inverse), group[r] its modality (I32 [L]); rope F32 [L, 6B] in packed
// order.
struct RowOrder {
  const TokenLayout& layout;
  const Tensor& perm;
  const Tensor& inv;
  const Tensor& group;
  const Tensor& rope;
};

// y [L, N] in `act` = x [L, in] (permuted rows) times the layer's per-modality weight: one GEMM per
// group on that group's rows (weight rows stacked [video; audio; text]), or one for groups == 1.
// fp8: the products through e4m3 (issue 39's option; null: ops::linear).
Tensor grouped_linear(ops::Context& ctx, const TokenLayout& layout, const Tensor& x,
                      const Tensor& w, int64_t groups, DType act,
                      const ops::Fp8Gemms* fp8 = nullptr);

// The attention core: q [L, Hq, D], k, v [L, Hkv, D] in packed order -> o [L, Hq, D] packed.
using AttentionCore = std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v)>;

// attn_in [L, hidden] (permuted rows, act) -> [L, hidden] (act): RMSNorm (1 + w), linear_g and
// linear_qkv per modality, the QK-norm + rotate-half RoPE prologue on dims [0, 2 rope_half), the
// core, the per-head sigmoid gate, linear_proj per modality. fp8: linear_qkv and linear_proj
// through e4m3 (linear_g, 1 output per head, stays in `act`).
Tensor gated_attention(ops::Context& ctx, const RowOrder& rows, const AttentionWeights& w,
                       int64_t groups, int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                       int64_t rope_half, DType act, const Tensor& attn_in,
                       const AttentionCore& core, const ops::Fp8Gemms* fp8 = nullptr);

// mlp_in [L, hidden] (permuted rows) -> [L, hidden] (act): RMSNorm (1 + w), up_gate_proj (rows
// interleave gate / linear), swiglu7, down_proj; per modality; fp8: both through e4m3.
Tensor dense_mlp(ops::Context& ctx, const RowOrder& rows, const DenseMlpWeights& w, int64_t groups,
                 DType act, const Tensor& mlp_in, const ops::Fp8Gemms* fp8 = nullptr);

// The post-adapter in fp32 on s [L, width] (permuted rows): RMSNorm (1 + w) with each modality's
// row of final_norm, then the video and audio rows' final linear into [L, out_channels] (a
// modality's channels beyond its linear's output, and the text rows, stay 0). Permuted rows out.
Tensor post_adapter(ops::Context& ctx, const TokenLayout& layout, const Tensor& group,
                    const Tensor& final_norm, const Tensor (&final_linear)[2], int64_t out_channels,
                    const Tensor& s);

}  // namespace avdit::models::magi2
