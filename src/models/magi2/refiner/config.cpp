// Parsing of the official refiner JSON (inference/common/magi2_config.py: Magi2RefinerModelConfig,
// Magi2RefinerDataProxyConfig, the refiner keys of EvaluationConfig; refiner_data_proxy.py for the
// window keys) with the reference's defaults; every rejection names the field.
#include "models/magi2/refiner/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <climits>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "io/safetensors.h"

namespace avdit::models::magi2::refiner {
namespace {

using nlohmann::json;

// obj[key] as T when present and not null, `value` (the reference default) kept otherwise.
template <class T>
void read(const json& obj, const std::string& where, const char* key, T& value) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return;
  auto integer = [](const json& v) {
    return v.is_number_integer() &&
           (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{INT64_MAX});
  };
  bool ok = true;
  if constexpr (std::is_same_v<T, int64_t>) {
    ok = integer(*it);
  } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    ok = it->is_number();
  } else if constexpr (std::is_same_v<T, bool>) {
    ok = it->is_boolean();
  } else if constexpr (std::is_same_v<T, std::string>) {
    ok = it->is_string();
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    ok = it->is_array() && it->size() <= 4096 && std::all_of(it->begin(), it->end(), integer);
  }
  AVDIT_REQUIRE(ok, "magi2 refiner config: {}.{} has the wrong type: {}", where, key,
                it->is_primitive() ? it->dump() : std::string(it->type_name()));
  value = it->get<T>();
}

const json& object_or_empty(const json& obj, const std::string& where, const char* key) {
  static const json kEmpty = json::object();
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return kEmpty;
  AVDIT_REQUIRE(it->is_object(), "magi2 refiner config: {}.{} must be an object, found {}", where,
                key, it->type_name());
  return *it;
}

void require_range(int64_t v, int64_t lo, int64_t hi, const char* field) {
  AVDIT_REQUIRE(v >= lo && v <= hi,
                "magi2 refiner config: {} = {} is outside the supported range [{}, {}]", field, v,
                lo, hi);
}

DType parse_dtype(const std::string& name) {
  if (name == "bfloat16" || name == "torch.bfloat16") return DType::BF16;
  if (name == "float16" || name == "torch.float16") return DType::F16;
  if (name == "float32" || name == "torch.float32") return DType::F32;
  throw BadInput(
      fmt::format("magi2 refiner config: magi2_refiner_arch_config.params_dtype '{}' is not one of "
                  "bfloat16, float16, float32",
                  name));
}

json merge(json base, const json& overlay) {
  for (auto& [key, value] : overlay.items()) {
    auto it = base.find(key);
    if (value.is_object() && it != base.end() && it->is_object())
      *it = merge(*it, value);
    else
      base[key] = value;
  }
  return base;
}

json resolve(json config, const std::filesystem::path& dir, int depth) {
  AVDIT_REQUIRE(config.is_object(),
                "magi2 refiner config: expected a JSON object at the top level");
  auto it = config.find("extends");
  if (it == config.end()) return config;
  AVDIT_REQUIRE(it->is_string(), "magi2 refiner config: \"extends\" must name a file, found {}",
                it->dump());
  AVDIT_REQUIRE(depth < 8, "magi2 refiner config: more than 8 levels of \"extends\" (a cycle?)");
  const std::filesystem::path base_file = dir / it->get<std::string>();
  config.erase(it);
  json base = resolve(read_json(base_file), base_file.parent_path(), depth + 1);
  return merge(std::move(base), config);
}

void parse_window(const json& dp, RefinerDataProxyConfig& d) {
  const std::string ds = "evaluation_config.magi2_refiner_data_proxy_config";
  const json& attn = object_or_empty(dp, ds, "attn_config");
  const json& window = object_or_empty(attn, ds + ".attn_config", "window");
  // The data proxy reads {**attn_config, **window}: a window key wins over the same key above it.
  json cfg = attn;
  cfg.erase("window");
  for (auto& [k, v] : window.items()) cfg[k] = v;
  const std::string ws = ds + ".attn_config";
  std::string mode = "dense";
  read(attn, ws, "mode", mode);
  if (mode == "local") mode = "window";
  AVDIT_REQUIRE(mode == "window",
                "magi2 refiner config: {}.mode '{}' is not supported (the refiner runs window "
                "attention: mode \"window\")",
                ws, mode);
  std::string level = "block", block_mode = "scan";
  read(cfg, ws + ".window", "level", level);
  read(cfg, ws + ".window", "window_block_mode", block_mode);
  read(cfg, ws + ".window", "block_mode", block_mode);
  AVDIT_REQUIRE(level == "block" && block_mode == "grid",
                "magi2 refiner config: {}.window level '{}' / block_mode '{}' is not supported "
                "(only level \"block\" with block_mode \"grid\", the shipping refiner's)",
                ws, level, block_mode);
  WindowConfig& w = d.window;
  read(cfg, ws + ".window", "block_t_size", w.block_t);
  read(cfg, ws + ".window", "block_size", w.block_h);
  w.block_w = w.block_h;
  read(cfg, ws + ".window", "block_t_radius", w.radius_t);
  read(cfg, ws + ".window", "block_h_radius", w.radius_h);
  read(cfg, ws + ".window", "block_w_radius", w.radius_w);
  read(cfg, ws + ".window", "auto_range_merge", w.auto_range_merge);
  read(cfg, ws + ".window", "sparse_load", w.sparse_load);
  require_range(w.block_t, 1, 4096, "attn_config.block_t_size");
  require_range(w.block_h, 1, 4096, "attn_config.block_size");
  require_range(w.radius_t, 0, 4096, "attn_config.window.block_t_radius");
  require_range(w.radius_h, 0, 4096, "attn_config.window.block_h_radius");
  require_range(w.radius_w, 0, 4096, "attn_config.window.block_w_radius");
}

}  // namespace

int64_t RefinerConfig::groups(int64_t layer) const {
  return std::find(mm_layers.begin(), mm_layers.end(), layer) != mm_layers.end() ? 3 : 1;
}

bool RefinerConfig::is_local_layer(int64_t layer) const {
  return std::find(local_attn_layers.begin(), local_attn_layers.end(), layer) !=
         local_attn_layers.end();
}

json resolve_extends(json config, const std::filesystem::path& dir) {
  return resolve(std::move(config), dir, 0);
}

json read_config_with_extends(const std::filesystem::path& file) {
  return resolve_extends(read_json(file), file.parent_path());
}

bool is_refiner_config(const json& config) {
  return config.is_object() && config.contains("magi2_refiner_arch_config");
}

RefinerConfig parse_refiner_config(const json& config) {
  AVDIT_REQUIRE(config.is_object(),
                "magi2 refiner config: expected a JSON object at the top level");
  AVDIT_REQUIRE(is_refiner_config(config),
                "magi2 refiner config: no magi2_refiner_arch_config (is this "
                "configs/magi2_refiner.json, with its \"extends\" resolved?)");
  const std::string as = "magi2_refiner_arch_config";
  const json& arch = object_or_empty(config, "", "magi2_refiner_arch_config");
  RefinerConfig c;
  read(arch, as, "num_layers", c.num_layers);
  // Magi2RefinerModelConfig's default is list(range(30)) whatever num_layers is; names past the
  // last layer are never asked for.
  for (int64_t i = 0; i < 30; ++i) c.local_attn_layers.push_back(i);
  read(arch, as, "hidden_size", c.hidden_size);
  read(arch, as, "head_dim", c.head_dim);
  read(arch, as, "num_query_groups", c.num_query_groups);
  read(arch, as, "video_in_channels", c.video_in_channels);
  read(arch, as, "audio_in_channels", c.audio_in_channels);
  read(arch, as, "text_in_channels", c.text_in_channels);
  std::string dtype = "bfloat16";
  read(arch, as, "params_dtype", dtype);
  c.params_dtype = parse_dtype(dtype);
  read(arch, as, "mm_layers", c.mm_layers);
  read(arch, as, "local_attn_layers", c.local_attn_layers);
  read(arch, as, "enable_attn_gating", c.enable_attn_gating);
  read(arch, as, "activation_type", c.activation_type);
  std::vector<int64_t> post_norm;
  read(arch, as, "post_norm_layers", post_norm);
  AVDIT_REQUIRE(post_norm.empty(),
                "magi2 refiner config: {}.post_norm_layers is not supported (the shipping "
                "refiner has none)",
                as);
  for (auto& [layer, act] : object_or_empty(arch, as, "layer_activation_types").items())
    AVDIT_REQUIRE(act == "swiglu7",
                  "magi2 refiner config: {}.layer_activation_types[{}] = {}: only swiglu7 exists",
                  as, layer, act.dump());

  require_range(c.num_layers, 1, 1024, "magi2_refiner_arch_config.num_layers");
  require_range(c.hidden_size, 8, 65536, "magi2_refiner_arch_config.hidden_size");
  require_range(c.head_dim, 8, 1024, "magi2_refiner_arch_config.head_dim");
  require_range(c.num_query_groups, 1, 1024, "magi2_refiner_arch_config.num_query_groups");
  require_range(c.video_in_channels, 1, 65536, "magi2_refiner_arch_config.video_in_channels");
  require_range(c.audio_in_channels, 1, 65536, "magi2_refiner_arch_config.audio_in_channels");
  require_range(c.text_in_channels, 1, 65536, "magi2_refiner_arch_config.text_in_channels");
  AVDIT_REQUIRE(c.activation_type == "swiglu7",
                "magi2 refiner config: {}.activation_type '{}' is not supported (only swiglu7)", as,
                c.activation_type);
  AVDIT_REQUIRE(c.enable_attn_gating,
                "magi2 refiner config: {}.enable_attn_gating = false is not supported", as);
  AVDIT_REQUIRE(c.hidden_size % c.head_dim == 0 && c.head_dim % 8 == 0,
                "magi2 refiner config: hidden_size {} must be a multiple of head_dim {}, itself a "
                "multiple of 8 (RoPE uses head_dim/8 bands per axis)",
                c.hidden_size, c.head_dim);
  for (int64_t l : c.mm_layers)
    AVDIT_REQUIRE(l >= 0 && l < c.num_layers,
                  "magi2 refiner config: {}.mm_layers names layer {} outside [0, {})", as, l,
                  c.num_layers);

  c.num_heads_q = c.hidden_size / c.head_dim;
  c.num_heads_kv = c.num_query_groups;
  AVDIT_REQUIRE(c.num_heads_q % c.num_heads_kv == 0,
                "magi2 refiner config: {} query heads are not a multiple of num_query_groups {}",
                c.num_heads_q, c.num_heads_kv);
  c.intermediate =
      static_cast<int64_t>(static_cast<double>(c.hidden_size) * 4.0 * 2.0 / 3.0) / 4 * 4;
  c.rope_bands = c.head_dim / 8;
  c.rope_dim = 6 * c.rope_bands;
  c.max_in_channels = std::max({c.video_in_channels, c.audio_in_channels, c.text_in_channels});
  c.out_channels = std::max(c.video_in_channels, c.audio_in_channels);

  // evaluation_config: the data proxy (its class defaults when the object is given, the
  // EvaluationConfig factory's values when it is not) and the sampler keys.
  const json& eval = object_or_empty(config, "", "evaluation_config");
  const std::string es = "evaluation_config";
  const std::string ds = es + ".magi2_refiner_data_proxy_config";
  RefinerDataProxyConfig& d = c.data_proxy;
  if (auto it = eval.find("magi2_refiner_data_proxy_config"); it != eval.end() && !it->is_null()) {
    const json& dp = object_or_empty(eval, es, "magi2_refiner_data_proxy_config");
    d.patch_size = 2;  // Magi2RefinerDataProxyConfig's own default
    read(dp, ds, "t_patch_size", d.t_patch_size);
    read(dp, ds, "patch_size", d.patch_size);
    read(dp, ds, "spatial_rope_interpolation", d.spatial_rope_interpolation);
    read(dp, ds, "coords_style", d.coords_style);
    std::string condition = "none";
    read(dp, ds, "magi2_refiner_condition_input", condition);
    AVDIT_REQUIRE(condition == "none",
                  "magi2 refiner config: {}.magi2_refiner_condition_input '{}' is not supported",
                  ds, condition);
    parse_window(dp, d);
  } else {
    throw BadInput(fmt::format(
        "magi2 refiner config: {} is absent, so the refiner would run dense attention; only "
        "window attention (attn_config.mode \"window\") is supported",
        ds));
  }
  AVDIT_REQUIRE(d.t_patch_size == 1 && d.patch_size == 1,
                "magi2 refiner config: {} patch sizes (t {}, h/w {}) are not supported (the "
                "shipping refiner uses 1, 1)",
                ds, d.t_patch_size, d.patch_size);
  AVDIT_REQUIRE(d.spatial_rope_interpolation == "extra" || d.spatial_rope_interpolation == "inter",
                "magi2 refiner config: {}.spatial_rope_interpolation '{}' must be extra or inter",
                ds, d.spatial_rope_interpolation);
  AVDIT_REQUIRE(d.coords_style == "v1" || d.coords_style == "v2",
                "magi2 refiner config: {}.coords_style '{}' must be v1 or v2", ds, d.coords_style);

  RefinerSamplerConfig& s = c.sampler;
  read(eval, es, "magi2_refiner_num_inference_steps", s.num_inference_steps);
  double shift = 5.0;  // EvaluationConfig.shift
  read(eval, es, "shift", shift);
  s.shift = shift;
  read(eval, es, "magi2_refiner_shift", s.shift);
  read(eval, es, "magi2_refiner_video_txt_guidance_scale", s.video_guidance);
  read(eval, es, "magi2_refiner_audio_txt_guidance_scale", s.audio_guidance);
  read(eval, es, "magi2_refiner_noise_value", s.noise_value);
  std::vector<int64_t> stride = {4, 16, 16};
  read(eval, es, "magi2_refiner_vae_stride", stride);
  AVDIT_REQUIRE(
      stride.size() == 3 &&
          std::all_of(stride.begin(), stride.end(), [](int64_t v) { return v >= 1 && v <= 1024; }),
      "magi2 refiner config: {}.magi2_refiner_vae_stride must be 3 values in [1, 1024]", es);
  std::copy(stride.begin(), stride.end(), s.vae_stride);
  read(eval, es, "magi2_refiner_audio_noise_scale", s.audio_noise_scale);
  s.use_cfg_trick = true;  // EvaluationConfig's default
  read(eval, es, "use_cfg_trick", s.use_cfg_trick);
  read(eval, es, "cfg_trick_start_frame", s.cfg_trick_start_frame);
  read(eval, es, "cfg_trick_value", s.cfg_trick_value);
  require_range(s.num_inference_steps, 1, 1000,
                "evaluation_config.magi2_refiner_num_inference_steps");
  require_range(s.noise_value, 0, 999, "evaluation_config.magi2_refiner_noise_value");
  AVDIT_REQUIRE(std::isfinite(s.shift) && s.shift > 0,
                "magi2 refiner config: the refiner shift {} must be a positive number", s.shift);
  AVDIT_REQUIRE(std::isfinite(s.video_guidance) && std::isfinite(s.audio_guidance) &&
                    std::isfinite(s.audio_noise_scale),
                "magi2 refiner config: the refiner guidance scales and audio noise scale must be "
                "finite");
  return c;
}

RefinerConfig read_refiner_config(const std::filesystem::path& file, json* merged) {
  AVDIT_REQUIRE(std::filesystem::is_regular_file(file),
                "{}: no such file (a MAGI-2 refiner config, with the preview config it extends "
                "beside it)",
                file.string());
  try {
    json j = read_config_with_extends(file);
    RefinerConfig rc = parse_refiner_config(j);
    if (merged) *merged = std::move(j);
    return rc;
  } catch (const BadInput& e) {
    throw BadInput(fmt::format("{}: {}", file.string(), e.what()));
  }
}

RefinerConfig refiner_config_from_checkpoint(const Checkpoint& ckpt) {
  const json* config = ckpt.config();
  AVDIT_REQUIRE(config != nullptr, "{}: no config.json beside the refiner weights",
                ckpt.dir().string());
  return parse_refiner_config(resolve_extends(*config, ckpt.dir()));
}

}  // namespace avdit::models::magi2::refiner
