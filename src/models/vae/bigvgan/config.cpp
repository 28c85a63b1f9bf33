// config.json -> H3AudioConfig (see config.h).
#include "models/vae/bigvgan/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"

namespace avdit::models::vae::bigvgan {
namespace {

using json = nlohmann::json;
constexpr const char* kGoldenKey = "config.json (outer, as released)";

std::vector<float> stats(const json& c, const char* key, int64_t n, const std::string& from) {
  AVDIT_REQUIRE(c.contains(key) && c[key].is_array() && static_cast<int64_t>(c[key].size()) == n,
                "{}: '{}' must be a list of {} numbers (latent_channels)", from, key, n);
  std::vector<float> out;
  for (const json& v : c[key]) {
    AVDIT_REQUIRE(v.is_number() && std::isfinite(v.get<double>()),
                  "{}: '{}' holds {}, expected finite numbers", from, key, v.dump());
    out.push_back(v.get<float>());
  }
  return out;
}

int64_t integer(const json& c, const char* key, const std::string& from, int64_t fallback) {
  if (!c.contains(key)) return fallback;
  AVDIT_REQUIRE(
      c[key].is_number_integer() && c[key].get<int64_t>() >= 1 && c[key].get<int64_t>() <= 1000000,
      "{}: '{}' must be a positive integer", from, key);
  return c[key].get<int64_t>();
}

}  // namespace

H3AudioConfig read_h3_audio_config(const std::filesystem::path& dir) {
  H3AudioConfig cfg;
  cfg.source = (dir / "config.json").string();
  const json file = read_json(dir / "config.json");
  const json& c = file.is_object() && file.contains(kGoldenKey) ? file[kGoldenKey] : file;
  AVDIT_REQUIRE(c.is_object() && c.value("_class_name", "") == "MiniMaxH3AudioVAE",
                "{}: not a MiniMax-H3 audio VAE config (_class_name MiniMaxH3AudioVAE)",
                cfg.source);
  cfg.sample_rate = integer(c, "sample_rate", cfg.source, cfg.sample_rate);
  AVDIT_REQUIRE(cfg.sample_rate == 32000,
                "{}: sample_rate {} has no BigVGAN schedule here (the release's 32000 has)",
                cfg.source, cfg.sample_rate);
  cfg.latent_channels = integer(c, "latent_channels", cfg.source, cfg.latent_channels);
  cfg.output_channels = integer(c, "output_channel", cfg.source, cfg.output_channels);
  cfg.latents_mean = stats(c, "latents_mean", cfg.latent_channels, cfg.source);
  cfg.latents_std = stats(c, "latents_std", cfg.latent_channels, cfg.source);
  return cfg;
}

}  // namespace avdit::models::vae::bigvgan
