// Loading a MAGI-2 preview checkpoint by official names: shapes checked against the specs, tensors kept as
// zero-copy views of the mapping (small fp32 tensors converted only if stored in another dtype).
#include "models/magi2/weights.h"

#include <map>

#include "core/error.h"
#include "models/magi2/tensor_specs.h"
#include "quant/nvfp4_checkpoint.h"

namespace avdit::models::magi2 {
namespace {

class Loader {
 public:
  Loader(const Checkpoint& ckpt, const Magi2Config& config) : ckpt_(ckpt) {
    for (TensorSpec& s : magi2_tensor_specs(config)) specs_.emplace(s.name, std::move(s));
  }

  // The tensor as stored (mmap view), shape-checked; any float dtype is accepted (ops convert).
  Tensor weight(const std::string& name) const {
    const TensorSpec& spec = spec_of(name);
    Tensor t = ckpt_.require(name, spec.shape);
    AVDIT_REQUIRE(dtype_is_float(t.dtype()), "{}: tensor {} has dtype {}, expected a float dtype ({})",
                  ckpt_.source().string(), name, dtype_name(t.dtype()), dtype_name(spec.dtype));
    return t;
  }
  // Small tensors the model reads directly as float32.
  Tensor f32(const std::string& name) const { return weight(name).to_f32(); }
  // RMSNorm weights, copied (a few KB per layer): ops::rms_norm currently reads its weight through the
  // non-const accessor, which refuses read-only (mapped) tensors.
  Tensor norm(const std::string& name) const { return weight(name).to(DType::F32); }
  float scalar(const std::string& name) const {
    const Tensor t = f32(name);
    return t.f32()[0];
  }
  bool has(const std::string& name) const { return ckpt_.contains(name); }
  const Checkpoint& ckpt() const { return ckpt_; }
  const TensorSpec& spec_of(const std::string& name) const {
    auto it = specs_.find(name);
    AVDIT_CHECK(it != specs_.end(), "no spec for {}", name);
    return it->second;
  }

 private:
  const Checkpoint& ckpt_;
  std::map<std::string, TensorSpec> specs_;
};

MhcBranchWeights load_mhc(const Loader& ld, const std::string& p, const char* branch) {
  MhcBranchWeights w;
  w.alpha_pre = ld.scalar(fmt::format("{}mhc_alpha_pre_{}", p, branch));
  w.alpha_post = ld.scalar(fmt::format("{}mhc_alpha_post_{}", p, branch));
  w.alpha_res = ld.scalar(fmt::format("{}mhc_alpha_res_{}", p, branch));
  w.bias_pre = ld.f32(fmt::format("{}mhc_bias_pre_{}", p, branch));
  w.bias_post = ld.f32(fmt::format("{}mhc_bias_post_{}", p, branch));
  w.bias_res = ld.f32(fmt::format("{}mhc_bias_res_{}", p, branch));
  w.phi = ld.f32(fmt::format("{}mhc_phi_fused_{}", p, branch));
  return w;
}

MoeWeights load_moe(const Loader& ld, const Magi2Config& c, const std::string& p, const LoadOptions& opt) {
  MoeWeights w;
  const std::string m = p + "mlp.";
  w.pre_norm = ld.norm(m + "pre_norm.weight");
  w.split_linear = ld.weight(m + "split_linear.weight");
  w.merge_linear = ld.weight(m + "merge_linear.weight");
  w.gate = ld.f32(m + "moe_mlp.gate");
  const std::string bias = m + "moe_mlp.router.expert_bias";
  // As the reference's loader: expert_bias_ema (the EMA model's bias) replaces expert_bias when present.
  if (!opt.router_bias_from_main && ld.has(bias + "_ema"))
    w.expert_bias = ld.f32(bias + "_ema");
  else
    w.expert_bias = ld.f32(bias);
  w.shared_fc1 = ld.weight(m + "shared_expert_fc1.weight");
  w.shared_fc2 = ld.weight(m + "shared_expert_fc2.weight");
  w.ms_fc1 = ld.weight(m + "modality_specific_shared_expert_fc1.weight");
  w.ms_fc2 = ld.weight(m + "modality_specific_shared_expert_fc2.weight");

  const int64_t E = c.moe.num_experts;
  w.expert_begin = opt.expert_range ? opt.expert_range->first : 0;
  w.expert_end = opt.expert_range ? opt.expert_range->second : E;
  AVDIT_REQUIRE(0 <= w.expert_begin && w.expert_begin < w.expert_end && w.expert_end <= E,
                "expert range [{}, {}) is not inside [0, {})", w.expert_begin, w.expert_end, E);
  const bool all = w.expert_begin == 0 && w.expert_end == E;
  const std::string names[3] = {m + "moe_mlp.W_gate", m + "moe_mlp.W_up", m + "moe_mlp.W_down"};
  // Packed in the checkpoint (quantize --nvfp4 experts): all three stacks or none.
  const bool packed = quant::has_nvfp4_packed(ld.ckpt(), names[0]);
  for (const std::string& full : names) {
    const Shape& shape = ld.spec_of(full).shape;
    if (packed) {
      AVDIT_REQUIRE(!ld.has(full), "{}: holds both {} and its NVFP4-packed form; keep one",
                    ld.ckpt().source().string(), full);
      AVDIT_REQUIRE(quant::has_nvfp4_packed(ld.ckpt(), full),
                    "{}: {} is NVFP4-packed but {} is not (a packed checkpoint packs all routed experts)",
                    ld.ckpt().source().string(), names[0], full);
      continue;
    }
    // Checks the full shape from the header without touching the data.
    const TensorInfo& info = ld.ckpt().info(full);
    AVDIT_REQUIRE(info.shape == shape, "{}: tensor {} has shape {}, expected {} (from the config)",
                  ld.ckpt().source().string(), full, shape_str(info.shape), shape_str(shape));
    AVDIT_REQUIRE(dtype_is_float(info.dtype), "{}: tensor {} has dtype {}, expected a float dtype",
                  ld.ckpt().source().string(), full, dtype_name(info.dtype));
  }
  Tensor full_stack[3];
  if (all && !packed)
    for (int i = 0; i < 3; ++i) full_stack[i] = ld.weight(names[i]);
  for (int64_t h = 0; h < c.moe.num_heads; ++h) {
    const int64_t r0 = h * E + w.expert_begin, r1 = h * E + w.expert_end;
    MoeHeadExperts e;
    Tensor* plain[3] = {&e.W_gate, &e.W_up, &e.W_down};
    std::optional<quant::Nvfp4Matrix>* nv[3] = {&e.W_gate_nvfp4, &e.W_up_nvfp4, &e.W_down_nvfp4};
    for (int i = 0; i < 3; ++i) {
      if (packed) {
        *nv[i] = quant::read_nvfp4_packed(ld.ckpt(), names[i], ld.spec_of(names[i]).shape, r0, r1);
        continue;
      }
      // Only the rows this rank owns are touched (get_rows maps just those pages).
      Tensor rows = all ? full_stack[i].slice_rows(r0, r1) : ld.ckpt().get_rows(names[i], r0, r1);
      if (opt.nvfp4_experts) {
        // One global scale per expert matrix, so packing a head's slice equals slicing the packed stack.
        *nv[i] = quant::quantize_nvfp4(rows, 1);
      } else {
        *plain[i] = std::move(rows);
      }
    }
    w.heads.push_back(std::move(e));
  }
  return w;
}

}  // namespace

Magi2Weights load_magi2_weights(const Checkpoint& ckpt, const Magi2Config& c, const LoadOptions& opt) {
  Loader ld(ckpt, c);
  Magi2Weights w;
  w.config = c;
  w.video_embedder_w = ld.weight("pre_adapter.video_embedder.weight");
  w.video_embedder_b = ld.f32("pre_adapter.video_embedder.bias");
  w.audio_embedder_w = ld.weight("pre_adapter.audio_embedder.weight");
  w.audio_embedder_b = ld.f32("pre_adapter.audio_embedder.bias");
  w.text_embedder_w = ld.weight("pre_adapter.text_embedder.weight");
  w.text_embedder_b = ld.f32("pre_adapter.text_embedder.bias");
  w.rope_bands = ld.f32("pre_adapter.rope.bands");
  w.final_norm_video = ld.norm("post_adapter.final_norm_video.weight");
  w.final_norm_audio = ld.norm("post_adapter.final_norm_audio.weight");
  w.final_linear_video = ld.weight("post_adapter.final_linear_video.weight");
  w.final_linear_audio = ld.weight("post_adapter.final_linear_audio.weight");

  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("block.layers.{}.", i);
    LayerWeights L;
    L.groups = c.groups(i);
    L.moe = c.is_moe_layer(i);
    L.mhc_attn = load_mhc(ld, p, "attn");
    L.mhc_mlp = load_mhc(ld, p, "mlp");
    L.mhc_norm = ld.norm(p + "mhc_norm.weight");
    AttentionWeights& a = L.attention;
    a.pre_norm = ld.norm(p + "attention.pre_norm.weight");
    a.linear_qkv = ld.weight(p + "attention.linear_qkv.weight");
    a.linear_g = ld.weight(p + "attention.linear_g.weight");
    a.linear_proj = ld.weight(p + "attention.linear_proj.weight");
    a.q_norm = ld.norm(p + "attention.q_norm.weight");
    a.k_norm = ld.norm(p + "attention.k_norm.weight");
    a.sinks = ld.f32(p + "attention.sinks");
    if (L.moe) {
      L.moe_mlp = load_moe(ld, c, p, opt);
    } else {
      L.dense.pre_norm = ld.norm(p + "mlp.pre_norm.weight");
      L.dense.up_gate_proj = ld.weight(p + "mlp.up_gate_proj.weight");
      L.dense.down_proj = ld.weight(p + "mlp.down_proj.weight");
    }
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace avdit::models::magi2
