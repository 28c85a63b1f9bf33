// H3Config parsing and the curve-variant detection. Field names are those of the official
// FL2VA/transformer/config.json so that a downloaded checkpoint folder loads as is.
#include "models/h3/config.h"

#include <fmt/ranges.h>

#include "core/error.h"
#include "io/safetensors.h"

namespace avdit::models::h3 {
namespace {

constexpr const char* kClassName = "MiniMaxH3DiTModel";
constexpr const char* kCurveTable = "adaln_t_table";
constexpr int64_t kInner = int64_t{1} << 20;  // limit of inner widths (FFN, time embedding)

// Positive integers up to `max`: plausible sizes, far above any published model and far below
// what would exhaust memory or wrap size arithmetic. Fractional values are refused, not truncated.
int64_t get_int(const nlohmann::json& j, const char* key, int64_t fallback, bool required,
                int64_t max = 65536) {
  if (!j.contains(key)) {
    AVDIT_REQUIRE(!required, "H3 config: missing field '{}'", key);
    return fallback;
  }
  const auto& v = j[key];
  AVDIT_REQUIRE(v.is_number_integer() &&
                    !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) &&
                    v.get<int64_t>() > 0 && v.get<int64_t>() <= max,
                "H3 config: field '{}' must be an integer in [1, {}], found {}", key, max,
                v.is_primitive() ? v.dump() : v.type_name());
  return v.get<int64_t>();
}

// eps values: finite, in (0, 1).
double get_double(const nlohmann::json& j, const char* key, double fallback) {
  if (!j.contains(key)) return fallback;
  const auto& v = j[key];
  AVDIT_REQUIRE(v.is_number() && v.get<double>() > 0 && v.get<double>() < 1,
                "H3 config: field '{}' must be a number in (0, 1), found {}", key,
                v.is_primitive() ? v.dump() : v.type_name());
  return v.get<double>();
}

}  // namespace

H3Config H3Config::from_json(const nlohmann::json& j) {
  AVDIT_REQUIRE(j.is_object(), "H3 config: expected a JSON object");
  H3Config c;
  // Sizes that define the architecture are required; eps values default to the reference's.
  c.hidden_size = get_int(j, "hidden_size", c.hidden_size, true);
  c.num_layers = get_int(j, "num_layers", c.num_layers, true, 1024);
  c.token_refiner_num_layers =
      get_int(j, "token_refiner_num_layers", c.token_refiner_num_layers, true, 1024);
  c.num_attention_heads = get_int(j, "num_attention_heads", c.num_attention_heads, true, 1024);
  c.attention_head_dim = get_int(j, "attention_head_dim", c.attention_head_dim, true, 1024);
  c.ffn_hidden_size = get_int(j, "ffn_hidden_size", c.ffn_hidden_size, true, kInner);
  c.latents_dim = get_int(j, "latents_dim", c.latents_dim, true);
  c.audio_latents_dim = get_int(j, "audio_latents_dim", c.audio_latents_dim, true);
  c.text_dim = get_int(j, "text_dim", c.text_dim, true);
  c.timestep_input_dim = get_int(j, "timestep_input_dim", c.timestep_input_dim, true);
  c.time_embed_hidden_size =
      get_int(j, "time_embed_hidden_size", c.time_embed_hidden_size, true, kInner);
  c.time_embed_dim = get_int(j, "time_embed_dim", c.time_embed_dim, true, kInner);
  c.adaln_out_features =
      get_int(j, "adaln_out_features", kModalities * kAdalnSlices * c.hidden_size, false,
              kModalities * kAdalnSlices * 65536);
  c.final_adaln_out_features =
      get_int(j, "final_adaln_out_features", 2 * c.hidden_size, false, 2 * 65536);
  c.rope_inv_freq_len = get_int(j, "rope_inv_freq_len", c.rope_inv_freq_len, true, 1024);
  c.norm_eps = get_double(j, "norm_eps", c.norm_eps);
  c.qk_norm_eps = get_double(j, "qk_norm_eps", c.qk_norm_eps);
  c.final_norm_eps = get_double(j, "final_norm_eps", c.final_norm_eps);
  if (j.contains("adaln_curve_grid") && !j["adaln_curve_grid"].is_null())
    c.adaln_curve_grid = get_int(j, "adaln_curve_grid", 0, true, kInner);
  if (j.contains("patch_size")) {
    const auto& p = j["patch_size"];
    AVDIT_REQUIRE(p.is_array() && p.size() == 3, "H3 config: patch_size must be [t, h, w]");
    for (size_t i = 0; i < 3; ++i) {
      AVDIT_REQUIRE(p[i].is_number_integer(),
                    "H3 config: patch_size[{}] must be an integer, found {}", i,
                    p[i].is_primitive() ? p[i].dump() : p[i].type_name());
      c.patch_size[i] = p[i].get<int64_t>();
    }
  }

  // The reference only supports these; say so instead of computing something else.
  AVDIT_REQUIRE(c.patch_size == (std::array<int64_t, 3>{1, 2, 2}),
                "H3 config: patch_size must be [1, 2, 2] (the only patch the reference packs)");
  AVDIT_REQUIRE(c.adaln_out_features == kModalities * kAdalnSlices * c.hidden_size,
                "H3 config: adaln_out_features {} != 18 * hidden_size = {}", c.adaln_out_features,
                kModalities * kAdalnSlices * c.hidden_size);
  AVDIT_REQUIRE(c.final_adaln_out_features == 2 * c.hidden_size,
                "H3 config: final_adaln_out_features {} != 2 * hidden_size = {}",
                c.final_adaln_out_features, 2 * c.hidden_size);
  AVDIT_REQUIRE(c.rope_dim() <= c.attention_head_dim,
                "H3 config: 6 * rope_inv_freq_len = {} must not exceed attention_head_dim {}",
                c.rope_dim(), c.attention_head_dim);
  AVDIT_REQUIRE(c.timestep_input_dim % 2 == 0, "H3 config: timestep_input_dim must be even");
  return c;
}

nlohmann::json H3Config::to_json() const {
  nlohmann::json j = {
      {"_class_name", kClassName},
      {"hidden_size", hidden_size},
      {"num_layers", num_layers},
      {"token_refiner_num_layers", token_refiner_num_layers},
      {"num_attention_heads", num_attention_heads},
      {"attention_head_dim", attention_head_dim},
      {"ffn_hidden_size", ffn_hidden_size},
      {"latents_dim", latents_dim},
      {"audio_latents_dim", audio_latents_dim},
      {"patch_size", patch_size},
      {"text_dim", text_dim},
      {"timestep_input_dim", timestep_input_dim},
      {"time_embed_hidden_size", time_embed_hidden_size},
      {"time_embed_dim", time_embed_dim},
      {"adaln_out_features", adaln_out_features},
      {"final_adaln_out_features", final_adaln_out_features},
      {"rope_inv_freq_len", rope_inv_freq_len},
      {"norm_eps", norm_eps},
      {"qk_norm_eps", qk_norm_eps},
      {"final_norm_eps", final_norm_eps},
  };
  if (curve_variant()) j["adaln_curve_grid"] = adaln_curve_grid;
  return j;
}

bool is_h3_config(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  if (j.contains("_class_name") && j["_class_name"].is_string())
    return j["_class_name"].get<std::string>() == kClassName;
  // No class name: H3 is the family with separate audio latents and a token refiner.
  return j.contains("audio_latents_dim") && j.contains("token_refiner_num_layers") &&
         j.contains("adaln_out_features");
}

H3Config resolve_variant(H3Config config, const Checkpoint& ckpt) {
  if (!ckpt.contains(kCurveTable)) {
    config.adaln_curve_grid = 0;
    return config;
  }
  const auto& info = ckpt.info(kCurveTable);
  AVDIT_REQUIRE(info.shape.size() == 2 && info.shape[0] >= 2,
                "H3 checkpoint: '{}' must be [grid >= 2, rank], found {}", kCurveTable,
                fmt::join(info.shape, "x"));
  config.adaln_curve_grid = info.shape[0];
  config.time_embed_dim = info.shape[1];
  return config;
}

}  // namespace avdit::models::h3
