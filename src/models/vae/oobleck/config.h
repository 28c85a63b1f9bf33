// The Oobleck decoder of Stable Audio Open as MAGI-2 configures it: the `model.pretransform.config`
// of the release's model_config.json, and the pipeline constants MAGI-2 decodes audio with.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace avdit::models::vae::oobleck {

struct OobleckConfig {
  int64_t channels = 128, latent_dim = 64, out_channels = 2;
  std::vector<int64_t> c_mults = {1, 2, 4, 8, 16}, strides = {2, 4, 4, 8, 8};
  bool final_tanh = false;
  int64_t sample_rate = 44100;  // what MAGI-2 writes (audio_vae.sample_rate)
  std::string source;           // the file it was read from, for messages

  // Samples per latent frame: the product of the strides (2048).
  int64_t hop() const;
};

// MAGI-2's audio constants (inference/pipeline): latents at 25 frames/s, de-normalised with
// SA_RESCALE_MEAN / SA_RESCALE_STD, then stretched from 25 * hop samples per second onto
// sample_rate (441/512 for the release).
inline constexpr double kAudioLatentFps = 25.0;
inline constexpr float kRescaleMean = 0.0f, kRescaleStd = 1.0f;

// Whether `dir` holds an Oobleck VAE: a model_config.json whose pretransform is an autoencoder
// with an oobleck decoder (the release), or a golden's config.json that wraps one.
bool is_oobleck_folder(const std::filesystem::path& dir);
// BadInput naming the file and the field when a value is missing or not supported.
OobleckConfig read_oobleck_config(const std::filesystem::path& dir);

}  // namespace avdit::models::vae::oobleck
