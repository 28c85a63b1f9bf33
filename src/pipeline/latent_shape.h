// Latent shapes of a run from its size in pixels and frames (or given directly as T,H,W,A), per
// family, so `avdit generate` can draw seeded noise without a noise file.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace avdit::pipeline {

struct LatentShapes {
  Shape video, audio;
};

// MAGI-2, as the reference's inference engine sizes a run (evaluation_config of the checkpoint's
// config.json: vae_stride [8, 16, 16], fps 12.5 with video at 2 fps, data_proxy_config.audio_latent_fps 25):
// T = (frames - 1) / stride_t + 1, H = height / stride_h, W = width / stride_w,
// L_a = round(seconds * audio_latent_fps) with seconds = frames / (2 fps).
// video [1, video_in_channels / patch volume, T, H, W], audio [1, L_a, audio_in_channels].
// MAGI-2's frame rate: evaluation_config.fps (the reference's default 12.5 when absent).
double magi2_fps(const nlohmann::json& config);

LatentShapes magi2_latent_shapes(const nlohmann::json& config, int64_t frames, int64_t height, int64_t width);

// H3 (24 fps video, 40 Hz audio latents, VAE 16x spatial; the frame grid 17n + 5 of the ComfyUI
// nodes for MiniMax-H3): T = 2 for frames <= 5, else (frames - 5) / 17 * 5 + 2; H = height / 16,
// W = width / 16 (even: the 2x2 patch); T_a = round(frames * 40 / 24).
// video [1, latents_dim, T, H, W], audio [2, audio_latents_dim, T_a].
LatentShapes h3_latent_shapes(const nlohmann::json& config, int64_t frames, int64_t height, int64_t width);

// --latent-shape "T,H,W,A" (video latent frames, height, width; audio latent length) for `family`
// ("magi2-preview", "magi2-refiner" or "h3"). BadInput on a malformed string.
LatentShapes latent_shapes_from_string(const std::string& family, const nlohmann::json& config,
                                       const std::string& spec);

}  // namespace avdit::pipeline
