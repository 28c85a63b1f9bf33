// H3VideoConfig: the MiniMax-H3 video VAE decoder as its release describes it: the outer
// config.json (MiniMaxH3VideoVAE: temporal chunking and spatial tiling knobs, latent statistics)
// and source/config.json (AutoencoderKLLegacy with its vit_decoder_kwargs), same field names.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace avdit::models::vae::h3video {

struct H3VideoConfig {
  // source/config.json
  int64_t z_channels = 24;   // latent channels (embed_dim == z_channels)
  int64_t out_channels = 3;  // out_ch
  int64_t ratio = 16;        // product of space_down: pixels per latent cell
  int64_t ratio_t = 4;       // product of time_down: frames per latent frame
  int64_t heads = 32, dim_head = 64, num_layers = 36;
  int64_t num_register_tokens = 4;  // ViT3DDecoder's default (not a config field)
  double rope_dim_ratio = 0.75, rope_theta = 100.0;
  double eps = 1e-5;  // the blocks' and norm_out's (the decoder's default)
  // config.json (the wrapper): vae_*
  int64_t clip_length = 17, token_drop = 3;
  bool decoder_tiling = true;
  int64_t tile_size = 256, tile_overlap_min = 64;  // pixels (decoder_tile_* default to these)
  std::vector<float> latents_mean, latents_std;    // [z_channels]

  int64_t dim() const { return heads * dim_head; }
  // RotaryEmbeddingND's width: int(dim_head * rope_dim_ratio), rotated per head; the rest pass.
  int64_t rope_dim() const { return static_cast<int64_t>(dim_head * rope_dim_ratio); }
  int64_t patch_features() const { return out_channels * ratio_t * ratio * ratio; }

  // Parses both files. BadInput naming the field when one is missing, out of range, or describes
  // a decoder this forward does not compute (CNN decoder, causal ViT, LayerNorm blocks, isolated
  // first/last frames, ...).
  static H3VideoConfig from_json(const nlohmann::json& outer, const nlohmann::json& source);
};

}  // namespace avdit::models::vae::h3video
