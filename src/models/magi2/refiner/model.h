// RefinerModel: the MAGI-2 1080p refiner's forward (inference/model/magi2_refiner.py Transformer),
// written once against the op set for any context: the modality embedders (no timestep input at
// all), the dense layers (the gated attention and swiglu7 MLP the preview also runs, from
// models/magi2/layers.h, with the windowed attention op as the core), the final norms and linears.
// The refiner's model order (video blocks, audio, text) is already modality-sorted, so the
// reference's ModalityDispatcher permutation is the identity here. Named points carry the golden's
// names: embed, rope, layers.{i}.attn.{q,k,v,out,lse}, layers.{i}.output.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "models/magi2/layers.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/packing.h"
#include "models/magi2/refiner/weights.h"
#include "models/magi2/token_layout.h"
#include "ops/context.h"
#include "ops/windowed_attention.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::magi2::refiner {

// One input layout on the context, built once per (video grid, audio length, text length): a
// sampler keeps one per prompt across its steps.
struct RefinerPlan {
  RefinerLayout layout;     // host: order, coordinates, element indices
  TokenLayout sorted;       // the modality-sorted order (the identity)
  Tensor perm, inv, group;  // I32 [L]
  Tensor rope;              // F32 [L, 6B]
  ops::WindowPlan window;   // the range list of the local layers
  ops::WindowPlan full;     // every query to every key (layers outside local_attn_layers)
  Tensor video_in, video_out, audio_out;  // I32 element indices (RefinerLayout)
  int64_t tokens() const { return layout.tokens(); }
  RowOrder rows() const { return {sorted, perm, inv, group, rope}; }
};

class RefinerModel {
 public:
  // Weights and config from a refiner checkpoint folder (config.json, "extends" resolved), on ctx
  // for activations in `act` (F32 or BF16).
  RefinerModel(ops::Context& ctx, const Checkpoint& ckpt, DType act = DType::F32);
  RefinerModel(ops::Context& ctx, const Checkpoint& ckpt, const RefinerConfig& config, DType act);
  // Random weights of `config` made on ctx (random_refiner_weights): `avdit bench refiner`.
  RefinerModel(ops::Context& ctx, const RefinerConfig& config, DType act, uint64_t seed);

  const RefinerConfig& config() const { return config_; }
  const RefinerWeights& weights() const { return w_; }
  ops::Context& ctx() const { return ctx_; }
  DType act() const { return act_; }
  int64_t weight_bytes() const { return weight_bytes_; }

  // video: the latent's shape [1, C_v, T, H, W]; audio / text: token counts.
  RefinerPlan plan(const Shape& video, int64_t audio_tokens, int64_t text_tokens) const;

  // One forward: video_x [V, C_v] (model order: RefinerLayout::video_in), audio [L_a, C_a], text
  // [L_t, C_t] (any float dtype, any context) -> model_output F32 [L, max(C_v, C_a)] in model
  // order (text rows 0). Enqueues only.
  Tensor forward(const RefinerPlan& plan, const Tensor& video_x, const Tensor& audio,
                 const Tensor& text) const;
  // The same from the reference's packed x [L, >= max_in_channels] (model order).
  Tensor forward_packed(const RefinerPlan& plan, const Tensor& x) const;

  // Un-packed in and out (what _forward_magi2_refiner does around the model): video [1, C, T, H,
  // W], audio [1, L_a, C_a], text [1, L_t, C_t] -> {video velocity [1, C, T, H, W], audio velocity
  // [1, L_a, C_a]}, F32 on the model's context.
  std::array<Tensor, 2> velocity(const RefinerPlan& plan, const Tensor& video, const Tensor& audio,
                                 const Tensor& text) const;

 private:
  Tensor embed(const RefinerPlan& p, const Tensor& video_x, const Tensor& audio,
               const Tensor& text) const;
  void layer(int64_t i, const RefinerPlan& p, Tensor& s) const;
  Tensor post_adapter(const RefinerPlan& p, const Tensor& s) const;

  ops::Context& ctx_;
  RefinerConfig config_;
  DType act_;
  RefinerWeights w_;
  int64_t weight_bytes_ = 0;
};

}  // namespace avdit::models::magi2::refiner
