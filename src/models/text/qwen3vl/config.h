// Qwen3VLTextConfig: the hyper-parameters of the Qwen3-VL language model (MiniMax-H3's text
// encoder), read from the `text_config` of the official config.json with the same field names.
// Both rope schemas are read: the release's legacy `rope_scaling` + `rope_theta`, and the newer
// `rope_parameters`.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>

namespace avdit::models::text::qwen3vl {

// MiniMax-H3 consumes the residual after this many decoder layers (diffusers'
// `text_encoder_layer = 50`, the ComfyUI port's TEXT_ENCODER_SELECTED_LAYERS): a constant of the
// pipelines, not a config field.
inline constexpr int kH3SelectedLayers = 50;

struct Qwen3VLTextConfig {
  int64_t vocab_size = 151936;
  int64_t hidden_size = 5120;
  int64_t intermediate_size = 25600;
  int64_t num_hidden_layers = 64;
  int64_t num_attention_heads = 64;
  int64_t num_key_value_heads = 8;
  int64_t head_dim = 128;
  double rope_theta = 5000000.0;
  double rms_norm_eps = 1e-6;
  // M-RoPE frequency split over (t, h, w), summing to head_dim / 2. Text rows have t = h = w, so
  // the split does not change a text-only forward; it is validated, not used.
  std::array<int64_t, 3> mrope_section = {24, 20, 20};

  int64_t q_width() const { return num_attention_heads * head_dim; }
  int64_t kv_width() const { return num_key_value_heads * head_dim; }

  // selected_layers itself, or BadInput unless it lies in [1, num_hidden_layers].
  int64_t checked_selected_layers(int64_t selected_layers) const;

  // Parses config.json (the whole file, with its text_config). BadInput naming the field when one
  // is missing, out of range or describes a model this forward does not compute (attention biases,
  // another activation or rope type).
  static Qwen3VLTextConfig from_json(const nlohmann::json& j);
};

}  // namespace avdit::models::text::qwen3vl
