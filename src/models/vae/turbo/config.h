// TurboVaedConfig: MAGI-2's TurboVAED hyper-parameters under the reference's names (its
// TurboVAED.__init__ keywords), read from the architecture JSON that ships with the checkpoint
// (a flat object) or from a golden's config.json (the same object under "config").
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace avdit::models::vae::turbo {

struct TurboVaedConfig {
  int64_t latent_channels = 48;
  int64_t out_channels = 3;
  // Encoder-side order, as in the file; the decoder walks them reversed.
  std::vector<int64_t> decoder_block_out_channels = {64, 128, 256, 512};
  std::vector<int64_t> decoder_layers_per_block = {2, 2, 2, 3, 3};
  std::vector<bool> decoder_spatio_temporal_scaling = {false, true, true, true};
  std::vector<bool> decoder_spatio_only = {false, true, false, false};
  int64_t patch_size = 2;
  double resnet_norm_eps = 1e-6;
  int64_t first_chunk_size = 7;
  int64_t step_size = 7;
  int64_t temporal_compression_ratio = 4;

  // BadInput naming the field when one is malformed or describes a decoder this forward does not
  // compute (causal convolutions, depthwise convolutions, no unpatchify, another patch size).
  static TurboVaedConfig from_json(const nlohmann::json& j);
};

}  // namespace avdit::models::vae::turbo
