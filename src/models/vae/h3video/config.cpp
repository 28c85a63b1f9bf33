// H3VideoConfig parsing: the sizes the forward depends on are required; the switches that would
// make it another network are checked against the one value this forward implements.
#include "models/vae/h3video/config.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace avdit::models::vae::h3video {
namespace {

using nlohmann::json;

std::string shown(const json& v) { return v.is_primitive() ? v.dump() : v.type_name(); }

int64_t get_int(const json& j, const char* file, const char* key, int64_t min, int64_t max) {
  AVDIT_REQUIRE(j.contains(key), "H3 video VAE {}: no field '{}'", file, key);
  const json& v = j[key];
  AVDIT_REQUIRE(v.is_number_integer() &&
                    !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) &&
                    v.get<int64_t>() >= min && v.get<int64_t>() <= max,
                "H3 video VAE {}: {} must be an integer in [{}, {}], found {}", file, key, min, max,
                shown(v));
  return v.get<int64_t>();
}

double get_positive(const json& j, const char* key, double fallback) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  AVDIT_REQUIRE(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0,
                "H3 video VAE source/config.json: vit_decoder_kwargs.{} must be a positive number, "
                "found {}",
                key, shown(v));
  return v.get<double>();
}

// A field that must hold `want` for this forward to be the reference's (absent: the default).
void require_value(const json& j, const char* where, const char* key, const json& want,
                   bool required = false) {
  if (!j.contains(key)) {
    AVDIT_REQUIRE(!required, "H3 video VAE {}: no field '{}'", where, key);
    return;
  }
  AVDIT_REQUIRE(j[key] == want, "H3 video VAE {}: {} is {}, this decoder computes {} only", where,
                key, j[key].dump(), want.dump());
}

// The product of a stride list (space_down, time_down): the VAE's compression per axis.
int64_t product(const json& j, const char* key) {
  AVDIT_REQUIRE(j.contains(key) && j[key].is_array() && !j[key].empty(),
                "H3 video VAE source/config.json: no list '{}'", key);
  int64_t p = 1;
  for (const json& v : j[key]) {
    AVDIT_REQUIRE(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 8,
                  "H3 video VAE source/config.json: {} holds {}, expected strides in [1, 8]", key,
                  shown(v));
    p *= v.get<int64_t>();
  }
  return p;
}

std::vector<float> floats(const json& j, const char* key, int64_t n) {
  AVDIT_REQUIRE(j.contains(key) && j[key].is_array() && static_cast<int64_t>(j[key].size()) == n,
                "H3 video VAE config.json: {} must list {} numbers (one per latent channel)", key,
                n);
  std::vector<float> out;
  for (const json& v : j[key]) {
    AVDIT_REQUIRE(v.is_number() && std::isfinite(v.get<double>()),
                  "H3 video VAE config.json: {} holds {}, expected finite numbers", key, shown(v));
    out.push_back(v.get<float>());
  }
  return out;
}

}  // namespace

H3VideoConfig H3VideoConfig::from_json(const json& outer, const json& source) {
  H3VideoConfig c;
  const char* src = "source/config.json";
  require_value(source, src, "_class_name", "AutoencoderKLLegacy");
  require_value(source, src, "use_vit_decoder", true, true);
  require_value(source, src, "causal_decoder", false);
  c.z_channels = get_int(source, src, "z_channels", 1, 4096);
  AVDIT_REQUIRE(!source.contains("embed_dim") || source["embed_dim"] == c.z_channels,
                "H3 video VAE {}: embed_dim {} differs from z_channels {} (post_quant_conv maps "
                "embed_dim to z_channels; only equal sizes are implemented)",
                src, source.value("embed_dim", json()).dump(), c.z_channels);
  c.out_channels = get_int(source, src, "out_ch", 1, 16);
  c.ratio = product(source, "space_down");
  c.ratio_t = product(source, "time_down");
  AVDIT_REQUIRE(source.contains("vit_decoder_kwargs") && source["vit_decoder_kwargs"].is_object(),
                "H3 video VAE {}: no vit_decoder_kwargs", src);
  const json& v = source["vit_decoder_kwargs"];
  const char* vk = "source/config.json vit_decoder_kwargs";
  c.heads = get_int(v, vk, "heads", 1, 1024);
  c.dim_head = get_int(v, vk, "dim_head", 2, 1024);
  c.num_layers = get_int(v, vk, "num_layers", 0, 1024);
  c.rope_dim_ratio = get_positive(v, "rope_dim_ratio", 1.0);
  c.rope_theta = get_positive(v, "rope_theta", 100.0);
  c.eps = get_positive(v, "eps", 1e-5);
  if (v.contains("num_register_tokens"))
    c.num_register_tokens = get_int(v, vk, "num_register_tokens", 0, 1024);
  require_value(v, vk, "norm_type", "rms_norm", true);
  require_value(v, vk, "norm_affine", true);
  require_value(v, vk, "qk_norm_type", "rms_norm", true);
  require_value(v, vk, "qk_norm_affine", false);
  require_value(v, vk, "ffn_activation_fn", "silu", true);
  require_value(v, vk, "ffn_use_gated", true, true);
  require_value(v, vk, "t_causal", false);
  require_value(v, vk, "bias", true);
  const int64_t rd = c.rope_dim();
  AVDIT_REQUIRE(rd > 0 && rd <= c.dim_head && rd % 6 == 0,
                "H3 video VAE {}: int(dim_head * rope_dim_ratio) = {} must be a positive multiple "
                "of 6 (2 x 3 axes) within dim_head {}",
                vk, rd, c.dim_head);

  const char* out = "config.json";
  c.clip_length = get_int(outer, out, "vae_clip_length", 1, 4096);
  c.token_drop = get_int(outer, out, "vae_token_drop", 0, 4096);
  c.decoder_tiling = get_int(outer, out, "vae_decoder_tiling", 0, 1) == 1;
  c.tile_size = get_int(outer, out, "vae_tile_size", 1, 1 << 16);
  c.tile_overlap_min = get_int(outer, out, "vae_tile_overlap_min", 0, 1 << 16);
  require_value(outer, out, "vae_decoder_parallel", 0);
  require_value(outer, out, "isolated_first_frame", false);
  require_value(outer, out, "isolated_last_frame", false);
  AVDIT_REQUIRE(c.token_drop < (c.clip_length + c.ratio_t - 1) / c.ratio_t,
                "H3 video VAE config.json: vae_token_drop {} must be below the tokens of one clip "
                "({})",
                c.token_drop, (c.clip_length + c.ratio_t - 1) / c.ratio_t);
  c.latents_mean = floats(outer, "latents_mean", c.z_channels);
  c.latents_std = floats(outer, "latents_std", c.z_channels);
  return c;
}

}  // namespace avdit::models::vae::h3video
