// The refiner's latent grid for a clip, sized as `avdit generate` sizes a MAGI-2 run: the refiner
// benchmarks (windowed attention, a refiner step) share it.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "models/magi2/refiner/config.h"

namespace avdit::app {

struct RefinerGrid {
  int64_t T = 0, H = 0, W = 0;  // latent frames, rows, columns
  int64_t audio = 0;            // audio tokens in the tail (none unless audio is re-noised)
};

// round(seconds * fps * 2) frames at the preview's size, whose T latent frames the refiner
// upsamples to 2T - 1, at height x width pixels over the refiner's vae_stride. BadInput (naming
// `command`'s options) on a length or size the refiner cannot take.
RefinerGrid refiner_clip_grid(const nlohmann::json& merged, const models::magi2::refiner::RefinerConfig& rc,
                              double seconds, int64_t preview_height, int64_t preview_width,
                              int64_t height, int64_t width, const char* command);

}  // namespace avdit::app
