// Checkpoint -> H3Weights by official names, validated against the tensor specs first so that a
// wrong file fails with one clear message before any compute.
#include "models/h3/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/tensor_specs.h"

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
                  file_holding(ckpt, spec.name), spec.name, fmt::join(info.shape, ", "), fmt::join(spec.shape, ", "));
    AVDIT_REQUIRE(is_float(info.dtype),
                  "H3 checkpoint {}: tensor '{}' has dtype {}, expected {} (or F32/BF16/F16)",
                  file_holding(ckpt, spec.name), spec.name, dtype_name(info.dtype), dtype_name(spec.dtype));
  }
}

BlockWeights load_block(const Checkpoint& ckpt, const std::string& p, bool with_adaln) {
  BlockWeights b;
  b.norm1 = ckpt.get(p + "norm1.weight");
  b.norm2 = ckpt.get(p + "norm2.weight");
  b.qkv_proj = ckpt.get(p + "attn.qkv_proj.weight");
  b.q_norm = ckpt.get(p + "attn.q_norm.weight");
  b.k_norm = ckpt.get(p + "attn.k_norm.weight");
  b.out_proj = ckpt.get(p + "attn.out_proj.weight");
  b.fc1 = ckpt.get(p + "mlp.fc1.weight");
  b.fc2 = ckpt.get(p + "mlp.fc2.weight");
  if (with_adaln) {
    b.adaln_weight = ckpt.get(p + "adaln_proj.linear.weight");
    b.adaln_bias = ckpt.get(p + "adaln_proj.linear.bias");
  }
  return b;
}

}  // namespace

H3Weights load_weights(const Checkpoint& ckpt, const H3Config& config) {
  validate(ckpt, config);
  H3Weights w;
  w.video_patch_proj_weight = ckpt.get("video_patch_proj.weight");
  w.video_patch_proj_bias = ckpt.get("video_patch_proj.bias");
  w.audio_patch_proj_weight = ckpt.get("audio_patch_proj.weight");
  w.audio_patch_proj_bias = ckpt.get("audio_patch_proj.bias");
  w.condition_proj_weight = ckpt.get("condition_proj.weight");
  w.condition_proj_bias = ckpt.get("condition_proj.bias");
  if (config.curve_variant()) {
    w.adaln_t_table = ckpt.get("adaln_t_table");
  } else {
    w.time_proj_in_weight = ckpt.get("time_embedder.proj_in.weight");
    w.time_proj_in_bias = ckpt.get("time_embedder.proj_in.bias");
    w.time_proj_out_weight = ckpt.get("time_embedder.proj_out.weight");
    w.time_proj_out_bias = ckpt.get("time_embedder.proj_out.bias");
  }
  w.rope_inv_freq = ckpt.get("rope.inv_freq");
  for (int64_t r = 0; r < config.token_refiner_num_layers; ++r)
    w.refiner_blocks.push_back(
        load_block(ckpt, fmt::format("token_refiner.blocks.{}.", r), /*with_adaln=*/false));
  w.refiner_final_norm = ckpt.get("token_refiner.final_norm.weight");
  for (int64_t i = 0; i < config.num_layers; ++i)
    w.blocks.push_back(load_block(ckpt, fmt::format("blocks.{}.", i), /*with_adaln=*/true));
  w.final_norm = ckpt.get("final_layer.norm.weight");
  w.final_adaln_weight = ckpt.get("final_layer.adaln_proj.linear.weight");
  w.final_adaln_bias = ckpt.get("final_layer.adaln_proj.linear.bias");
  w.video_out_weight = ckpt.get("final_layer.video_out.weight");
  w.video_out_bias = ckpt.get("final_layer.video_out.bias");
  w.audio_out_weight = ckpt.get("final_layer.audio_out.weight");
  w.audio_out_bias = ckpt.get("final_layer.audio_out.bias");
  return w;
}

}  // namespace avdit::models::h3
