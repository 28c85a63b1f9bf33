// MiniMax-H3 sampling end to end: text states + noise -> the two sigma schedules (video shift 12,
// audio 3) -> per-modality Euler from the velocity, one forward per step (CFG optional) -> final latents.
#pragma once

#include <optional>
#include <vector>

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
};

// Each step's sorted unique timesteps of a text-to-video-and-audio run (PackedTimesteps::unique:
// the video's timestep on text, video and pad rows, the audio's on audio rows), in step order: the
// sets an adaLN table must hold (H3TableOptions).
std::vector<std::vector<float>> h3_timestep_sets(int steps, double video_shift = kH3VideoShift,
                                                 double audio_shift = kH3AudioShift);

// Unpacked layouts: video [1, latents_dim, T, H, W] (H, W multiples of the patch), audio [2, 32, T_a].
// BadInput names the file:tensor and the expected shape for bad text, noise or teacher tensors.
// The latents live on the model's context for the whole loop; the result is on the host.
GenerateResult generate_h3(const models::h3::H3Model& model, const H3GenerateOptions& options);

}  // namespace avdit::pipeline
