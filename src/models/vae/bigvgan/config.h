// The MiniMax-H3 audio VAE (FL2VA/audio_vae) as its decoder needs it: the release's config.json
// (sample rate, latent statistics) and the BigVGAN schedule dac_audio_vae.py hard-codes for 32 kHz.
// The widths (latent_dim, decoder_dim) are read from the checkpoint's shapes, since the release
// loader does not take them from config.json either.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace avdit::models::vae::bigvgan {

struct H3AudioConfig {
  int64_t sample_rate = 32000, latent_channels = 32, output_channels = 2;
  std::vector<float> latents_mean, latents_std;  // [latent_channels]
  std::string source;                            // the file it was read from, for messages
};

// bigvgan_conf for 32 kHz (dac_audio_vae.py): resblock "1", SnakeBeta with log scale, no tanh and
// no bias at the end.
inline constexpr std::array<int64_t, 7> kUpsampleRates = {5, 5, 2, 2, 2, 2, 2};
inline constexpr std::array<int64_t, 7> kUpsampleKernels = {9, 9, 4, 4, 4, 4, 4};
inline constexpr std::array<int64_t, 3> kResblockKernels = {3, 7, 11};
inline constexpr std::array<int64_t, 3> kResblockDilations = {1, 3, 5};
inline constexpr int64_t kActivationRatio = 2;  // Activation1d's up/down ratio

// The release's config.json, or a golden's config.json that wraps it.
H3AudioConfig read_h3_audio_config(const std::filesystem::path& dir);

}  // namespace avdit::models::vae::bigvgan
