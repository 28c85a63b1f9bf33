// Entry points of the MAGI-2 preview family for the app and the sampler: one forward from un-packed
// inputs, per-step velocity calls on unpacked latents, and a random-weight checkpoint for any
// config.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "models/magi2/config.h"
#include "models/magi2/model.h"
#include "models/magi2/packing.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::magi2 {

// The checkpoint's config.json parsed (BadInput when there is none or it is not the MAGI-2 preview
// schema).
Magi2Config config_from_checkpoint(const Checkpoint& ckpt);

// `avdit forward`: packs `inputs` (video_latent, audio_latent, txt_feat, txt_feat_len,
// audio_feat_len, per_token_video_t, per_token_audio_t, as the fixture's inputs.safetensors),
// computes the time embedding on the model's context, runs the forward and returns, on the host in
// float32, video_velocity, audio_velocity and model_output; with dump also the packed inputs (x,
// coords_mapping, modality_mapping, cu_seqlens_q, per_token_t, time_token_sequence) and every
// intermediate by fixture name (dump.h).
TensorMap forward_from_inputs(const Magi2Model& model, const TensorMap& inputs, bool dump);

// One forward of a packed sequence with its time_tokens as given (computed on the context from
// per_token_t when undefined): "model_output" [L, out_channels] (+ the dumps and
// modality_group_sizes).
TensorMap forward_packed(const Magi2Model& model, const PackedSequence& packed, bool dump);

// The outputs forward_from_inputs adds to a forward's "model_output": video_velocity and
// audio_velocity unpacked; with dump also the packed inputs (x, coords_mapping, modality_mapping,
// cu_seqlens_q, per_token_t, time_token_sequence).
void add_unpacked_outputs(const Magi2Config& config, const PackedSequence& packed, bool dump,
                          TensorMap& out);

// Per-step forwards of one model for a sampler: items (the conditional and unconditional prompts)
// that share the unpacked latents, packed into one sequence as the reference does (packing.h
// packing_index). Packing, the time embedding and unpacking run on the model's context (element
// indices and the plan built once per latent shape), so the latents never leave it between steps.
//   Magi2Stepper s(model, {text, negative});
//   per step: auto v = s.velocity(x_video, x_audio, t);  // v[b] = {video, audio} of item b
class Magi2Stepper {
 public:
  // texts: per item txt_feat [L_b, C_t] or [1, L_b, C_t] (any float dtype; L_b may be 0). freqs:
  // the time-embedding frequencies [time_channel_dim / 2] (undefined: the reference's table).
  Magi2Stepper(const Magi2Model& model, const std::vector<Tensor>& texts, const Tensor& freqs = {});
  // video [1, C, T, H, W], audio [1, L_a, C_a] F32 (the model's context or the host); t: the
  // model's time of this step. Returns per item {video, audio} velocities, F32 on the model's
  // context.
  std::vector<std::array<Tensor, 2>> velocity(const Tensor& video, const Tensor& audio, float t);
  // The packed layout velocity() runs for latents of these shapes (modality, cu_seqlens, grid; no
  // x): what a probe of the forward needs to know about its rows (router statistics).
  const PackedSequence& layout(const Shape& video, const Shape& audio);

 private:
  void prepare(const Shape& video, const Shape& audio);  // indices and plan, once per shape

  const Magi2Model& model_;
  std::vector<int64_t> text_lens_;
  int64_t text_rows_ = 0;
  Tensor text_;  // F32 [B, L_t, C_t] on the host, zero-padded
  Tensor freqs_;
  Shape video_shape_, audio_shape_;
  std::optional<Magi2Plan> plan_;
  std::optional<PackingIndex> index_;
  Tensor source_, x_index_;  // [video | audio | texts | 0] on the context; x's element indices
  std::vector<float> noisy_;
  std::vector<Tensor> video_out_, audio_out_;
};

// Writes config.json and a random-weight checkpoint (official names, layouts, dtypes; sharded with
// an index when large) to out_dir. Values depend only on (seed, tensor name, element index).
void init_checkpoint(const nlohmann::json& config, const std::filesystem::path& out_dir,
                     uint64_t seed);

}  // namespace avdit::models::magi2
