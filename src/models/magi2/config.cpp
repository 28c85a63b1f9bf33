// Parsing of the official MAGI-2 preview JSON into Magi2Config, with the reference's defaults for
// absent fields (inference/common/magi2_config.py) and its derived sizes; every rejection names the
// field.
#include "models/magi2/config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <type_traits>

#include "core/error.h"

namespace avdit::models::magi2 {
namespace {

using nlohmann::json;

// Reads obj[key] as T when present, keeping `value` (the reference default) otherwise. Integers
// must be JSON integers within int64 (3072.5 is refused, not truncated); plausible ranges are
// checked after reading (check_limits).
template <class T>
void read(const json& obj, const char* section, const char* key, T& value) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return;
  auto integer = [&](const json& v) {
    return v.is_number_integer() &&
           (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{INT64_MAX});
  };
  if constexpr (std::is_same_v<T, int64_t>) {
    AVDIT_REQUIRE(integer(*it), "magi2 config: {}.{} must be an integer, found {}", section, key,
                  it->is_primitive() ? it->dump() : it->type_name());
  } else if constexpr (std::is_same_v<T, double>) {
    AVDIT_REQUIRE(it->is_number(), "magi2 config: {}.{} must be a number, found {}", section, key,
                  it->is_primitive() ? it->dump() : it->type_name());
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    AVDIT_REQUIRE(
        it->is_array() && it->size() <= 4096 && std::all_of(it->begin(), it->end(), integer),
        "magi2 config: {}.{} must be a list of at most 4096 integers", section, key);
  }
  try {
    value = it->get<T>();
  } catch (const json::exception& e) {
    throw BadInput(fmt::format("magi2 config: {}.{} has the wrong type ({}): {}", section, key,
                               it->type_name(), e.what()));
  }
}

// Plausible sizes: far above any published model, far below what would exhaust memory or wrap
// size arithmetic (a config of 10^9 layers is refused here, before any work).
void require_range(int64_t v, int64_t lo, int64_t hi, const char* field) {
  AVDIT_REQUIRE(v >= lo && v <= hi, "magi2 config: {} = {} is outside the plausible range [{}, {}]",
                field, v, lo, hi);
}

void require_range(double v, double lo, double hi, const char* field) {
  AVDIT_REQUIRE(std::isfinite(v) && v >= lo && v <= hi,
                "magi2 config: {} = {} is outside the plausible range [{}, {}]", field, v, lo, hi);
}

void check_limits(const Magi2Config& c) {
  constexpr int64_t kWidth = 65536, kLayers = 1024, kHeads = 1024, kInner = int64_t{1} << 20;
  require_range(c.num_layers, 1, kLayers, "arch_config.num_layers");
  require_range(c.hidden_size, 1, kWidth, "arch_config.hidden_size");
  require_range(c.head_dim, 1, 1024, "arch_config.head_dim");
  require_range(c.num_query_groups, 1, kHeads, "arch_config.num_query_groups");
  require_range(c.video_in_channels, 1, kWidth, "arch_config.video_in_channels");
  require_range(c.audio_in_channels, 1, kWidth, "arch_config.audio_in_channels");
  require_range(c.text_in_channels, 1, kWidth, "arch_config.text_in_channels");
  require_range(c.intermediate_factor, 1e-6, 64.0, "arch_config.intermediate_factor");
  require_range(c.attn_softcap, -1e9, 1e9, "arch_config.attn_softcap");
  require_range(c.sink_token_num, 0, 1024, "arch_config.attn_sinks.sink_token_num");
  require_range(c.mhc_num_stream, 1, 64, "arch_config.mhc_config.num_stream");
  require_range(c.mhc_alpha_init, -1e9, 1e9, "arch_config.mhc_config.alpha_init");
  require_range(c.moe.num_experts, 0, kWidth, "arch_config.moe_config.num_experts");
  require_range(c.moe.top_k, 0, kWidth, "arch_config.moe_config.top_k");
  require_range(c.moe.route_scale, -1e9, 1e9, "arch_config.moe_config.route_scale");
  require_range(c.moe.expert_intermediate_size, 0, kInner,
                "arch_config.moe_config.expert_intermediate_size");
  require_range(c.moe.shared_expert_intermediate_size, 0, kInner,
                "arch_config.moe_config.shared_expert_intermediate_size");
  require_range(c.moe.modality_specific_expert_intermediate_size, 0, kInner,
                "arch_config.moe_config.modality_specific_expert_intermediate_size");
  require_range(c.moe.num_heads, 0, kHeads, "arch_config.moe_config.num_heads");
  if (c.moe.split_merge_intermediate_size)
    require_range(*c.moe.split_merge_intermediate_size, 1, kInner,
                  "arch_config.moe_config.split_merge_intermediate_size");
  require_range(c.data_proxy.t_patch_size, 1, 64, "data_proxy_config.t_patch_size");
  require_range(c.data_proxy.patch_size, 1, 64, "data_proxy_config.patch_size");
  require_range(c.data_proxy.time_channel_dim, 0, kInner, "data_proxy_config.time_channel_dim");
}

const json& section_or_empty(const json& obj, const char* key) {
  static const json kEmpty = json::object();
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return kEmpty;
  AVDIT_REQUIRE(it->is_object(), "magi2 config: {} must be an object, found {}", key,
                it->type_name());
  return *it;
}

DType parse_dtype(const std::string& name) {
  if (name == "bfloat16" || name == "torch.bfloat16") return DType::BF16;
  if (name == "float16" || name == "torch.float16") return DType::F16;
  if (name == "float32" || name == "torch.float32") return DType::F32;
  throw BadInput(fmt::format(
      "magi2 config: arch_config.params_dtype '{}' is not one of bfloat16, float16, float32",
      name));
}

void require_positive(int64_t v, const char* field) {
  AVDIT_REQUIRE(v > 0, "magi2 config: {} must be positive, found {}", field, v);
}

}  // namespace

int64_t Magi2Config::groups(int64_t layer) const { return is_mm_layer(layer) ? kNumModalities : 1; }

bool Magi2Config::is_moe_layer(int64_t layer) const {
  return std::find(moe.moe_layers.begin(), moe.moe_layers.end(), layer) != moe.moe_layers.end();
}

bool Magi2Config::is_mm_layer(int64_t layer) const {
  return std::find(mm_layers.begin(), mm_layers.end(), layer) != mm_layers.end();
}

bool is_magi2_config(const json& config) {
  if (!config.is_object()) return false;
  auto it = config.find("arch_config");
  if (it == config.end() || !it->is_object()) return false;
  return it->contains("moe_config") || it->contains("mhc_config");
}

Magi2Config parse_magi2_config(const json& config) {
  AVDIT_REQUIRE(config.is_object(), "magi2 config: expected a JSON object at the top level");
  AVDIT_REQUIRE(config.contains("arch_config"),
                "magi2 config: no arch_config (is this the MAGI-2 preview schema, "
                "configs/magi2_preview.json?)");
  const json& arch = section_or_empty(config, "arch_config");
  Magi2Config c;
  c.mm_layers = {0, 1, 38, 39};
  for (int64_t i = 2; i < 38; ++i) c.moe.moe_layers.push_back(i);

  read(arch, "arch_config", "num_layers", c.num_layers);
  read(arch, "arch_config", "hidden_size", c.hidden_size);
  read(arch, "arch_config", "head_dim", c.head_dim);
  read(arch, "arch_config", "num_query_groups", c.num_query_groups);
  read(arch, "arch_config", "video_in_channels", c.video_in_channels);
  read(arch, "arch_config", "audio_in_channels", c.audio_in_channels);
  read(arch, "arch_config", "text_in_channels", c.text_in_channels);
  std::string dtype_name = "bfloat16";
  read(arch, "arch_config", "params_dtype", dtype_name);
  c.params_dtype = parse_dtype(dtype_name);
  read(arch, "arch_config", "intermediate_factor", c.intermediate_factor);
  read(arch, "arch_config", "mm_layers", c.mm_layers);
  read(arch, "arch_config", "activation_type", c.activation_type);
  read(arch, "arch_config", "attn_softcap", c.attn_softcap);
  read(section_or_empty(arch, "attn_gating"), "arch_config.attn_gating", "enable", c.attn_gating);
  const json& sinks = section_or_empty(arch, "attn_sinks");
  read(sinks, "arch_config.attn_sinks", "enable", c.attn_sinks);
  read(sinks, "arch_config.attn_sinks", "sink_token_num", c.sink_token_num);
  const json& mhc = section_or_empty(arch, "mhc_config");
  read(mhc, "arch_config.mhc_config", "enable", c.mhc_enable);
  read(mhc, "arch_config.mhc_config", "num_stream", c.mhc_num_stream);
  read(mhc, "arch_config.mhc_config", "alpha_init", c.mhc_alpha_init);

  const json& moe = section_or_empty(arch, "moe_config");
  const char* ms = "arch_config.moe_config";
  read(moe, ms, "num_experts", c.moe.num_experts);
  read(moe, ms, "top_k", c.moe.top_k);
  read(moe, ms, "score_func", c.moe.score_func);
  read(moe, ms, "route_norm", c.moe.route_norm);
  read(moe, ms, "route_scale", c.moe.route_scale);
  read(moe, ms, "moe_layers", c.moe.moe_layers);
  read(moe, ms, "expert_intermediate_size", c.moe.expert_intermediate_size);
  read(moe, ms, "shared_expert_intermediate_size", c.moe.shared_expert_intermediate_size);
  read(moe, ms, "modality_specific_expert_intermediate_size",
       c.moe.modality_specific_expert_intermediate_size);
  read(moe, ms, "num_heads", c.moe.num_heads);
  if (auto it = moe.find("split_merge_intermediate_size"); it != moe.end() && !it->is_null()) {
    int64_t v = 0;
    read(moe, ms, "split_merge_intermediate_size", v);
    c.moe.split_merge_intermediate_size = v;
  }

  if (arch.contains("layer_activation_types")) {
    const json& lat = arch["layer_activation_types"];
    AVDIT_REQUIRE(lat.is_object(),
                  "magi2 config: arch_config.layer_activation_types must be an object");
    for (auto& [layer, act] : lat.items()) {
      AVDIT_REQUIRE(
          act.is_string() && act.get<std::string>() == "swiglu7",
          "magi2 config: layer_activation_types[{}] = {}: only swiglu7 exists in the reference",
          layer, act.dump());
    }
  }

  const json& eval = section_or_empty(config, "evaluation_config");
  c.evaluation_config = eval;
  const json& dp = section_or_empty(eval, "data_proxy_config");
  const char* ds = "evaluation_config.data_proxy_config";
  read(dp, ds, "t_patch_size", c.data_proxy.t_patch_size);
  read(dp, ds, "patch_size", c.data_proxy.patch_size);
  read(dp, ds, "spatial_rope_interpolation", c.data_proxy.spatial_rope_interpolation);
  read(dp, ds, "add_time_token", c.data_proxy.add_time_token);
  read(dp, ds, "time_channel_dim", c.data_proxy.time_channel_dim);

  // Validation: plausible sizes first, then only what the reference itself supports for inference.
  check_limits(c);
  require_positive(c.num_layers, "arch_config.num_layers");
  require_positive(c.hidden_size, "arch_config.hidden_size");
  require_positive(c.head_dim, "arch_config.head_dim");
  require_positive(c.num_query_groups, "arch_config.num_query_groups");
  require_positive(c.video_in_channels, "arch_config.video_in_channels");
  require_positive(c.audio_in_channels, "arch_config.audio_in_channels");
  require_positive(c.text_in_channels, "arch_config.text_in_channels");
  AVDIT_REQUIRE(c.activation_type == "swiglu7",
                "magi2 config: arch_config.activation_type '{}' is not supported (the reference "
                "has only swiglu7)",
                c.activation_type);
  AVDIT_REQUIRE(c.mhc_enable, "magi2 config: MAGI-2 inference expects mhc_config.enable = true");
  AVDIT_REQUIRE(c.attn_gating, "magi2 config: MAGI-2 inference expects attn_gating.enable = true");
  AVDIT_REQUIRE(c.attn_sinks, "magi2 config: MAGI-2 inference expects attn_sinks.enable = true");
  AVDIT_REQUIRE(
      c.attn_softcap <= 0,
      "magi2 config: arch_config.attn_softcap = {} (> 0) is not supported; -1 disables it",
      c.attn_softcap);
  require_positive(c.mhc_num_stream, "arch_config.mhc_config.num_stream");
  AVDIT_REQUIRE(c.hidden_size % c.head_dim == 0,
                "magi2 config: hidden_size {} is not a multiple of head_dim {}", c.hidden_size,
                c.head_dim);
  AVDIT_REQUIRE(
      c.head_dim % 8 == 0 && c.head_dim >= 8,
      "magi2 config: head_dim {} must be a multiple of 8 (RoPE uses head_dim/8 bands per axis)",
      c.head_dim);
  for (int64_t l : c.mm_layers)
    AVDIT_REQUIRE(l >= 0 && l < c.num_layers, "magi2 config: mm_layers has {} outside [0, {})", l,
                  c.num_layers);
  for (int64_t l : c.moe.moe_layers)
    AVDIT_REQUIRE(l >= 0 && l < c.num_layers,
                  "magi2 config: moe_config.moe_layers has {} outside [0, {})", l, c.num_layers);
  AVDIT_REQUIRE(c.moe.score_func == "sigmoid" || c.moe.score_func == "softmax",
                "magi2 config: moe_config.score_func '{}' must be sigmoid or softmax",
                c.moe.score_func);
  require_positive(c.data_proxy.t_patch_size, "data_proxy_config.t_patch_size");
  require_positive(c.data_proxy.patch_size, "data_proxy_config.patch_size");
  AVDIT_REQUIRE(
      c.data_proxy.spatial_rope_interpolation == "extra" ||
          c.data_proxy.spatial_rope_interpolation == "inter",
      "magi2 config: data_proxy_config.spatial_rope_interpolation '{}' must be extra or inter",
      c.data_proxy.spatial_rope_interpolation);
  AVDIT_REQUIRE(!c.data_proxy.add_time_token,
                "magi2 config: data_proxy_config.add_time_token = true is not supported (the "
                "preview uses false)");
  AVDIT_REQUIRE(c.data_proxy.time_channel_dim >= 0,
                "magi2 config: data_proxy_config.time_channel_dim must be >= 0");

  c.num_heads_q = c.hidden_size / c.head_dim;
  c.num_heads_kv = c.num_query_groups;
  AVDIT_REQUIRE(c.num_heads_q % c.num_heads_kv == 0,
                "magi2 config: {} query heads (hidden_size/head_dim) are not a multiple of "
                "num_query_groups {}",
                c.num_heads_q, c.num_heads_kv);
  c.residual_width = c.mhc_num_stream * c.hidden_size;
  // The reference: int(hidden * factor * 2 / 3) // 128 * 128 for gated activations (swiglu7 is).
  c.dense_intermediate =
      static_cast<int64_t>(static_cast<double>(c.hidden_size) * c.intermediate_factor * 2.0 / 3.0) /
      128 * 128;
  c.moe_width = c.moe.split_merge_intermediate_size.value_or(c.hidden_size);
  if (!c.moe.moe_layers.empty()) {
    require_positive(c.moe.num_heads, "moe_config.num_heads");
    require_positive(c.moe.num_experts, "moe_config.num_experts");
    AVDIT_REQUIRE(c.moe.top_k > 0 && c.moe.top_k <= c.moe.num_experts,
                  "magi2 config: moe_config.top_k {} must be in [1, num_experts = {}]", c.moe.top_k,
                  c.moe.num_experts);
    AVDIT_REQUIRE(c.moe_width % c.moe.num_heads == 0,
                  "magi2 config: MoE width {} is not a multiple of num_heads {}", c.moe_width,
                  c.moe.num_heads);
    require_positive(c.moe.expert_intermediate_size, "moe_config.expert_intermediate_size");
    require_positive(c.moe.shared_expert_intermediate_size,
                     "moe_config.shared_expert_intermediate_size");
    require_positive(c.moe.modality_specific_expert_intermediate_size,
                     "moe_config.modality_specific_expert_intermediate_size");
  }
  c.moe_head_dim = c.moe.num_heads > 0 ? c.moe_width / c.moe.num_heads : 0;
  bool any_dense = false;
  for (int64_t l = 0; l < c.num_layers; ++l) any_dense = any_dense || !c.is_moe_layer(l);
  AVDIT_REQUIRE(!any_dense || c.dense_intermediate > 0,
                "magi2 config: the dense MLP width floor(int(hidden*factor*2/3)/128)*128 is 0 for "
                "hidden {} x factor {}",
                c.hidden_size, c.intermediate_factor);
  c.rope_bands = c.head_dim / 8;
  c.rope_dim = 6 * c.rope_bands;
  AVDIT_REQUIRE(c.data_proxy.time_channel_dim <= c.residual_width,
                "magi2 config: time_channel_dim {} exceeds the embedding width {}", c.data_proxy.time_channel_dim,
                c.residual_width);
  // The implied model size, roughly and in double: every field may be plausible alone while their
  // product is not (and sums of tensor sizes would wrap int64). The preview has 1.1e11 parameters.
  const double h = static_cast<double>(c.hidden_size), layers = static_cast<double>(c.num_layers);
  const double per_layer =
      3 * h *
          (4 * h + 4 * static_cast<double>(c.residual_width) +
           3 * static_cast<double>(c.dense_intermediate)) +
      3 * static_cast<double>(c.moe.num_experts) * static_cast<double>(c.moe_width) *
          static_cast<double>(c.moe.expert_intermediate_size) +
      9 * h *
          static_cast<double>(c.moe.shared_expert_intermediate_size +
                              c.moe.modality_specific_expert_intermediate_size);
  AVDIT_REQUIRE(layers * per_layer <= 0x1p46,
                "magi2 config: the sizes imply about {:.3g} parameters, beyond the plausible limit "
                "of 7e13 (check "
                "num_layers, hidden_size, moe_config sizes)",
                layers * per_layer);
  c.max_in_channels = std::max({c.video_in_channels, c.audio_in_channels, c.text_in_channels});
  c.out_channels = std::max(c.video_in_channels, c.audio_in_channels);
  return c;
}

}  // namespace avdit::models::magi2
