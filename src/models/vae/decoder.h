// A latent decoder as the pipelines use it: the DiT's latents in, pixels or samples out. Five
// families implement it (Wan2.2 VAE, MAGI-2 TurboVAED, Stable Audio Open Oobleck, MiniMax-H3 video
// ViT VAE, MiniMax-H3 audio DAC/BigVGAN); each is one definition on the op set, so the same object
// runs on the CPU or the GPU context it was opened on, and each applies its pipeline's latent
// de-normalisation itself.
#pragma once

#include <string>

#include "core/tensor.h"

namespace avdit::models::vae {

enum class Media { Video, Audio };

class Decoder {
 public:
  virtual ~Decoder() = default;
  // What runs, for messages ("Wan2.2 VAE decoder, z48").
  virtual std::string describe() const = 0;
  virtual Media media() const = 0;
  // Audio: the output's sample rate in Hz; video: the frame rate the pipeline writes (0: unknown).
  virtual double rate() const = 0;
  // The golden fixtures' name of the final output ("video", "waveform", "waveform_44k", ...).
  virtual std::string output_name() const = 0;
  // latents: the DiT's output as the golden's inputs give it (shape as its README states).
  // Returns F32 on the host: video [3, T, H, W] in [-1, 1]; audio [channels, samples].
  virtual Tensor decode(const Tensor& latents) const = 0;
  // Video: the decoded frames [T, H, W, 3] (channel-last RGB in [-1, 1], the decoder's activation
  // dtype) left where the decoder runs (device memory on a GPU context): what a library decoder
  // returns, and all a caller that encodes frames or times the decode needs; decode() is these
  // brought to the host as [3, T, H, W] F32. BadInput from decoders without it (audio, H3 video).
  virtual Tensor decode_frames(const Tensor& latents) const;
  // decode()'s tensor (same shape, dtype and values) left where the decoder runs: what a caller
  // that keeps working on the device or times the decode against a library's needs. BadInput from
  // decoders without it (all but the H3 video decoder, whose output space differs from frames').
  virtual Tensor decode_on_device(const Tensor& latents) const;
};

}  // namespace avdit::models::vae
