// MAGI-2's TurboVAED (turbo_vaed.py): a distilled decoder for Wan2.2 latents (48 channels, x4 time,
// x16 space) with non-causal convolutions (edge frames replicated in time), weight-free RMSNorms,
// and the reference's sliding windows over latent frames (each window decoded whole, one latent
// frame of overlap on each side trimmed away), so memory is bounded by the window, not the clip.
// Precision: F32 (the oracle) or BF16, MAGI-2's production mode (the module cast to bf16, z in
// bf16: every op reads and writes bf16, rounding once; the RMSNorms' variance and the
// de-normalisation in float32).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/vae/decoder.h"
#include "models/vae/turbo/config.h"
#include "models/vae/wan22/blocks.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::turbo {

using wan22::Conv;

struct ResnetWeights {      // TurboVAEDResNetBlock3d
  Conv conv1, conv2;        // 3x3x3
  Conv conv_shortcut;       // 1x1x1 when in != out (after norm3), else undefined
  bool relu_first = false;  // is_upsampler_modified: ReLU instead of SiLU before conv1
};

enum class Upsampler { None, Up2d, Up3d };

struct UpBlockWeights {  // decoder.up_blocks.{i}
  bool has_conv_in = false;
  ResnetWeights conv_in;  // in -> out (SiLU first) when the width changes
  Upsampler upsampler = Upsampler::None;
  Conv time_conv;      // upsamplers.0.time_conv (C -> 2C, kernel (3, 1, 1)), Up3d only
  Conv resample_conv;  // upsamplers.0.resample.1 (Conv2d 3x3)
  std::vector<ResnetWeights> resnets;
};

struct TurboWeights {
  Conv conv_in;  // 48 -> C0
  std::vector<ResnetWeights> mid_block;
  std::vector<UpBlockWeights> up_blocks;
  Conv conv_out;  // -> 12 (3 colours x 2 x 2, unpatchified)
};

// Validates every tensor the config implies before placing any on ctx; the convolution weights
// are placed in `act`, the biases in F32.
TurboWeights load_turbo_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                const TurboVaedConfig& config, DType act = DType::F32);

class TurboVaed final : public Decoder {
 public:
  // act: F32 or BF16 (BadInput otherwise).
  TurboVaed(ops::Context& ctx, const Checkpoint& ckpt, const TurboVaedConfig& config,
            DType act = DType::F32);

  std::string describe() const override;
  Media media() const override { return Media::Video; }
  double rate() const override { return 0.0; }  // the pipeline knows MAGI-2's frame rate
  std::string output_name() const override { return "video"; }
  // latents [1, 48, T, H, W] -> video [3, 1 + 4(T-1), 16H, 16W], not clamped. Named points (the
  // golden's names; channel-last [t, h, w, C] per window i): window{i}_input,
  // window{i}_after_conv_in, window{i}_after_mid_block, window{i}_after_up_block{j},
  // window{i}_after_conv_out, and window{i}_output ([3, t, h, w], before trimming).
  Tensor decode(const Tensor& latents) const override;
  Tensor decode_frames(const Tensor& latents) const override;

  const TurboVaedConfig& config() const { return config_; }

 private:
  Tensor decode_window(const Tensor& z, bool first_chunk, int64_t window) const;

  ops::Context& ctx_;
  TurboVaedConfig config_;
  DType act_;
  TurboWeights w_;
};

}  // namespace avdit::models::vae::turbo

namespace avdit::models::vae {

// Opens dir on ctx: the architecture JSON (config.json, or the release's
// TurboV3-Wan22-TinyShallow_7_7.json) and the weights with decoder.*: the release's
// checkpoint.ckpt (PyTorch's format, read unchanged, its ema_state_dict as get_turbo_vaed picks
// it) or model.safetensors. act: F32 or BF16.
std::unique_ptr<Decoder> open_turbo_vaed(ops::Context& ctx, const std::filesystem::path& dir,
                                         DType act = DType::F32);

}  // namespace avdit::models::vae
