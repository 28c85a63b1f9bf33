// Checkpoint (or random values) -> H3Weights by official names on an execution context, validated
// against the tensor specs first so that a wrong file fails with one clear message before any
// compute.
#include "models/h3/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/h3/tensor_specs.h"
#include "ops/random.h"
#include "ops/rows.h"

namespace avdit::models::h3 {
namespace {

// The shard that holds `name`, for error messages.
std::string file_holding(const Checkpoint& ckpt, const std::string& name) {
  for (const auto& f : ckpt.files())
    if (f->find(name)) return f->path().string();
  return ckpt.source().string();
}

bool is_float(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

void validate(const Checkpoint& ckpt, const H3Config& config) {
  const std::string where = ckpt.source().string();
  for (const TensorSpec& spec : h3_tensor_specs(config)) {
    AVDIT_REQUIRE(ckpt.contains(spec.name),
                  "H3 checkpoint {}: missing tensor '{}' (expected shape [{}] {}); is this a "
                  "MiniMax-H3 transformer checkpoint matching its config.json?",
                  where, spec.name, fmt::join(spec.shape, ", "), dtype_name(spec.dtype));
    const auto& info = ckpt.info(spec.name);
    AVDIT_REQUIRE(info.shape == spec.shape,
                  "H3 checkpoint {}: tensor '{}' has shape [{}], expected [{}] for this config",
                  file_holding(ckpt, spec.name), spec.name, fmt::join(info.shape, ", "),
                  fmt::join(spec.shape, ", "));
    AVDIT_REQUIRE(is_float(info.dtype),
                  "H3 checkpoint {}: tensor '{}' has dtype {}, expected {} (or F32/BF16/F16)",
                  file_holding(ckpt, spec.name), spec.name, dtype_name(info.dtype),
                  dtype_name(spec.dtype));
  }
}

using Get = std::function<Tensor(const std::string&)>;

BlockWeights load_block(const Get& get, const std::string& p, bool with_adaln) {
  BlockWeights b;
  b.norm1 = get(p + "norm1.weight");
  b.norm2 = get(p + "norm2.weight");
  b.qkv_proj = get(p + "attn.qkv_proj.weight");
  b.q_norm = get(p + "attn.q_norm.weight");
  b.k_norm = get(p + "attn.k_norm.weight");
  b.out_proj = get(p + "attn.out_proj.weight");
  b.fc1 = get(p + "mlp.fc1.weight");
  b.fc2 = get(p + "mlp.fc2.weight");
  if (with_adaln) {
    b.adaln_weight = get(p + "adaln_proj.linear.weight");
    b.adaln_bias = get(p + "adaln_proj.linear.bias");
  }
  return b;
}

// The struct from a getter by official name (the one place that maps names to members).
H3Weights assemble(const H3Config& config, const Get& get) {
  H3Weights w;
  w.video_patch_proj_weight = get("video_patch_proj.weight");
  w.video_patch_proj_bias = get("video_patch_proj.bias");
  w.audio_patch_proj_weight = get("audio_patch_proj.weight");
  w.audio_patch_proj_bias = get("audio_patch_proj.bias");
  w.condition_proj_weight = get("condition_proj.weight");
  w.condition_proj_bias = get("condition_proj.bias");
  if (config.curve_variant()) {
    w.adaln_t_table = get("adaln_t_table");
  } else {
    w.time_proj_in_weight = get("time_embedder.proj_in.weight");
    w.time_proj_in_bias = get("time_embedder.proj_in.bias");
    w.time_proj_out_weight = get("time_embedder.proj_out.weight");
    w.time_proj_out_bias = get("time_embedder.proj_out.bias");
  }
  w.rope_inv_freq = get("rope.inv_freq");
  for (int64_t r = 0; r < config.token_refiner_num_layers; ++r)
    w.refiner_blocks.push_back(
        load_block(get, fmt::format("token_refiner.blocks.{}.", r), /*with_adaln=*/false));
  w.refiner_final_norm = get("token_refiner.final_norm.weight");
  for (int64_t i = 0; i < config.num_layers; ++i)
    w.blocks.push_back(load_block(get, fmt::format("blocks.{}.", i), /*with_adaln=*/true));
  w.final_norm = get("final_layer.norm.weight");
  w.final_adaln_weight = get("final_layer.adaln_proj.linear.weight");
  w.final_adaln_bias = get("final_layer.adaln_proj.linear.bias");
  w.video_out_weight = get("final_layer.video_out.weight");
  w.video_out_bias = get("final_layer.video_out.bias");
  w.audio_out_weight = get("final_layer.audio_out.weight");
  w.audio_out_bias = get("final_layer.audio_out.bias");
  return w;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The dtype a tensor takes on a GPU context (rope.inv_freq and adaln_t_table are read on the host).
DType device_dtype(const std::string& name, DType act) {
  return is_fp32_island(name) ? DType::F32 : act;
}
bool host_only(const std::string& name) {
  return name == "rope.inv_freq" || name == "adaln_t_table";
}

}  // namespace

Tensor rope_inv_freq(int64_t len) {
  std::vector<float> v(len);
  const float axis_dim = static_cast<float>(2 * len);
  for (int64_t j = 0; j < len; ++j)
    v[j] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / axis_dim);
  return Tensor::from_floats(v, {len});
}

bool is_fp32_island(const std::string& n) {
  return starts_with(n, "video_patch_proj.") || starts_with(n, "audio_patch_proj.") ||
         starts_with(n, "time_embedder.") || starts_with(n, "final_layer.video_out.") ||
         starts_with(n, "final_layer.audio_out.") || n == "rope.inv_freq" || n == "adaln_t_table";
}

bool is_adaln_projection(const std::string& n) {
  return (starts_with(n, "blocks.") || starts_with(n, "final_layer.")) &&
         n.find(".adaln_proj.linear.") != std::string::npos;
}

H3Weights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const H3Config& config, DType act,
                       int64_t* bytes, bool adaln) {
  validate(ckpt, config);
  int64_t total = 0;
  return assemble(config, [&](const std::string& name) {
    if (!adaln && is_adaln_projection(name)) return Tensor();
    Tensor t = ckpt.get(name);
    if (host_only(name)) return t;
    // The CPU keeps the mapped weights, except for fp16 activations: rounded copies, the values
    // the GPU computes with (the fp16 recipe's emulation).
    if (!ctx.is_cuda()) return act == DType::F16 && !is_fp32_island(name) ? t.to(DType::F16) : t;
    Tensor d = ctx.upload(t.to(device_dtype(name, act)));
    total += d.nbytes();
    if (bytes) *bytes = total;
    return d;
  });
}

namespace {

Tensor make_random(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed,
                   const std::string& name, const Shape& shape) {
  if (name == "rope.inv_freq") return rope_inv_freq(shape[0]);
  const DType dt = ctx.is_cuda() || act == DType::F16 ? device_dtype(name, act) : DType::F32;
  Tensor t = ctx.empty(shape, dt);
  const auto [mean, std] = init_scale(name, shape, config);
  ops::fill_normal(ctx, t, seed * 0x9e3779b97f4a7c15ull + stream_id(name.c_str()), mean, std);
  return t;
}

}  // namespace

H3Weights random_weights(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed,
                         int64_t* bytes, bool adaln) {
  AVDIT_REQUIRE(!config.curve_variant(),
                "H3 random weights: the full (time_embedder) variant only");
  std::map<std::string, Shape> shapes;
  for (const TensorSpec& spec : h3_tensor_specs(config)) shapes[spec.name] = spec.shape;
  int64_t total = 0;
  return assemble(config, [&](const std::string& name) {
    if (!adaln && is_adaln_projection(name)) return Tensor();
    Tensor t = make_random(ctx, config, act, seed, name, shapes.at(name));
    total += t.nbytes();
    if (bytes) *bytes = total;
    return t;
  });
}

Tensor random_weight(ops::Context& ctx, const H3Config& config, DType act, uint64_t seed,
                     const std::string& name) {
  AVDIT_REQUIRE(!config.curve_variant(),
                "H3 random weights: the full (time_embedder) variant only");
  for (const TensorSpec& spec : h3_tensor_specs(config))
    if (spec.name == name) return make_random(ctx, config, act, seed, name, spec.shape);
  throw BadInput(fmt::format("H3 random weights: no tensor '{}' in this config", name));
}

std::pair<float, float> init_scale(const std::string& n, const Shape& shape, const H3Config& c) {
  auto ends_with = [&](const char* suffix) {
    const std::string s(suffix);
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  auto contains = [&](const char* part) { return n.find(part) != std::string::npos; };
  const bool is_bias = ends_with(".bias");
  const float fan_in = shape.size() == 2 ? static_cast<float>(shape[1]) : 1.0f;
  if (n == "adaln_t_table") return {0.0f, 1.0f};
  if (!is_bias && contains("norm")) return {1.0f, 0.1f};  // RMSNorm weights
  if (contains("time_embedder.")) {
    if (is_bias) return {0.0f, 0.1f};
    return {0.0f, (contains("proj_in") ? 4.0f : 0.5f) / std::sqrt(fan_in)};
  }
  if (contains("adaln_proj.")) {
    if (is_bias) return {0.0f, 0.1f};
    return {0.0f, 0.5f / std::sqrt(static_cast<float>(c.time_embed_dim))};
  }
  if (is_bias) return {0.0f, 0.02f};
  return {0.0f, 1.0f / std::sqrt(fan_in)};
}

}  // namespace avdit::models::h3
