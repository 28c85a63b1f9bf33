// Parsing of the Qwen3.5 text config (see config.h). RoPE fields are read from `rope_parameters`
// (transformers 5) with the older top-level / `rope_scaling` spellings as a fallback, so both
// generations of the released config.json load.
#include "models/text/qwen35/config.h"

#include <cmath>

#include "core/error.h"

namespace avdit::models::text::qwen35 {
namespace {

using nlohmann::json;

int64_t positive_int(const json& j, const char* key) {
  AVDIT_REQUIRE(j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() > 0,
                "Qwen3.5 config.json: text_config.{} must be a positive integer", key);
  return j[key].get<int64_t>();
}

// The first of `key` in rope_parameters, rope_scaling or the section itself.
double rope_field(const json& j, const char* key, double fallback) {
  for (const char* section : {"rope_parameters", "rope_scaling"})
    if (j.contains(section) && j[section].is_object() && j[section].contains(key) &&
        j[section][key].is_number())
      return j[section][key].get<double>();
  if (j.contains(key) && j[key].is_number()) return j[key].get<double>();
  return fallback;
}

}  // namespace

int64_t Qwen35TextConfig::rotary_dims() const {
  const auto r = static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
  return r - r % 2;
}

Qwen35TextConfig parse_qwen35_text_config(const json& config) {
  AVDIT_REQUIRE(config.is_object(), "Qwen3.5 config.json: expected a JSON object");
  const json& t = config.contains("text_config") ? config["text_config"] : config;
  AVDIT_REQUIRE(t.is_object(), "Qwen3.5 config.json: text_config must be an object");
  Qwen35TextConfig c;
  c.vocab_size = positive_int(t, "vocab_size");
  c.hidden_size = positive_int(t, "hidden_size");
  c.intermediate_size = positive_int(t, "intermediate_size");
  c.num_hidden_layers = positive_int(t, "num_hidden_layers");
  c.num_attention_heads = positive_int(t, "num_attention_heads");
  c.num_key_value_heads = positive_int(t, "num_key_value_heads");
  c.head_dim =
      t.contains("head_dim") ? positive_int(t, "head_dim") : c.hidden_size / c.num_attention_heads;
  c.linear_num_key_heads = positive_int(t, "linear_num_key_heads");
  c.linear_num_value_heads = positive_int(t, "linear_num_value_heads");
  c.linear_key_head_dim = positive_int(t, "linear_key_head_dim");
  c.linear_value_head_dim = positive_int(t, "linear_value_head_dim");
  if (t.contains("linear_conv_kernel_dim"))
    c.linear_conv_kernel_dim = positive_int(t, "linear_conv_kernel_dim");
  if (t.contains("rms_norm_eps") && t["rms_norm_eps"].is_number())
    c.rms_norm_eps = t["rms_norm_eps"].get<double>();
  c.rope_theta = rope_field(t, "rope_theta", c.rope_theta);
  c.partial_rotary_factor = rope_field(t, "partial_rotary_factor", c.partial_rotary_factor);

  // layer_types when given; otherwise every full_attention_interval-th layer is full attention,
  // as transformers fills it in.
  if (t.contains("layer_types")) {
    AVDIT_REQUIRE(t["layer_types"].is_array() &&
                      static_cast<int64_t>(t["layer_types"].size()) == c.num_hidden_layers,
                  "Qwen3.5 config.json: text_config.layer_types must list {} layers",
                  c.num_hidden_layers);
    for (const json& v : t["layer_types"]) {
      const std::string s = v.is_string() ? v.get<std::string>() : "";
      AVDIT_REQUIRE(s == "linear_attention" || s == "full_attention",
                    "Qwen3.5 config.json: layer type '{}' (expected linear_attention or "
                    "full_attention)",
                    v.dump());
      c.layer_types.push_back(s == "full_attention" ? LayerType::FullAttention
                                                    : LayerType::LinearAttention);
    }
  } else {
    const int64_t every = positive_int(t, "full_attention_interval");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % every == 0 ? LayerType::FullAttention
                                                   : LayerType::LinearAttention);
  }

  AVDIT_REQUIRE(c.num_attention_heads % c.num_key_value_heads == 0,
                "Qwen3.5 config.json: {} attention heads are not a multiple of {} kv heads",
                c.num_attention_heads, c.num_key_value_heads);
  AVDIT_REQUIRE(c.linear_num_value_heads % c.linear_num_key_heads == 0,
                "Qwen3.5 config.json: {} linear value heads are not a multiple of {} key heads",
                c.linear_num_value_heads, c.linear_num_key_heads);
  AVDIT_REQUIRE(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1 && c.rotary_dims() >= 2,
                "Qwen3.5 config.json: partial_rotary_factor {} gives no RoPE dims for head_dim {}",
                c.partial_rotary_factor, c.head_dim);
  AVDIT_REQUIRE(c.rope_theta > 1 && std::isfinite(c.rope_theta),
                "Qwen3.5 config.json: rope_theta {} must be a finite number above 1", c.rope_theta);
  AVDIT_REQUIRE(c.rms_norm_eps > 0 && c.rms_norm_eps < 1,
                "Qwen3.5 config.json: rms_norm_eps {} outside (0, 1)", c.rms_norm_eps);
  return c;
}

}  // namespace avdit::models::text::qwen35
