// Pixel/frame sizes -> latent shapes per family (see latent_shape.h).
#include "pipeline/latent_shape.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "models/h3/config.h"
#include "models/magi2/config.h"

namespace avdit::pipeline {

namespace {

struct Channels {
  int64_t video = 0, audio = 0, audio_rows = 1;  // audio_rows: H3's 2 stereo rows lead the audio shape
  bool h3 = false;
};

Channels channels(const std::string& family, const nlohmann::json& config) {
  Channels c;
  if (family == "h3") {
    const auto h = models::h3::H3Config::from_json(config);
    c.video = h.latents_dim;
    c.audio = h.audio_latents_dim;
    c.audio_rows = models::h3::kAudioChannels;
    c.h3 = true;
    return c;
  }
  const auto m = models::magi2::parse_magi2_config(config);
  c.video = m.video_in_channels / (m.data_proxy.t_patch_size * m.data_proxy.patch_size * m.data_proxy.patch_size);
  c.audio = m.audio_in_channels;
  return c;
}

LatentShapes make(const Channels& c, int64_t t, int64_t h, int64_t w, int64_t a) {
  AVDIT_REQUIRE(t > 0 && h > 0 && w > 0 && a > 0,
                "latent shape T={} H={} W={} audio={} has an empty dimension (frames/height/width too small?)", t, h,
                w, a);
  if (c.h3) return {{1, c.video, t, h, w}, {c.audio_rows, c.audio, a}};
  return {{1, c.video, t, h, w}, {1, a, c.audio}};
}

void require_pixels(int64_t frames, int64_t height, int64_t width) {
  AVDIT_REQUIRE(frames >= 1 && height >= 1 && width >= 1, "--frames, --height and --width must be positive, got {} {} {}",
                frames, height, width);
}

}  // namespace

double magi2_fps(const nlohmann::json& config) {
  const nlohmann::json e = config.value("evaluation_config", nlohmann::json::object());
  const auto it = e.find("fps");
  return it != e.end() && it->is_number() ? it->get<double>() : 12.5;
}

LatentShapes magi2_latent_shapes(const nlohmann::json& config, int64_t frames, int64_t height, int64_t width) {
  require_pixels(frames, height, width);
  const Channels c = channels("magi2-preview", config);
  const nlohmann::json e = config.value("evaluation_config", nlohmann::json::object());
  const std::vector<int64_t> stride = e.value("vae_stride", std::vector<int64_t>{8, 16, 16});
  AVDIT_REQUIRE(stride.size() == 3 && stride[0] > 0 && stride[1] > 0 && stride[2] > 0,
                "config.json evaluation_config.vae_stride must be 3 positive integers");
  AVDIT_REQUIRE(height % stride[1] == 0 && width % stride[2] == 0,
                "MAGI-2: --height and --width must be multiples of the VAE's {}x{} (evaluation_config.vae_stride), got "
                "{}x{}",
                stride[1], stride[2], height, width);
  const double fps = magi2_fps(config);
  const double audio_fps = e.value("data_proxy_config", nlohmann::json::object()).value("audio_latent_fps", 25.0);
  const double seconds = static_cast<double>(frames) / (2.0 * fps);
  const int64_t audio = static_cast<int64_t>(std::llround(seconds * audio_fps));
  return make(c, (frames - 1) / stride[0] + 1, height / stride[1], width / stride[2], audio);
}

LatentShapes h3_latent_shapes(const nlohmann::json& config, int64_t frames, int64_t height, int64_t width) {
  require_pixels(frames, height, width);
  const Channels c = channels("h3", config);
  AVDIT_REQUIRE(height % 32 == 0 && width % 32 == 0,
                "H3: --height and --width must be multiples of 32 (16x VAE, 2x2 patch), got {}x{}", height, width);
  const int64_t t = frames <= 5 ? 2 : (frames - 5) / 17 * 5 + 2;
  const int64_t audio = static_cast<int64_t>(std::llround(static_cast<double>(frames) * 40.0 / 24.0));
  return make(c, t, height / 16, width / 16, audio);
}

LatentShapes latent_shapes_from_string(const std::string& family, const nlohmann::json& config,
                                       const std::string& spec) {
  std::vector<int64_t> v;
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    size_t used = 0;
    int64_t x = -1;
    try {
      x = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    AVDIT_REQUIRE(used > 0 && used == part.size(), "--latent-shape '{}': '{}' is not an integer (expected T,H,W,A)",
                  spec, part);
    v.push_back(x);
  }
  AVDIT_REQUIRE(v.size() == 4, "--latent-shape '{}': expected 4 integers T,H,W,A (video latent frames, height, width; "
                "audio latent length)", spec);
  return make(channels(family, config), v[0], v[1], v[2], v[3]);
}

}  // namespace avdit::pipeline
