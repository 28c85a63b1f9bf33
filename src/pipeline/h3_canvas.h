// The canvases and lengths the MiniMax-H3 release names as supported, and the check behind
// `avdit generate`'s warning: a legal canvas (multiples of 32) the model was not trained on still
// runs, but gives artefacts on the token grid, so the user is told which supported one is nearest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace avdit::pipeline {

struct H3Canvas {
  std::string aspect;  // "16:9"
  int64_t height = 0, width = 0;
};

// The release's canvas rule (the reference's adapt_shape_v1): the short edge at 768, the long one
// at 768 x ratio, the area capped at 768 x 1344 (scaled down keeping the ratio), each side rounded
// to the nearest multiple of 32.
H3Canvas h3_canvas_for_aspect(int64_t aspect_width, int64_t aspect_height);

// The supported canvases: h3_canvas_for_aspect over the release's aspect ratios 21:9, 16:9, 4:3,
// 1:1, 3:4, 9:16, in that order (768x1344 for 16:9 is the default).
const std::vector<H3Canvas>& h3_supported_canvases();

// Supported lengths: the 17n + 5 frame counts the reference makes for 4 to 15 s at 24 fps.
inline constexpr int64_t kH3MinFrames = 107, kH3MaxFrames = 362;

// Empty when `height` x `width` is a supported canvas and `frames` a supported length; else one
// line saying what is outside what the release supports, naming the nearest supported canvas
// (closest aspect ratio, then closest area) or the supported frame range.
std::optional<std::string> h3_canvas_warning(int64_t frames, int64_t height, int64_t width);

// Logs h3_canvas_warning's line, if any, as a warning (`avdit generate`).
void warn_unsupported_h3_canvas(int64_t frames, int64_t height, int64_t width);

}  // namespace avdit::pipeline
