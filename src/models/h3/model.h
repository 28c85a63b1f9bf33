// H3Model: the MiniMax-H3 DiT forward on the CPU backend in float32 — token refiner, patch
// projections, time embedding, per-block adaLN, 3D-RoPE attention blocks, final layer and heads —
// on a packed sequence (packing.h). Weights stay memory-mapped in their stored dtypes.
#pragma once

#include "core/tensor.h"
#include "models/h3/config.h"
#include "models/h3/packing.h"
#include "models/h3/precision.h"
#include "models/h3/weights.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::h3 {

struct PackedOutput {
  Tensor video_out;  // [n_img, 96]: video head at img_pos rows, keyframe rows zeroed
  Tensor audio_out;  // [2 T_a, 32]: audio head at audio_pos rows
};

// What a sampler needs from an H3 forward, whatever runs it: the CPU H3Model below, or the GPU model
// of the CUDA backend (which the app plugs in for --device cuda).
// Both record the fixture's intermediates into `dump` when it is not null.
class H3Forward {
 public:
  virtual ~H3Forward() = default;
  virtual const H3Config& config() const = 0;
  virtual Tensor refine_text(const Tensor& text_embeds, TensorMap* dump) const = 0;
  virtual PackedOutput forward(const PackedLayout& layout, const PackedTimesteps& timesteps,
                               const Tensor& text_refined, const Tensor& video_rows,
                               const Tensor& audio_rows, TensorMap* dump) const = 0;
  Tensor refine_text(const Tensor& text_embeds) const { return refine_text(text_embeds, nullptr); }
  PackedOutput forward(const PackedLayout& layout, const PackedTimesteps& timesteps,
                       const Tensor& text_refined, const Tensor& video_rows,
                       const Tensor& audio_rows) const {
    return forward(layout, timesteps, text_refined, video_rows, audio_rows, nullptr);
  }
};

class H3Model : public H3Forward {
 public:
  // Config from the checkpoint's config.json (BadInput when absent), variant from the weights.
  explicit H3Model(const Checkpoint& ckpt);
  H3Model(const Checkpoint& ckpt, const H3Config& config);

  const H3Config& config() const override { return config_; }
  const H3Weights& weights() const { return weights_; }

  // Emulated bf16 production precision (precision.h): activations rounded to bf16 where the
  // reference's bf16 model keeps them, fp32 islands unchanged. Default off: the fp32 oracle.
  void set_bf16_activations(bool on) { rnd_.bf16 = on; }
  bool bf16_activations() const { return rnd_.bf16; }

  // text_embeds [L, text_dim] -> text_refined [L, H]: condition_proj, the refiner blocks
  // (attention over the text rows only, no RoPE, no adaLN), token_refiner.final_norm.
  // Depends only on the prompt, so a sampler calls it once. Dumps text_projected,
  // refiner_block{r}, text_refined.
  using H3Forward::forward;
  using H3Forward::refine_text;
  Tensor refine_text(const Tensor& text_embeds, TensorMap* dump) const override;

  // One forward on the packed sequence. video_rows [n_img, 96] in img_pos order (keyframe rows
  // first), audio_rows [2 T_a, 32], text_refined [L, H]. Outputs are data-ward velocities:
  // x0 = x_t + sigma v. With `dump`, also stores the fixture's intermediates (hidden_embed,
  // t_emb, adaln_input, rope_cos_sin_cache, block0_*, hidden_block{i}, final_*).
  PackedOutput forward(const PackedLayout& layout, const PackedTimesteps& timesteps,
                       const Tensor& text_refined, const Tensor& video_rows,
                       const Tensor& audio_rows, TensorMap* dump) const override;

 private:
  H3Config config_;
  H3Weights weights_;
  Rounding rnd_;
};

}  // namespace avdit::models::h3
