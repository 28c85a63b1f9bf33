// Classifier-free guidance per modality: v = u + s (c - u), plus the MAGI-2 reference's optional
// guidance tricks (all off in the official config), so `avdit generate` can reproduce them on request.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace avdit::sample {

// out = uncond + scale * (cond - uncond), three float32 roundings as in torch. out may alias either input.
void cfg_combine(std::span<const float> cond, std::span<const float> uncond, float scale, std::span<float> out);
Tensor cfg_combine(const Tensor& cond, const Tensor& uncond, float scale);

// MAGI-2 guidance settings (evaluation_config of reference-configs/magi2/magi2_preview.json).
// What the tricks do in the reference (Magi2PreviewSampler, inference/pipeline/sampler.py):
//  * use_cfg_trick: the video scale becomes per latent frame; frames [0, cfg_trick_start_frame) get
//    min(cfg_trick_value, video_scale) (weaker guidance on the first frames).
//  * use_dynamic_cfg: once the scheduler timestep (0..1000) is below dynamic_cfg_start_t, every video
//    scale above dynamic_cfg_cutoff_value is clamped to it (weaker guidance at low noise). Audio untouched.
//  * use_skimmed_cfg_linear ("skimming" CFG): where cond/uncond signs say guidance would overshoot
//    (three sign tests on cond, uncond and the implied x0 against the latent), the uncond is replaced by
//    a mix cond (1 - w) + uncond w with w = (skimmed_cfg_scale - 1) / (scale - 1), which lowers the
//    effective scale there to skimmed_cfg_scale; applied twice (second time with cond/uncond swapped in
//    the mask). Only where scale > 1 and the uncond is not all zero.
//  * cfg_rescale r > 0: cfg *= r std(cond) / std(cfg) + (1 - r), std (population) per item and channel
//    over frames x height x width for video and over the audio tokens for audio.
// Implemented here: all four. The first two are exact; skimming is element-wise and exact; rescale's
// standard deviations are accumulated in float64 (torch's float32 reduction order is not reproduced).
struct Magi2Guidance {
  float video_scale = 5.0f;
  float audio_scale = 7.0f;
  bool use_cfg_trick = false;
  int cfg_trick_start_frame = 13;
  float cfg_trick_value = 2.0f;
  bool use_dynamic_cfg = false;
  int64_t dynamic_cfg_start_t = 500;
  float dynamic_cfg_cutoff_value = 2.0f;
  bool use_skimmed_cfg_linear = false;
  float skimmed_cfg_scale = 3.0f;
  float cfg_rescale = 0.0f;
};

// The video guidance scale of each latent frame at scheduler timestep `timestep` (precalculate_cfg).
std::vector<float> magi2_video_scales(const Magi2Guidance& g, int64_t latent_frames, int64_t timestep);

// Guided velocity of one MAGI-2 modality, exactly as Magi2PreviewSampler.cfg_velocity:
// video: cond/uncond/latent [1, C, T, H, W] with per-frame scales (magi2_video_scales);
// audio: [1, L, C] with one scale. `latent` (the current x_t) is only used by skimming.
Tensor magi2_cfg_video(const Tensor& cond, const Tensor& uncond, const Tensor& latent, const Magi2Guidance& g,
                       int64_t timestep);
Tensor magi2_cfg_audio(const Tensor& cond, const Tensor& uncond, const Tensor& latent, const Magi2Guidance& g);

}  // namespace avdit::sample
