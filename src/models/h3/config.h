// H3Config: the MiniMax-H3 transformer hyper-parameters, read from the official
// transformer/config.json (same field names), plus detection of the adaLN curve-table variant.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace avdit {
class Checkpoint;
}

namespace avdit::models::h3 {

// Constants of the reference that are not config fields.
inline constexpr int64_t kModalities = 3;         // adaLN rows per timestep: video, text, audio
inline constexpr int64_t kAdalnSlices = 6;        // shift/scale/gate for attention and MLP
inline constexpr int64_t kAudioChannels = 2;      // stereo audio latents
inline constexpr int64_t kPackedAlignment = 64;   // packed sequence length is a multiple of this
inline constexpr double kFrameRescale = 5.0 / 3.0;  // RoPE time units per latent-frame span
inline constexpr double kSpatialInterp = 32.0;    // RoPE spatial grid scale
inline constexpr float kVisualCondTimestep = 0.999f;  // floor of keyframe-condition timesteps
inline constexpr double kRopeBase = 10000.0;

struct H3Config {
  int64_t hidden_size = 5376;
  int64_t num_layers = 50;
  int64_t token_refiner_num_layers = 2;
  int64_t num_attention_heads = 56;
  int64_t attention_head_dim = 128;
  int64_t ffn_hidden_size = 14336;
  int64_t latents_dim = 24;
  int64_t audio_latents_dim = 32;
  std::array<int64_t, 3> patch_size = {1, 2, 2};
  int64_t text_dim = 5120;
  int64_t timestep_input_dim = 256;
  int64_t time_embed_hidden_size = 5376;
  int64_t time_embed_dim = 2688;  // curve variant: the curve-basis rank k
  int64_t adaln_out_features = 96768;
  int64_t final_adaln_out_features = 10752;
  int64_t rope_inv_freq_len = 16;
  double norm_eps = 1e-5;
  double qk_norm_eps = 1e-5;
  double final_norm_eps = 1e-5;
  // Curve-table variant: rows of `adaln_t_table` [grid, time_embed_dim]; 0 = full variant
  // (time_embedder present). Optional config field of the reference, else detected from weights.
  int64_t adaln_curve_grid = 0;

  bool curve_variant() const { return adaln_curve_grid > 0; }
  int64_t inner_dim() const { return num_attention_heads * attention_head_dim; }
  int64_t video_patch_dim() const {
    return latents_dim * patch_size[0] * patch_size[1] * patch_size[2];
  }
  int64_t rope_dim() const { return 6 * rope_inv_freq_len; }  // rotated dims of each head

  // Parses the official transformer/config.json; BadInput naming the field when one is
  // missing or inconsistent (e.g. adaln_out_features != 18 * hidden_size).
  static H3Config from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// True when the JSON is a MiniMax-H3 transformer config (by _class_name, else by its fields).
bool is_h3_config(const nlohmann::json& j);

// Returns the config with the curve-table variant resolved from the weights: when the checkpoint
// holds `adaln_t_table` [grid, k], sets adaln_curve_grid = grid and time_embed_dim = k.
H3Config resolve_variant(H3Config config, const Checkpoint& ckpt);

}  // namespace avdit::models::h3
