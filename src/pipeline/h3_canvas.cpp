// The MiniMax-H3 release's supported canvases and lengths. Sources (read, not copied):
//   MiniMax-AI/MiniMax-H3 README.md @ 8d8824e, "H3 supports the following input and output
//     specifications": aspect ratios 21:9, 16:9, 4:3, 1:1, 3:4, 9:16, the shorter side 768 pixels
//     by default, 4 to 15 seconds at 24 fps; its request scripts (scripts/readme/reproducible-768p-
//     *.sh) ask for {"short_edge": 768, "aspect_ratio": ...}.
//   The serving code the README points to, sgl-project/sglang python/sglang/multimodal_gen/runtime/
//     pipelines_core/stages/model_specific_stages/minimax_h3/: resolved_plan.py
//     (minimax_h3_resolve_spatial_shape, the adapt_shape_v1 rule below), task_profiles.py
//     (MINIMAX_H3_FINITE_ASPECT_RATIOS, the same six), constants.py (768 the only short edge
//     "MiniMax publishes recipes and reference outputs for"; 4 to 15 s), time_request.py (frame
//     counts snapped up to 17n + 5).
// The README's ratios are "including but not limited to"; these six at 768 are the ones it names.
#include "pipeline/h3_canvas.h"

#include <fmt/format.h>

#include <cmath>

#include "core/log.h"

namespace avdit::pipeline {

namespace {

constexpr int64_t kShortEdge = 768, kMaxPixels = 768 * 1344, kMultiple = 32;
constexpr double kFps = 24.0;

int64_t nearest_multiple(double v) {
  return std::max<int64_t>(kMultiple, std::llround(v / kMultiple) * kMultiple);
}

}  // namespace

H3Canvas h3_canvas_for_aspect(int64_t aspect_width, int64_t aspect_height) {
  const double ratio = static_cast<double>(aspect_width) / static_cast<double>(aspect_height);
  double w = ratio >= 1 ? kShortEdge * ratio : kShortEdge;
  double h = ratio >= 1 ? kShortEdge : kShortEdge / ratio;
  if (w * h > kMaxPixels) {
    const double s = std::sqrt(kMaxPixels / (w * h));
    w *= s;
    h *= s;
  }
  return {fmt::format("{}:{}", aspect_width, aspect_height), nearest_multiple(h),
          nearest_multiple(w)};
}

const std::vector<H3Canvas>& h3_supported_canvases() {
  static const std::vector<H3Canvas> canvases = [] {
    std::vector<H3Canvas> c;
    for (const auto& [w, h] : {std::pair{21, 9}, {16, 9}, {4, 3}, {1, 1}, {3, 4}, {9, 16}})
      c.push_back(h3_canvas_for_aspect(w, h));
    return c;
  }();
  return canvases;
}

std::optional<std::string> h3_canvas_warning(int64_t frames, int64_t height, int64_t width) {
  std::vector<std::string> parts;
  const auto& canvases = h3_supported_canvases();
  bool listed = false;
  for (const H3Canvas& c : canvases) listed |= c.height == height && c.width == width;
  if (!listed && height > 0 && width > 0) {
    // Nearest: the closest aspect ratio (the framing), then the closest area.
    const double ratio = std::log(static_cast<double>(width) / static_cast<double>(height));
    const double area = std::log(static_cast<double>(width) * static_cast<double>(height));
    const H3Canvas* best = nullptr;
    std::pair<double, double> best_key;
    for (const H3Canvas& c : canvases) {
      const std::pair<double, double> key = {
          std::abs(ratio - std::log(static_cast<double>(c.width) / static_cast<double>(c.height))),
          std::abs(area - std::log(static_cast<double>(c.width) * static_cast<double>(c.height)))};
      if (!best || key < best_key) best = &c, best_key = key;
    }
    std::string names;
    for (const H3Canvas& c : canvases)
      names += fmt::format("{}{}x{}", names.empty() ? "" : ", ", c.height, c.width);
    parts.push_back(fmt::format(
        "{}x{} (height x width) is not a canvas the MiniMax-H3 release supports ({}); the nearest "
        "is {}x{} ({}). It runs, but the model was not trained on it: expect artefacts on the "
        "32-pixel token grid",
        height, width, names, best->height, best->width, best->aspect));
  }
  if (frames < kH3MinFrames || frames > kH3MaxFrames || (frames - 5) % 17 != 0)
    parts.push_back(fmt::format(
        "{} frames ({:.2f} s at 24 fps) is not a length the release supports (4 to 15 s: {} to {} "
        "frames on the 17n + 5 grid)",
        frames, static_cast<double>(frames) / kFps, kH3MinFrames, kH3MaxFrames));
  if (parts.empty()) return std::nullopt;
  std::string line = "H3: " + parts[0];
  for (size_t i = 1; i < parts.size(); ++i) line += "; " + parts[i];
  return line;
}

void warn_unsupported_h3_canvas(int64_t frames, int64_t height, int64_t width) {
  if (const auto w = h3_canvas_warning(frames, height, width)) log::warn("{}", *w);
}

}  // namespace avdit::pipeline
