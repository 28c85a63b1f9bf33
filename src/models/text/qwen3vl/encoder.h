// The MiniMax-H3 text encoder: the Qwen3-VL-32B language model run on a text-only prompt through
// its first `selected_layers` decoder layers, returning the raw residual stream after the last of
// them (no final norm): transformers' hidden_states[selected_layers], what the H3 DiT consumes.
// One definition on the op set; it runs on the context it was opened on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/text/qwen3vl/config.h"
#include "models/text/qwen3vl/weights.h"
#include "models/text/text_encoder.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::text::qwen3vl {

class Qwen3VLTextEncoder final : public TextEncoder {
 public:
  // BadInput when selected_layers is outside [1, num_hidden_layers] or a tensor those layers need
  // is missing or malformed. act: the activation dtype (F32: the parity mode; BF16: the
  // pipelines' precision).
  Qwen3VLTextEncoder(ops::Context& ctx, const Checkpoint& ckpt, const Qwen3VLTextConfig& config,
                     int64_t selected_layers, DType act);
  // Random weights made on ctx (weights.h random_weights), for full-width benchmarks.
  Qwen3VLTextEncoder(ops::Context& ctx, const Qwen3VLTextConfig& config, int64_t selected_layers,
                     DType act, uint64_t seed);

  std::string describe() const override;
  int64_t hidden_size() const override { return config_.hidden_size; }
  // Named points: "embed" (hidden_states[0]), "rope.cos" / "rope.sin" [T, head_dim], per layer i
  // "layer{i}.input_layernorm.out", "layer{i}.self_attn.{q_norm,k_norm}.out" [T, heads, head_dim]
  // (before RoPE), "layer{i}.self_attn.out", "layer{i}.post_attention_layernorm.out",
  // "layer{i}.mlp.out", "layer{i}.out" (hidden_states[i + 1]).
  Tensor encode(const std::vector<int32_t>& ids) const override;

  const Qwen3VLTextConfig& config() const { return config_; }
  int64_t selected_layers() const { return static_cast<int64_t>(w_.layers.size()); }
  int64_t weight_bytes() const { return weight_bytes_; }

 private:
  ops::Context& ctx_;
  Qwen3VLTextConfig config_;
  DType act_;
  Qwen3VLTextWeights w_;
  int64_t weight_bytes_ = 0;
};

}  // namespace avdit::models::text::qwen3vl

namespace avdit::models::text {

// Opens dir (config.json with its text_config + model.safetensors or a sharded index) on ctx.
std::unique_ptr<TextEncoder> open_qwen3vl_text(ops::Context& ctx, const std::filesystem::path& dir,
                                               int selected_layers = qwen3vl::kH3SelectedLayers,
                                               DType act = DType::F32);

}  // namespace avdit::models::text
