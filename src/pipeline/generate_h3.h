// MiniMax-H3 sampling end to end: text states + noise -> the two sigma schedules (video shift 12,
// audio 3) -> per-modality Euler from the velocity, one forward per step (CFG optional) -> final latents.
#pragma once

#include <optional>
#include <vector>

#include "io/safetensors.h"
#include "models/h3/model.h"
#include "pipeline/generate_common.h"

namespace avdit::pipeline {

// The reference's 50 sigma points (tests/parity/sampler_h3_test.cpp), guidance 1 (CFG-distilled weights).
inline constexpr int kH3DefaultSteps = 49;
inline constexpr double kH3VideoShift = 12.0;
inline constexpr double kH3AudioShift = 3.0;

struct H3GenerateOptions {
  RunOptions run;                       // run.shift sets the video shift
  std::optional<double> audio_shift;    // default 3
  LabeledTensor text;                   // text_embeds [L, text_dim] (or [1, L, text_dim])
  LabeledTensor text_token_tags;        // optional [L] (1 text, 0 visual token of the prompt)
  LabeledTensor negative;               // the unconditional pass's text_embeds (needed for guidance != 1)
  LabeledTensor negative_token_tags;
  std::optional<float> video_guidance, audio_guidance;  // default 1: a single conditional pass
  // The forward to sample with; null: the CPU H3Model built from the checkpoint. The app passes the
  // GPU model here for --device cuda (it must have been built from the same checkpoint).
  const models::h3::H3Forward* model = nullptr;
};

// Unpacked layouts: video [1, latents_dim, T, H, W] (H, W multiples of the patch), audio [2, 32, T_a].
// BadInput names the file:tensor and the expected shape for bad text, noise or teacher tensors.
GenerateResult generate_h3(const Checkpoint& ckpt, const H3GenerateOptions& options);

}  // namespace avdit::pipeline
