// model_config.json -> OobleckConfig. The golden fixtures keep the release's model_config.json
// under one key of their config.json; both are read the same way.
#include "models/vae/oobleck/config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"

namespace avdit::models::vae::oobleck {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kGoldenKey = "model_config.json (as the loader reads it)";

// The decoder's object of a model_config.json, or null.
const json* decoder_of(const json& m) {
  if (!m.is_object() || !m.contains("model")) return nullptr;
  const json& model = m["model"];
  if (!model.is_object() || !model.contains("pretransform")) return nullptr;
  const json& pre = model["pretransform"];
  if (!pre.is_object() || !pre.contains("config") || !pre["config"].is_object()) return nullptr;
  const json& cfg = pre["config"];
  if (!cfg.contains("decoder") || !cfg["decoder"].is_object()) return nullptr;
  const json& dec = cfg["decoder"];
  if (!dec.contains("type") || dec["type"] != "oobleck") return nullptr;
  return &dec;
}

// The model_config.json object of the folder (the release's file, else a golden's wrapper), with
// the path it came from; null object when there is none.
json model_config(const fs::path& dir, fs::path* from) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "model_config.json", ec)) {
    *from = dir / "model_config.json";
    return read_json(*from);
  }
  if (fs::is_regular_file(dir / "config.json", ec)) {
    const json c = read_json(dir / "config.json");
    if (c.is_object() && c.contains(kGoldenKey)) {
      *from = dir / "config.json";
      return c[kGoldenKey];
    }
  }
  return json();
}

int64_t positive(const json& cfg, const char* key, const fs::path& from, int64_t fallback) {
  if (!cfg.contains(key)) return fallback;
  AVDIT_REQUIRE(cfg[key].is_number_integer() && cfg[key].get<int64_t>() >= 1 &&
                    cfg[key].get<int64_t>() <= (int64_t{1} << 20),
                "{}: decoder config '{}' must be a positive integer", from.string(), key);
  return cfg[key].get<int64_t>();
}

std::vector<int64_t> list(const json& cfg, const char* key, const fs::path& from,
                          std::vector<int64_t> fallback) {
  if (!cfg.contains(key)) return fallback;
  AVDIT_REQUIRE(cfg[key].is_array() && !cfg[key].empty() && cfg[key].size() <= 16,
                "{}: decoder config '{}' must be a list of 1 to 16 positive integers",
                from.string(), key);
  std::vector<int64_t> out;
  for (const json& v : cfg[key]) {
    AVDIT_REQUIRE(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 64,
                  "{}: decoder config '{}' holds {}, expected integers in [1, 64]", from.string(),
                  key, v.dump());
    out.push_back(v.get<int64_t>());
  }
  return out;
}

bool flag(const json& cfg, const char* key, const fs::path& from, bool fallback) {
  if (!cfg.contains(key)) return fallback;
  AVDIT_REQUIRE(cfg[key].is_boolean(), "{}: decoder config '{}' must be true or false",
                from.string(), key);
  return cfg[key].get<bool>();
}

}  // namespace

int64_t OobleckConfig::hop() const {
  int64_t h = 1;
  for (int64_t s : strides) h *= s;
  return h;
}

bool is_oobleck_folder(const fs::path& dir) {
  fs::path from;
  return decoder_of(model_config(dir, &from)) != nullptr;
}

OobleckConfig read_oobleck_config(const fs::path& dir) {
  fs::path from;
  const json m = model_config(dir, &from);
  const json* dec = decoder_of(m);
  AVDIT_REQUIRE(dec, "{}: no Stable Audio model_config.json with an oobleck decoder", dir.string());
  const json empty = json::object();
  const json& cfg =
      dec->contains("config") && (*dec)["config"].is_object() ? (*dec)["config"] : empty;
  OobleckConfig c;
  c.source = from.string();
  c.channels = positive(cfg, "channels", from, c.channels);
  c.latent_dim = positive(cfg, "latent_dim", from, c.latent_dim);
  c.out_channels = positive(cfg, "out_channels", from, c.out_channels);
  c.c_mults = list(cfg, "c_mults", from, c.c_mults);
  c.strides = list(cfg, "strides", from, c.strides);
  AVDIT_REQUIRE(c.c_mults.size() == c.strides.size(),
                "{}: decoder config has {} c_mults but {} strides", from.string(), c.c_mults.size(),
                c.strides.size());
  for (int64_t s : c.strides)
    AVDIT_REQUIRE(s % 2 == 0,
                  "{}: decoder stride {} is odd (the upsampling is exact only for "
                  "even strides)",
                  from.string(), s);
  AVDIT_REQUIRE(flag(cfg, "use_snake", from, false),
                "{}: decoder use_snake false (ELU) is not supported; Stable Audio Open uses "
                "SnakeBeta",
                from.string());
  AVDIT_REQUIRE(!flag(cfg, "use_nearest_upsample", from, false),
                "{}: decoder use_nearest_upsample is not supported", from.string());
  c.final_tanh = flag(cfg, "final_tanh", from, true);
  AVDIT_REQUIRE(!c.final_tanh,
                "{}: decoder final_tanh true is not supported (Stable Audio Open "
                "sets it false)",
                from.string());
  if (m.contains("sample_rate")) c.sample_rate = positive(m, "sample_rate", from, c.sample_rate);
  return c;
}

}  // namespace avdit::models::vae::oobleck
