// RefinerConfig: the MAGI-2 1080p refiner's architecture (magi2_refiner_arch_config), its data
// proxy's window (evaluation_config.magi2_refiner_data_proxy_config) and its sampler settings
// (evaluation_config.magi2_refiner_*), parsed from the official JSON after the "extends" merge of
// the reference's load_config (configs/magi2_refiner.json extends magi2_preview.json).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::magi2::refiner {

// attn_config of the data proxy: window attention over blocks of (block_t, block_h, block_w)
// latent tokens, each video block seeing the blocks within (radius_t, radius_h, radius_w) and the
// whole tail. Only level "block" with block_mode "grid" (the shipping refiner) is implemented.
struct WindowConfig {
  int64_t block_t = 1, block_h = 1, block_w = 1;     // block_t_size, block_size (h and w)
  int64_t radius_t = 1, radius_h = 1, radius_w = 1;  // block_{t,h,w}_radius
  bool auto_range_merge = false;  // MagiAttention scheduling options, recorded as passed
  bool sparse_load = false;
};

struct RefinerDataProxyConfig {
  int64_t t_patch_size = 1;
  int64_t patch_size = 1;
  std::string spatial_rope_interpolation = "extra";  // "extra": the latent grid; "inter": 32x32
  std::string coords_style = "v1";
  WindowConfig window;
};

// evaluation_config's refiner keys (and the preview keys the refiner sampler falls back to).
struct RefinerSamplerConfig {
  int64_t num_inference_steps = 5;
  double shift = 5.0;  // magi2_refiner_shift, or evaluation_config.shift when null
  float video_guidance = 2.0f;
  float audio_guidance = 5.0f;
  int64_t noise_value = 220;            // index into the ZeroSNR DDPM table (0: no re-noise)
  int64_t vae_stride[3] = {4, 16, 16};  // refiner pixels per latent (t, h, w)
  double audio_noise_scale = -1.0;      // < 0: no audio tokens in the refiner
  bool use_cfg_trick = false;           // the preview's per-frame guidance trick, shared
  int64_t cfg_trick_start_frame = 13;
  float cfg_trick_value = 2.0f;
};

struct RefinerConfig {
  // magi2_refiner_arch_config, as stated (defaults: Magi2RefinerModelConfig).
  int64_t num_layers = 30;
  int64_t hidden_size = 4096;
  int64_t head_dim = 128;
  int64_t num_query_groups = 8;
  int64_t video_in_channels = 48;
  int64_t audio_in_channels = 64;
  int64_t text_in_channels = 5120;
  DType params_dtype = DType::BF16;
  std::vector<int64_t> mm_layers = {0, 1, 28, 29};
  std::vector<int64_t> local_attn_layers;  // default 0..29; other layers attend to everything
  bool enable_attn_gating = true;
  std::string activation_type = "swiglu7";
  RefinerDataProxyConfig data_proxy;
  RefinerSamplerConfig sampler;

  // Derived as the reference derives them.
  int64_t num_heads_q = 0;      // hidden_size / head_dim
  int64_t num_heads_kv = 0;     // num_query_groups
  int64_t intermediate = 0;     // int(hidden * 4 * 2 / 3) // 4 * 4 (swiglu7 is gated)
  int64_t rope_bands = 0;       // head_dim / 8
  int64_t rope_dim = 0;         // 6 * rope_bands rotated dims of each head
  int64_t max_in_channels = 0;  // packed row width
  int64_t out_channels = 0;     // model_output width: max(video, audio)

  int64_t groups(int64_t layer) const;  // 3 in mm_layers, else 1
  bool is_local_layer(int64_t layer) const;
};

// The JSON with every "extends" resolved as the reference's _read_config_json: the named file
// (relative to `dir`) is read first and this object merged over it, nested objects key by key.
// BadInput on a missing base file or more than 8 levels.
nlohmann::json resolve_extends(nlohmann::json config, const std::filesystem::path& dir);
// read_json + resolve_extends relative to the file's folder.
nlohmann::json read_config_with_extends(const std::filesystem::path& file);

// True when the JSON carries magi2_refiner_arch_config.
bool is_refiner_config(const nlohmann::json& config);

// Parses a merged config; BadInput names the field. Absent fields take the reference's defaults.
RefinerConfig parse_refiner_config(const nlohmann::json& config);

// A refiner config file ("extends" resolved relative to its folder) parsed; BadInput names the
// file. `merged`, when given, receives the merged JSON (the preview's fields a caller sizes by).
RefinerConfig read_refiner_config(const std::filesystem::path& file,
                                  nlohmann::json* merged = nullptr);

// The checkpoint folder's config.json, "extends" resolved relative to the folder, parsed.
RefinerConfig refiner_config_from_checkpoint(const Checkpoint& ckpt);

}  // namespace avdit::models::magi2::refiner
