// Entry points of the H3 family for the app and the sampler: one forward from the fixture's
// unpacked inputs, per-step velocity calls, and random-weight checkpoints in the official layout.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "models/h3/model.h"

namespace avdit {
class Checkpoint;
}

namespace avdit::models::h3 {

// `avdit forward`: builds the packed sequence from the unpacked inputs and runs one forward on the
// model's context. Inputs (names as in the golden fixtures; packed tensors there are ignored):
//   video_latent [1, 24, T, H, W], audio_latent [2, 32, T_a], text_embeds [L, text_dim],
//   t_video/t_audio [1] (t = 1 - sigma) or sigma_video/sigma_audio [1],
//   optional cond_latent [1, 24, n, H, W] with keyframe_frame_indices [n] (0 first, -1 last),
//   optional text_token_tags [L] (1 text, 0 vision token of the prompt).
// Returns, on the host in float32: video_out [n_img, 96], audio_out [2 T_a, 32], video_out_latent
// [1, 24, T, H, W] (the target rows), audio_out_latent [2, 32, T_a]; with `dump` also the fixture's
// intermediates (dump.h) and the packing tensors (img_pos, ...).
TensorMap forward_from_inputs(const H3Model& model, const TensorMap& inputs, bool dump);

// The packing tensors under the fixture's input names (img_position_ids, token_tags,
// inverse_indices, unique_timesteps, cu_seqlens, img_pos, audio_pos, ...), for debugging.
TensorMap packing_tensors(const PackedLayout& layout, const PackedTimesteps& timesteps);

// --- per-step velocity for samplers --------------------------------------------------------
struct VelocityRequest {
  Tensor video_latent;  // [1, 24, T, H, W] current target latent x_t (F32, the model's context or
                        // host)
  Tensor audio_latent;  // [2, 32, T_a]
  float sigma_video = 1.0f;
  float sigma_audio = 1.0f;
  Tensor text_refined;                          // [L, H] from H3Model::refine_text
  std::vector<int64_t> text_token_tags;         // optional, [L] of 0/1
  Tensor cond_latent;                           // optional keyframes [1, 24, n, H, W]
  std::vector<int64_t> keyframe_frame_indices;  // with cond_latent: {0}, {-1} or {0, -1}
};

struct Velocity {
  Tensor video;  // [1, 24, T, H, W] F32 on the model's context
  Tensor audio;  // [2, 32, T_a]
};

// Per-step forwards of one model on unpacked latents: packing and unpacking run on the model's
// context (element indices built once per shape), and the layout's plan and the timesteps' adaLN
// tables are kept across steps (two table sets: a CFG step's passes share one). Each call copies
// its inputs into fixed slots and runs packing, forward and unpacking as one Context::run_fixed
// body, so the CUDA context replays the whole call from one CUDA graph.
//   H3Stepper s(model); Tensor text = model.refine_text(text_embeds);  // once per prompt
//   per step: Velocity v = s.velocity({x_video, x_audio, sigma_v, sigma_a, text});
//   x0_video = x_video + sigma_v * v.video (data-ward velocity; per modality, own sigma).
class H3Stepper {
 public:
  explicit H3Stepper(const H3Model& model) : model_(model) {}
  Velocity velocity(const VelocityRequest& request);

 private:
  const H3Model& model_;
  std::optional<H3Plan> plan_;
  std::vector<std::pair<std::vector<float>, H3Tables>> tables_;
  Shape video_shape_, audio_shape_, cond_shape_;
  Tensor patchify_, patchify_cond_, unpatchify_, pack_audio_, unpack_audio_;
  // The fixed slots of run_fixed; `generation` names them (a new one whenever one is remade).
  struct Slots {
    Tensor video, audio, cond, text, mod_rows, inverse, tables, out_video, out_audio;
  } slots_;
  uint64_t generation_ = 0, plan_generation_ = 0, plan_seen_ = 0;
};

// `avdit init --family h3`: writes a random-weight checkpoint (official names, shapes, dtypes,
// grouped qkv; sharded with an index when large) plus config.json to out_dir. Values follow the
// golden README's rule so activations stay realistic: N(0, 1/fan_in) for projections,
// time_embedder proj_in 4/sqrt(fan_in) and proj_out 0.5/sqrt(fan_in), adaLN 0.5/sqrt(Dt),
// norm weights 1 + N(0, 0.1^2), biases N(0, 0.02^2) (0.1 for time embedder and adaLN),
// rope.inv_freq exact. Deterministic in `seed` (Philox stream per tensor name).
void init_checkpoint(const nlohmann::json& config, const std::filesystem::path& out_dir,
                     uint64_t seed);

}  // namespace avdit::models::h3
