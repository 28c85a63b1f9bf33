// The branches of a MAGI-2 preview layer: attention (fused QKV, (1+w) norms, QK-norm, partial rotate-half RoPE,
// sinks, per-head sigmoid gate), the dense swiglu7 MLP and the multi-head MoE with shared experts.
// Activations are in the modality-sorted order of TokenLayout, except inside the attention core.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "models/magi2/config.h"
#include "models/magi2/precision.h"
#include "models/magi2/token_layout.h"
#include "models/magi2/weights.h"

namespace avdit::models::magi2 {

inline constexpr float kNormEps = 1e-6f;    // every RMSNorm of the reference
inline constexpr float kRouteNormEps = 1e-12f;  // F.normalize eps of the router weights
inline constexpr float kSwiglu7Alpha = 1.702f;
inline constexpr float kSwiglu7Limit = 7.0f;

// swiglu7 on interleaved channels (even = gate, odd = linear): u [L, 2I] -> [L, I].
Tensor swiglu7_interleaved(const Tensor& u, const Rounding& rnd = {});
// swiglu7 of separate gate / linear halves: g, l [M, I] -> [M, I].
Tensor swiglu7_split(const Tensor& g, const Tensor& l, const Rounding& rnd = {});

// The rotary table split as the reference does (rope.tensor_split(2)): sin_emb, cos_emb [L, R/2], packed order.
struct RopeTables {
  Tensor sin, cos;
};

// sinks [S, Hq] (any float dtype) -> one F32 logit per head, log(sum_s exp(sinks[s, h])): a single sink
// adding the same softmax-denominator term as the S sink tokens (both devices' attention take this form).
Tensor combined_sinks(const Tensor& sinks);

// `rnd` rounds activations to bf16 where the reference's production dtypes hold bf16 (precision.h); the default
// is the fp32 oracle.
// attn_in [L, hidden] (permuted) -> attn_out [L, hidden] (permuted).
Tensor attention_forward(const AttentionWeights& w, const Magi2Config& c, int64_t groups, const Tensor& attn_in,
                         const TokenLayout& layout, const RopeTables& rope, const std::vector<int64_t>& cu_seqlens,
                         const Rounding& rnd = {});

// mlp_in [L, hidden] -> [L, hidden].
Tensor dense_mlp_forward(const DenseMlpWeights& w, int64_t groups, const Tensor& mlp_in, const TokenLayout& layout,
                         const Rounding& rnd = {});

// The parts of a MoE layer's output, for dumps. Per-token tensors in permuted order.
struct MoeOutputs {
  Tensor split_out;     // [L, W] expert input, heads side by side
  Tensor router_logits; // [L, H_moe, E]
  Tensor topk_indices;  // [L, H_moe, K] I64, k by descending biased score
  Tensor topk_weights;  // [L, H_moe, K] incl. route_scale
  Tensor experts_out;   // [L, W]
  Tensor merge_out;     // [L, hidden]
  Tensor shared_out;    // [L, hidden]
  Tensor mlp_out;       // [L, hidden] = merge_out + shared_out
};

MoeOutputs moe_forward(const MoeWeights& w, const Magi2Config& c, const Tensor& mlp_in, const TokenLayout& layout,
                       const Rounding& rnd = {});

}  // namespace avdit::models::magi2
