// Qwen3VLTextConfig parsing: every size the forward depends on is required, so a config of another
// family fails here with the field named rather than later with a shape mismatch.
#include "models/text/qwen3vl/config.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace avdit::models::text::qwen3vl {
namespace {

using nlohmann::json;

std::string shown(const json& v) { return v.is_primitive() ? v.dump() : v.type_name(); }

// Positive integers up to `max` (far above any published model, far below sizes that would wrap
// size arithmetic); fractional values are refused, not truncated.
int64_t get_int(const json& j, const char* key, int64_t max) {
  AVDIT_REQUIRE(j.contains(key), "Qwen3-VL config: text_config has no field '{}'", key);
  const json& v = j[key];
  AVDIT_REQUIRE(v.is_number_integer() &&
                    !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) &&
                    v.get<int64_t>() > 0 && v.get<int64_t>() <= max,
                "Qwen3-VL config: text_config.{} must be an integer in [1, {}], found {}", key, max,
                shown(v));
  return v.get<int64_t>();
}

double get_positive(const json& j, const char* key, double fallback, double max) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  AVDIT_REQUIRE(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0 &&
                    v.get<double>() < max,
                "Qwen3-VL config: text_config.{} must be a number in (0, {}), found {}", key, max,
                shown(v));
  return v.get<double>();
}

// A field that must hold one value for this forward to be the reference's (absent: the default).
void require_value(const json& j, const char* key, const json& expected, const char* why) {
  if (j.contains(key))
    AVDIT_REQUIRE(j[key] == expected, "Qwen3-VL config: text_config.{} is {}, expected {} ({})",
                  key, j[key].dump(), expected.dump(), why);
}

// rope_scaling (the release's schema) or rope_parameters (newer transformers): theta and the
// M-RoPE section.
void read_rope(const json& t, Qwen3VLTextConfig& c) {
  const json* rope = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (t.contains(key) && t[key].is_object()) rope = &t[key];
  if (rope) {
    require_value(*rope, "rope_type", "default", "only the default RoPE is implemented");
    c.rope_theta = get_positive(*rope, "rope_theta", c.rope_theta, 1e12);
    if (rope->contains("mrope_section")) {
      const json& s = (*rope)["mrope_section"];
      AVDIT_REQUIRE(s.is_array() && s.size() == 3,
                    "Qwen3-VL config: mrope_section must be three integers (t, h, w), found {}",
                    s.dump());
      for (size_t i = 0; i < 3; ++i) {
        AVDIT_REQUIRE(s[i].is_number_integer() && s[i].get<int64_t>() >= 0,
                      "Qwen3-VL config: mrope_section must be three integers (t, h, w), found {}",
                      s.dump());
        c.mrope_section[i] = s[i].get<int64_t>();
      }
    }
  }
  c.rope_theta = get_positive(t, "rope_theta", c.rope_theta, 1e12);
}

}  // namespace

int64_t Qwen3VLTextConfig::checked_selected_layers(int64_t selected) const {
  AVDIT_REQUIRE(selected >= 1 && selected <= num_hidden_layers,
                "Qwen3-VL text encoder: {} selected layers, but the config has {} "
                "(num_hidden_layers); choose 1..{} (MiniMax-H3 uses {})",
                selected, num_hidden_layers, num_hidden_layers, kH3SelectedLayers);
  return selected;
}

Qwen3VLTextConfig Qwen3VLTextConfig::from_json(const json& j) {
  AVDIT_REQUIRE(j.is_object() && j.contains("text_config") && j["text_config"].is_object(),
                "Qwen3-VL config: no text_config object (is this a Qwen3-VL config.json?)");
  const json& t = j["text_config"];
  Qwen3VLTextConfig c;
  c.vocab_size = get_int(t, "vocab_size", int64_t{1} << 24);
  c.hidden_size = get_int(t, "hidden_size", 65536);
  c.intermediate_size = get_int(t, "intermediate_size", int64_t{1} << 20);
  c.num_hidden_layers = get_int(t, "num_hidden_layers", 1024);
  c.num_attention_heads = get_int(t, "num_attention_heads", 1024);
  c.num_key_value_heads = get_int(t, "num_key_value_heads", 1024);
  // Qwen3 sets head_dim explicitly (64 x 128 = 8192 != 5120); the fallback is transformers'.
  c.head_dim =
      t.contains("head_dim") ? get_int(t, "head_dim", 1024) : c.hidden_size / c.num_attention_heads;
  c.rms_norm_eps = get_positive(t, "rms_norm_eps", c.rms_norm_eps, 1.0);
  read_rope(t, c);
  require_value(t, "hidden_act", "silu", "the MLP is SwiGLU with SiLU");
  require_value(t, "attention_bias", false, "the projections have no biases");
  AVDIT_REQUIRE(c.num_attention_heads % c.num_key_value_heads == 0,
                "Qwen3-VL config: num_attention_heads {} is not a multiple of num_key_value_heads "
                "{}",
                c.num_attention_heads, c.num_key_value_heads);
  AVDIT_REQUIRE(c.head_dim % 2 == 0, "Qwen3-VL config: head_dim {} must be even (RoPE pairs)",
                c.head_dim);
  const int64_t section = c.mrope_section[0] + c.mrope_section[1] + c.mrope_section[2];
  AVDIT_REQUIRE(section == c.head_dim / 2,
                "Qwen3-VL config: mrope_section sums to {}, expected head_dim / 2 = {}", section,
                c.head_dim / 2);
  return c;
}

}  // namespace avdit::models::text::qwen3vl
