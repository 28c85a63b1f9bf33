// The Wan2.2 VAE encoder (vae2_2.py: WanVAE_.encode, Encoder3d), MAGI-2's image-to-video path:
// pixels [1, 3, T, H, W] in [-1, 1] -> normalised latents [1, 48, 1 + (T-1)/4, H/16, W/16]. Runs
// the reference's calls (1 frame, then 4 per call) with the causal feature cache; the
// architecture is read from the checkpoint's tensors. Precision: F32 (MAGI-2 encodes in float32)
// or BF16 (the reference under bf16 autocast, the golden's bf16 run: see blocks.h).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/vae/wan22/blocks.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::wan22 {

struct DownStageWeights {  // encoder.downsamples.{i} (DownResidualBlock)
  int64_t in = 0, out = 0;
  std::vector<ResidualBlockWeights> blocks;
  bool down = false;      // Resample downsample2d / 3d after the blocks, AvgDown3D x2 in space
  bool temporal = false;  // downsample3d: time_conv halves the frames, AvgDown3D x2 in time
  Conv resample_conv;     // downsamples.{n}.resample.1 (Conv2d 3x3, stride 2)
  Conv time_conv;         // downsamples.{n}.time_conv (kernel (3, 1, 1), stride 2, no padding)
};

struct EncoderWeights {
  Conv conv1;  // encoder.conv1 (12 -> C0, 3x3x3 causal)
  std::vector<DownStageWeights> downsamples;
  ResidualBlockWeights middle0, middle2;
  AttentionBlockWeights middle1;
  Tensor head_gamma;  // encoder.head.0
  Conv head;          // encoder.head.2 (-> 96: mu and log_var)
  Conv quant;         // WanVAE_.conv1 (96 -> 96, kernel 1)
};

// The convolution and attention weights are placed in `act`, biases and gammas in F32.
EncoderWeights load_encoder_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                    DType act = DType::F32);

class Wan22Encoder {
 public:
  // act: F32 or BF16 (BadInput otherwise).
  Wan22Encoder(ops::Context& ctx, const Checkpoint& ckpt, DType act = DType::F32);

  std::string describe() const;
  // video [1, 3, T, H, W] (H, W multiples of 16) -> (mu - mean) / std as [1, 48, 1 + (T-1)/4,
  // H/16, W/16]; frames past 1 + 4*floor((T-1)/4) are not encoded (the reference drops them).
  // Named points (channel-last, whole clip): after_enc_conv1, after_down{i}, after_middle,
  // after_head, mu.
  Tensor encode(const Tensor& video) const;

  // MAGI-2's pixels -> video step: u8 / 255, 2x - 1 in fp32, rounded to bf16 (its engine's dtype)
  // and widened back. pixels U8 [1, 3, T, H, W].
  static Tensor preprocess(const Tensor& pixels_u8);

 private:
  ops::Context& ctx_;
  DType act_;
  EncoderWeights w_;
};

// Opens dir on ctx: the release's folder (Wan2.2_VAE.pth, PyTorch's format, read unchanged) or a
// safetensors checkpoint with encoder.* and conv1.*. act: F32 or BF16.
std::unique_ptr<Wan22Encoder> open_wan22_encoder(ops::Context& ctx,
                                                 const std::filesystem::path& dir,
                                                 DType act = DType::F32);

}  // namespace avdit::models::vae::wan22
