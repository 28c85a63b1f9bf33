// The MAGI-2 text encoder: Qwen3.5's text model (Gated DeltaNet and gated full attention layers)
// run up to the hidden state MAGI-2 consumes, hidden_states[-(skip_layers + 1)] - the raw residual
// after L - skip_layers decoder layers (skip_layers 2, as the reference's engine).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "models/text/qwen35/config.h"
#include "models/text/qwen35/weights.h"
#include "models/text/text_encoder.h"
#include "ops/attention.h"

namespace avdit::models::text::qwen35 {

// One forward on the op set. Named points (the fixture's intermediate names): "embed", "rope"
// ([T, R] = [sin | cos] halves), "layer{}.{input_layernorm,linear_attn,self_attn,
// post_attention_layernorm,mlp}.out", "layer{}.linear_attn.delta_rule.{query,key,value,g,beta,
// out}" (query / key before the head expansion), "layer{}.self_attn.{q_norm,k_norm}.out" and
// "layer{}.out" (hidden_states[i + 1]).
class Qwen35TextEncoder final : public TextEncoder {
 public:
  // weights hold the layers that run: layers 0..weights.layers.size() - 1. act: the GEMMs' input
  // dtype, F32 (parity) or BF16 (the pipeline's precision); everything else runs in F32.
  Qwen35TextEncoder(ops::Context& ctx, Qwen35TextConfig config, Qwen35TextWeights weights,
                    std::string source, DType act = DType::F32);
  std::string describe() const override;
  int64_t hidden_size() const override { return config_.hidden_size; }
  Tensor encode(const std::vector<int32_t>& ids) const override;

  const Qwen35TextConfig& config() const { return config_; }
  int64_t layers_run() const { return static_cast<int64_t>(w_.layers.size()); }

 private:
  Tensor linear_attention(const LayerWeights& l, int64_t i, const Tensor& y) const;
  // What every gated attention layer of one encode shares: the RoPE table, the identity row order
  // of the prologue and the causal plan of the one document.
  struct AttentionPlan {
    Tensor rope, identity;
    ops::Segments seg;
  };
  AttentionPlan plan_attention(int64_t tokens) const;
  Tensor full_attention(const LayerWeights& l, int64_t i, const Tensor& y,
                        const AttentionPlan& plan) const;
  Tensor mlp(const LayerWeights& l, const Tensor& y) const;
  Tensor gemm_input(const Tensor& x) const;  // x rounded to act_ (itself when F32)

  ops::Context& ctx_;
  Qwen35TextConfig config_;
  Qwen35TextWeights w_;
  std::string source_;
  DType act_;
};

// The RoPE table of positions 0..T-1: F32 [T, R] = [sin | cos] of pos * inv_freq_j, j < R / 2,
// inv_freq_j = theta^(-2j / R) (R = rotary_dims()), in float32 as the reference computes it.
Tensor qwen35_rope_table(const Qwen35TextConfig& config, int64_t tokens);

}  // namespace avdit::models::text::qwen35

namespace avdit::models::text {

// Opens the text encoder in `dir` (config.json + safetensors, single or sharded) on ctx, reading
// only the embedding and layers 0..L - skip_layers - 1. skip_layers >= 1 (0 would be the
// final-normed state, which MAGI-2 never consumes). act as the constructor's.
std::unique_ptr<TextEncoder> open_qwen35_text(ops::Context& ctx, const std::filesystem::path& dir,
                                              int skip_layers = 2, DType act = DType::F32);

}  // namespace avdit::models::text
