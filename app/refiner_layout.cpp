#include "refiner_layout.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "pipeline/latent_shape.h"

namespace avdit::app {

RefinerGrid refiner_clip_grid(const nlohmann::json& merged, const models::magi2::refiner::RefinerConfig& rc,
                              double seconds, int64_t preview_height, int64_t preview_width,
                              int64_t height, int64_t width, const char* command) {
  AVDIT_REQUIRE(std::isfinite(seconds) && seconds > 0 && seconds <= 600,
                "{}: --seconds {}: expected a length above 0 and at most 600", command, seconds);
  const int64_t frames =
      std::max<int64_t>(1, std::llround(seconds * pipeline::magi2_fps(merged) * 2.0));
  const pipeline::LatentShapes p =
      pipeline::magi2_latent_shapes(merged, frames, preview_height, preview_width);
  const int64_t sh = rc.sampler.vae_stride[1], sw = rc.sampler.vae_stride[2];
  AVDIT_REQUIRE(height > 0 && width > 0 && height % sh == 0 && width % sw == 0,
                "{}: --height/--width {}x{}: multiples of the refiner's vae_stride {}x{} (the "
                "1080p tier is 1088x1920)",
                command, height, width, sh, sw);
  RefinerGrid g;
  g.T = 2 * p.video[2] - 1;
  g.H = height / sh;
  g.W = width / sw;
  // Audio tokens enter the refiner only with magi2_refiner_audio_noise_scale >= 0 (the release:
  // -1, none).
  g.audio = rc.sampler.audio_noise_scale >= 0 ? p.audio[1] : 0;
  return g;
}

}  // namespace avdit::app
