// Stable Audio Open's Oobleck decoder as MAGI-2 runs it (sa_audio_vae.py OobleckDecoder, then
// audio_decoder.py's 441/512 FFT stretch): latents [T, 64] at 25 frames/s in, stereo at 44.1 kHz
// out. Observer points carry the golden's names: after_conv_in, after_block{1..5}, waveform.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "models/vae/decoder.h"
#include "models/vae/oobleck/config.h"

namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::oobleck {

// Weights by the reference's names; weight norm folded at load.
struct SnakeWeights {
  Tensor alpha, beta;  // [C], log scale
};
struct ResidualUnitWeights {  // x + conv_k1(snake(conv_k7_dilated(snake(x))))
  int64_t dilation = 1;
  SnakeWeights act0, act2;                    // layers.0, layers.2
  Tensor conv1_w, conv1_b, conv3_w, conv3_b;  // layers.1 [C, C, 7], layers.3 [C, C, 1]
};
struct DecoderBlockWeights {
  int64_t stride = 2;
  SnakeWeights act;            // layers.0
  Tensor up_w, up_b;           // layers.1: ConvTranspose1d [in, out, 2 * stride]
  ResidualUnitWeights res[3];  // layers.2..4: dilations 1, 3, 9
};
struct OobleckWeights {
  Tensor conv_in_w, conv_in_b;              // layers.0 [16C, latent_dim, 7]
  std::vector<DecoderBlockWeights> blocks;  // layers.1..5, the deepest first
  SnakeWeights act_out;                     // layers.6
  Tensor conv_out_w;                        // layers.7 [out_channels, C, 7], no bias
};

class OobleckDecoder final : public Decoder {
 public:
  OobleckDecoder(ops::Context& ctx, const std::filesystem::path& dir);

  std::string describe() const override;
  Media media() const override { return Media::Audio; }
  double rate() const override { return static_cast<double>(config_.sample_rate); }
  std::string output_name() const override { return "waveform_44k"; }
  // latents [T, latent_dim] (time-major, as the DiT emits them) -> [out_channels, samples] at
  // sample_rate: floor(T * hop * stretch) samples.
  Tensor decode(const Tensor& latents) const override;

  // The decoder alone: [1, latent_dim, T] (de-normalised) -> [1, out_channels, T * hop] on the
  // context (the golden's `waveform`).
  Tensor waveform(const Tensor& z) const;
  // Samples at sample_rate for n decoder samples (MAGI-2's int(n * 441 / 512)).
  int64_t stretched_length(int64_t n) const;
  const OobleckConfig& config() const { return config_; }

 private:
  ops::Context& ctx_;
  OobleckConfig config_;
  OobleckWeights w_;
};

}  // namespace avdit::models::vae::oobleck

namespace avdit::models::vae {
// The Oobleck decoder of a Stable Audio Open folder (model_config.json + model.safetensors).
std::unique_ptr<Decoder> open_oobleck(ops::Context& ctx, const std::filesystem::path& dir);
}  // namespace avdit::models::vae
