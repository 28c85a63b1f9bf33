// MAGI-2 preview sampling end to end: text features + noise -> FlowUniPC with per-modality CFG
// (cond and uncond as two items of one packed forward, as the reference) -> final latents.
#pragma once

#include <optional>

#include "analysis/routes/recorder.h"
#include "models/magi2/model.h"
#include "pipeline/generate_common.h"
#include "sample/cfg.h"

namespace avdit::pipeline {

// evaluation_config of the checkpoint's config.json: num_inference_steps (100), shift (7), the
// guidance scales (5 / 7) and the optional CFG tricks; absent fields take the reference's defaults.
struct Magi2SamplerDefaults {
  int steps = 100;
  double shift = 7.0;
  sample::Magi2Guidance guidance;
};
Magi2SamplerDefaults magi2_sampler_defaults(const models::magi2::Magi2Config& config);

struct Magi2GenerateOptions {
  RunOptions run;
  LabeledTensor text;      // txt_feat [1, L, C_t] or [L, C_t]
  LabeledTensor negative;  // the unconditional pass's text; undefined: no tokens (the reference's
                           // null feature)
  std::optional<float> video_guidance, audio_guidance;  // default: evaluation_config
  // The 32 (time_channel_dim / 2) time-embedding frequencies to use instead of avdit's own float32
  // table, e.g. the fixture's GPU-evaluated `time_embedding_freqs` (see magi2-tiny README);
  // optional.
  LabeledTensor time_embedding_freqs;
  // Router statistics of the run (--route-stats): begun with the loop's packed layout, attached
  // for the loop; the caller takes them with finish().
  analysis::routes::RouteRecorder* route_recorder = nullptr;
};

// Runs the sampler on the model's context; steps, shift and guidance default to the model's
// evaluation_config (magi2_sampler_defaults). Unpacked layouts: video [1, C, T, H, W] (C =
// video_in_channels / patch volume), audio [1, L_a, audio_in_channels]. With both guidance scales
// 1 only the conditional pass runs. BadInput names the file:tensor and the expected shape for bad
// text, noise or teacher tensors. The latents live on the model's context for the whole loop; the
// result is on the host.
GenerateResult generate_magi2(const models::magi2::Magi2Model& model,
                              const Magi2GenerateOptions& options);

}  // namespace avdit::pipeline
