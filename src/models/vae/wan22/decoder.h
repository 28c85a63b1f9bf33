// The Wan2.2 VAE decoder (vae2_2.py: WanVAE_.decode, Decoder3d): z48 latents -> video, x4 time,
// x16 space. The architecture is read from the checkpoint's tensor shapes (widths, blocks per
// stage, which stages upsample in time), so the tiny golden and the release load through the same
// code; config.json's WanVAE_kwargs, where present, must agree. Runs latent frame by latent frame
// with the causal feature cache, as the reference does, so memory does not grow with the clip.
// Precision: F32 (the oracle; both references decode in float32) or BF16 (the reference under
// bf16 autocast, the goldens' bf16 run: see blocks.h).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/vae/decoder.h"
#include "models/vae/wan22/blocks.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::wan22 {

enum class Resample { None, Up2d, Up3d };

struct UpStageWeights {  // decoder.upsamples.{i} (UpResidualBlock)
  int64_t in = 0, out = 0;
  std::vector<ResidualBlockWeights> blocks;
  Resample resample = Resample::None;
  Conv resample_conv;  // upsamples.{n}.resample.1 (Conv2d 3x3)
  Conv time_conv;      // upsamples.{n}.time_conv (C -> 2C, kernel (3, 1, 1)), Up3d only
};

struct DecoderWeights {
  Conv conv2;  // WanVAE_.conv2 (48 -> 48, kernel 1)
  Conv conv1;  // decoder.conv1 (48 -> C0, 3x3x3 causal)
  ResidualBlockWeights middle0, middle2;
  AttentionBlockWeights middle1;
  std::vector<UpStageWeights> upsamples;
  Tensor head_gamma;  // decoder.head.0
  Conv head;          // decoder.head.2 (-> 12 = 3 colours x 2 x 2)
};

// Validates every tensor before placing any on ctx (BadInput naming the file and the tensor); the
// convolution and attention weights are placed in `act`, biases and gammas in F32.
DecoderWeights load_decoder_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                    DType act = DType::F32);

class Wan22Decoder final : public Decoder {
 public:
  // frames_per_call: latent frames per decoder call after the first (which is always one frame,
  // as the reference needs); 1 is the reference's schedule, larger is the same up to rounding.
  // act: F32 or BF16 (BadInput otherwise).
  Wan22Decoder(ops::Context& ctx, const Checkpoint& ckpt, int64_t frames_per_call = 1,
               DType act = DType::F32);

  std::string describe() const override;
  Media media() const override { return Media::Video; }
  double rate() const override { return 24.0; }  // Wan2.2's sample_fps
  std::string output_name() const override { return "video"; }
  // latents [1, 48, T, H, W] -> video [3, 1 + 4(T-1), 16H, 16W], not clamped. Named points (the
  // golden's names, channel-last [T, H, W, C], whole clip): latent_denorm, after_conv2,
  // after_decoder_conv1, after_middle, after_up{i}.
  Tensor decode(const Tensor& latents) const override;
  Tensor decode_frames(const Tensor& latents) const override;

  const DecoderWeights& weights() const { return w_; }

 private:
  ops::Context& ctx_;
  DType act_;
  DecoderWeights w_;
  int64_t frames_per_call_;
};

}  // namespace avdit::models::vae::wan22

namespace avdit::models::vae {

// Opens dir on ctx: the release's folder (Wan2.2_VAE.pth, PyTorch's format, read unchanged) or a
// safetensors checkpoint with conv2.* and decoder.* (config.json optional). act: F32 or BF16.
std::unique_ptr<Decoder> open_wan22_decoder(ops::Context& ctx, const std::filesystem::path& dir,
                                            DType act = DType::F32);

}  // namespace avdit::models::vae
