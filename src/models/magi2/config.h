// Magi2Config: the MAGI-2 preview DiT configuration, parsed from the official JSON schema
// (arch_config, arch_config.moe_config, evaluation_config.data_proxy_config) plus every size
// derived from it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace avdit::models::magi2 {

// Modality ids as the reference's data proxy writes them (Modality enum); kTime is remapped to
// text.
enum Modality : int32_t { kVideo = 0, kAudio = 1, kText = 2, kTime = 3 };
inline constexpr int kNumModalities = 3;

struct Magi2MoEConfig {
  int64_t num_experts = 256;
  int64_t top_k = 6;
  std::string score_func = "sigmoid";  // "sigmoid" or "softmax"
  bool route_norm = true;
  double route_scale = 4.9;
  std::vector<int64_t> moe_layers;
  int64_t expert_intermediate_size = 1280;
  int64_t shared_expert_intermediate_size = 1280;
  int64_t modality_specific_expert_intermediate_size = 1280;
  int64_t num_heads = 12;
  std::optional<int64_t> split_merge_intermediate_size;
};

struct Magi2DataProxyConfig {
  int64_t t_patch_size = 1;
  int64_t patch_size = 1;
  std::string spatial_rope_interpolation =
      "extra";  // "extra": rope reference = the latent grid; "inter": 32x32
  bool add_time_token = false;
  int64_t time_channel_dim = 64;
};

struct Magi2Config {
  // arch_config, as stated.
  int64_t num_layers = 40;
  int64_t hidden_size = 3072;
  int64_t head_dim = 128;
  int64_t num_query_groups = 24;
  int64_t video_in_channels = 48;
  int64_t audio_in_channels = 64;
  int64_t text_in_channels = 5120;
  DType params_dtype = DType::BF16;
  double intermediate_factor = 4;
  std::vector<int64_t> mm_layers;
  std::string activation_type = "swiglu7";
  double attn_softcap = -1.0;
  bool attn_gating = true;
  bool attn_sinks = true;
  int64_t sink_token_num = 1;
  bool mhc_enable = true;
  int64_t mhc_num_stream = 4;
  double mhc_alpha_init = 0.01;
  Magi2MoEConfig moe;
  Magi2DataProxyConfig data_proxy;
  // The checkpoint's evaluation_config as stated (an empty object when absent): the sampler's
  // defaults (pipeline::magi2_sampler_defaults) come from it; the model reads data_proxy only.
  nlohmann::json evaluation_config = nlohmann::json::object();

  // Derived exactly as the reference derives them.
  int64_t num_heads_q = 0;     // hidden_size / head_dim
  int64_t num_heads_kv = 0;    // num_query_groups
  int64_t residual_width = 0;  // mhc_num_stream * hidden_size (the adapter width)
  int64_t dense_intermediate =
      0;                        // floor(int(hidden * factor * 2/3) / 128) * 128 (swiglu7 is gated)
  int64_t moe_width = 0;        // split_merge_intermediate_size or hidden_size
  int64_t moe_head_dim = 0;     // moe_width / moe.num_heads
  int64_t rope_bands = 0;       // head_dim / 8 frequency bands per axis
  int64_t rope_dim = 0;         // 6 * rope_bands rotated dims of each head
  int64_t max_in_channels = 0;  // max(video, audio, text) in channels: packed row width
  int64_t out_channels = 0;     // max(video, audio) in channels: model_output width

  // Number of modality weight groups of a layer's attention / dense MLP / mhc_norm (3 in mm_layers,
  // else 1).
  int64_t groups(int64_t layer) const;
  bool is_moe_layer(int64_t layer) const;
  bool is_mm_layer(int64_t layer) const;
};

// True when the JSON has the MAGI-2 preview schema (an arch_config with moe_config / mhc_config).
bool is_magi2_config(const nlohmann::json& config);

// Parses and validates; BadInput names the offending field. Absent fields take the reference's
// defaults.
Magi2Config parse_magi2_config(const nlohmann::json& config);

}  // namespace avdit::models::magi2
