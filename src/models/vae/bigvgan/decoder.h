// The MiniMax-H3 audio VAE decoder (dac_audio_vae.py DacAudioVAE.decode with the BigVGAN decoder of
// dac_bigvgan.py): latents [rows, 32, T] at 40 frames/s, each row (stereo channel) decoded alone,
// to [rows, 800 T] samples at 32 kHz. Observer points carry the golden's names: latent_denorm,
// after_dec_in_proj, after_conv_pre, stage0_after_up, stage{i}_out, after_conv_post, waveform.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "models/vae/bigvgan/config.h"
#include "models/vae/decoder.h"

namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::bigvgan {

// Activation1d(SnakeBeta): the parameters and the two kaiser-sinc filters (state-dict buffers).
struct ActivationWeights {
  Tensor alpha, beta;  // [C], log scale
  Tensor up, down;     // [1, 1, 12]
};
struct AmpBlockWeights {  // AMPBlock1: three (act, dilated conv, act, conv) residual pairs
  int64_t kernel = 3;
  Tensor convs1_w[3], convs1_b[3], convs2_w[3], convs2_b[3];  // [C, C, kernel]
  ActivationWeights acts[6];
};
struct StageWeights {
  int64_t rate = 2;
  Tensor up_w, up_b;  // ups[i][0]: ConvTranspose1d [C, C / 2, kernel]
  AmpBlockWeights blocks[3];
};
struct H3AudioWeights {
  Tensor in_proj_w, in_proj_b;    // dec_in_proj [latent_dim, 32, 1]
  Tensor conv_pre_w, conv_pre_b;  // [decoder_dim, latent_dim, 7]
  std::vector<StageWeights> stages;
  ActivationWeights act_post;
  Tensor conv_post_w;  // [1, C_last, 7], no bias
};

class H3AudioDecoder final : public Decoder {
 public:
  H3AudioDecoder(ops::Context& ctx, const std::filesystem::path& dir);

  std::string describe() const override;
  Media media() const override { return Media::Audio; }
  double rate() const override { return static_cast<double>(config_.sample_rate); }
  std::string output_name() const override { return "waveform"; }
  // latents [rows, latent_channels, T] (normalised; row i = output channel i) -> [rows, 800 T].
  Tensor decode(const Tensor& latents) const override;

 private:
  ops::Context& ctx_;
  H3AudioConfig config_;
  int64_t decoder_dim_ = 0;
  H3AudioWeights w_;
  Tensor mean_, std_, third_, one_;  // on ctx: [32], [32], [1] = 1/3, [1] = 1
};

}  // namespace avdit::models::vae::bigvgan

namespace avdit::models::vae {
// The decoder of a MiniMax-H3 audio_vae folder (config.json + model.safetensors).
std::unique_ptr<Decoder> open_h3_audio(ops::Context& ctx, const std::filesystem::path& dir);
}  // namespace avdit::models::vae
