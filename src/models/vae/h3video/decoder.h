// The MiniMax-H3 video VAE decoder (f16t4d24): latent de-normalisation, temporal chunks of the
// latent with cross-faded seams, spatial tiles with linear blending, and per tile the 1x1x1
// post_quant_conv and the ViT3DDecoder (RMSNorm blocks with per-head QK norm and 3-axis partial
// RoPE, LayerNorm, patch-to-pixel). One definition on the op set; it runs on the context it was
// opened on.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "models/vae/decoder.h"
#include "models/vae/h3video/config.h"
#include "models/vae/h3video/weights.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::h3video {

class H3VideoDecoder final : public Decoder {
 public:
  // act: the dtype of the transformer blocks' weights and linear outputs: F32 (parity) or BF16
  // (the reference's autocast region; the residual, the embedder, norm_out and proj_out stay F32).
  H3VideoDecoder(ops::Context& ctx, const Checkpoint& ckpt, const H3VideoConfig& config,
                 DType act = DType::F32);

  std::string describe() const override;
  Media media() const override { return Media::Video; }
  double rate() const override { return 24.0; }  // H3 video runs at 24 fps
  std::string output_name() const override { return "video"; }
  // latents: [1, Z, T, h, w] or [Z, T, h, w], normalised as the DiT produces them. Returns F32
  // [3, frames, 16 h, 16 w] on the host: the reference's decode_base output, i.e. ImageNet-
  // normalised pixels (the golden's `video`); pixels = clamp(x * s + m, 0, 1) with ImageNet m, s
  // (imagenet_to_unit). Not decoder.h's [-1, 1]: the fixtures' `video` is this space, so a media
  // writer must map H3 frames with imagenet_to_unit. BadInput naming `latents` for a wrong rank,
  // channel count or a value that is not finite.
  // Named points: "latent_denorm" [T h w, Z] (tokens), "clip{}.latent" [t h w, Z] per chunk, and
  // per tile decode (part = its ordinal in the call, chunk-major): "vit.post_quant_conv.out"
  // [t h w, Z], "vit.x_embedder.out" [t h w, D], "vit.block{}.out" [t h w + 5, D],
  // "vit.norm_out.out", "vit.decoded" [3, 4 t, 16 h, 16 w].
  Tensor decode(const Tensor& latents) const override;
  // The same [3, frames, 16 h, 16 w] F32 left on the context (decode() downloads it).
  Tensor decode_on_device(const Tensor& latents) const override;

  // Spatial tiles in pixels (the release: vae_tile_size 256, vae_tile_overlap_min 64); tile 0
  // decodes each chunk whole. BadInput for sizes that are not multiples of 16.
  void set_tiling(int64_t tile_px, int64_t overlap_min_px);

  const H3VideoConfig& config() const { return config_; }
  int64_t weight_bytes() const { return weight_bytes_; }

  // One tile through post_quant_conv and the ViT: rows [t h w, Z] of the de-normalised latent ->
  // [3, 4 t, 16 h, 16 w] on the context. Public for the per-block timing of bench code.
  Tensor decode_tile(const Tensor& rows, int64_t t, int64_t h, int64_t w, int64_t part) const;

 private:
  Tensor decode_chunk(const Tensor& tokens, int64_t T, int64_t H, int64_t W, int64_t t0, int64_t t1,
                      int64_t chunk, int64_t& part) const;

  // The per-shape tables on the context (tables.h), kept across calls: tiles of one decode share
  // a shape, and so do the chunks of successive decodes at one canvas.
  struct TileTables {
    Tensor cos, sin, unpatchify;
  };
  const TileTables& tables_for(int64_t t, int64_t h, int64_t w) const;

  ops::Context& ctx_;
  H3VideoConfig config_;
  DType act_;
  mutable std::map<std::array<int64_t, 3>, TileTables> tables_;
  H3VideoWeights w_;
  Tensor head_ones_;  // [dim_head] of ones in act: the per-head RMSNorm has no weight
  int64_t weight_bytes_ = 0;
};

// The ImageNet-normalised decode -> pixels in [0, 1] (processor.revert_tensor): x * s + m per
// channel, clamped; on the host.
Tensor imagenet_to_unit(const Tensor& video);

}  // namespace avdit::models::vae::h3video

namespace avdit::models::vae {

// Opens dir on ctx: the release's video_vae folder (config.json + source/config.json +
// source/model.safetensors) or a golden folder (config.json holding both configs +
// model.safetensors).
std::unique_ptr<Decoder> open_h3_video_decoder(ops::Context& ctx, const std::filesystem::path& dir,
                                               DType act = DType::F32);

}  // namespace avdit::models::vae
