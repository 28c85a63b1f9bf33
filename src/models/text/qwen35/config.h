// Qwen35TextConfig: the text model of Qwen3.5 (the MAGI-2 text encoder) from the official
// config.json - its `text_config` section in the released composite layout, or the whole file in a
// text-only one - with the sizes the forward derives from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace avdit::models::text::qwen35 {

enum class LayerType { LinearAttention, FullAttention };

struct Qwen35TextConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  std::vector<LayerType> layer_types;  // one per layer
  // Gated full attention.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double rope_theta = 1e7;
  double partial_rotary_factor = 0.25;
  // Gated DeltaNet.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 4;
  double rms_norm_eps = 1e-6;

  // Dims of RoPE at the start of each head (the rest pass through), even.
  int64_t rotary_dims() const;
  // in_proj_qkv's output channels: [q | k | v] = 2 nk dk + nv dv.
  int64_t linear_conv_channels() const {
    return 2 * linear_num_key_heads * linear_key_head_dim +
           linear_num_value_heads * linear_value_head_dim;
  }
};

// BadInput naming the field when a size is missing, not positive or inconsistent (heads that do
// not divide, a layer type other than the two known ones, a RoPE that does not fit the head).
Qwen35TextConfig parse_qwen35_text_config(const nlohmann::json& config);

}  // namespace avdit::models::text::qwen35
