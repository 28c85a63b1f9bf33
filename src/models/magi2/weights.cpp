// Checkpoint (or random values) -> Magi2Weights by official names on an execution context (see
// weights.h). One assembly for both sources, so the names are mapped to members in one place.
#include "models/magi2/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/magi2/init.h"
#include "models/magi2/tensor_specs.h"
#include "ops/random.h"
#include "quant/nvfp4_checkpoint.h"
#include "quant/nvfp4_random.h"

namespace avdit::models::magi2 {
namespace {

// Where the tensors come from. matrix(): a GEMM weight on ctx (the CPU: as stored; the GPU: in
// `dtype`); host(): a small tensor on the host in any float dtype; experts(): a layer's routed
// experts as ops::ExpertWeights before prepare_experts.
class Source {
 public:
  virtual ~Source() = default;
  virtual Tensor matrix(const std::string& name, DType dtype) = 0;
  virtual Tensor host(const std::string& name) = 0;
  virtual ops::ExpertWeights experts(const std::string& prefix, DType dtype) = 0;
  virtual bool has(const std::string& name) const = 0;
  int64_t bytes = 0;  // placed on the context so far
};

const TensorSpec& spec_in(const std::map<std::string, TensorSpec>& specs, const std::string& name) {
  auto it = specs.find(name);
  AVDIT_CHECK(it != specs.end(), "no spec for {}", name);
  return it->second;
}

class CheckpointSource final : public Source {
 public:
  CheckpointSource(ops::Context& ctx, const Checkpoint& ckpt, const Magi2Config& c,
                   const LoadOptions& opt)
      : ctx_(ctx), ckpt_(ckpt), c_(c), opt_(opt) {
    for (TensorSpec& s : magi2_tensor_specs(c)) specs_.emplace(s.name, std::move(s));
  }

  // The tensor as stored (mmap view), shape-checked; any float dtype is accepted (ops convert).
  Tensor stored(const std::string& name) const {
    const TensorSpec& spec = spec_in(specs_, name);
    Tensor t = ckpt_.require(name, spec.shape);
    AVDIT_REQUIRE(dtype_is_float(t.dtype()),
                  "{}: tensor {} has dtype {}, expected a float dtype ({})",
                  ckpt_.source().string(), name, dtype_name(t.dtype()), dtype_name(spec.dtype));
    return t;
  }
  Tensor matrix(const std::string& name, DType dtype) override {
    Tensor t = stored(name);
    if (!ctx_.is_cuda()) return t;
    Tensor d = ctx_.upload(t.to(dtype));
    bytes += d.nbytes();
    return d;
  }
  Tensor host(const std::string& name) override { return stored(name); }
  bool has(const std::string& name) const override { return ckpt_.contains(name); }

  ops::ExpertWeights experts(const std::string& m, DType) override {
    const int64_t E = c_.moe.num_experts;
    ops::ExpertWeights w;
    w.inter = c_.moe.expert_intermediate_size;
    w.begin = opt_.expert_range ? opt_.expert_range->first : 0;
    w.end = opt_.expert_range ? opt_.expert_range->second : E;
    AVDIT_REQUIRE(0 <= w.begin && w.begin < w.end && w.end <= E,
                  "expert range [{}, {}) is not inside [0, {})", w.begin, w.end, E);
    const bool all = w.begin == 0 && w.end == E;
    const std::string names[3] = {m + "W_gate", m + "W_up", m + "W_down"};
    // Packed in the checkpoint (quantize --nvfp4 experts): all three stacks or none.
    const bool packed = quant::has_nvfp4_packed(ckpt_, names[0]);
    for (const std::string& full : names) {
      const Shape& shape = spec_in(specs_, full).shape;
      if (packed) {
        AVDIT_REQUIRE(!ckpt_.contains(full),
                      "{}: holds both {} and its NVFP4-packed form; keep one",
                      ckpt_.source().string(), full);
        AVDIT_REQUIRE(
            quant::has_nvfp4_packed(ckpt_, full),
            "{}: {} is NVFP4-packed but {} is not (a packed checkpoint packs all routed experts)",
            ckpt_.source().string(), names[0], full);
        continue;
      }
      // Checks the full shape from the header without touching the data.
      const TensorInfo& info = ckpt_.info(full);
      AVDIT_REQUIRE(info.shape == shape,
                    "{}: tensor {} has shape {}, expected {} (from the config)",
                    ckpt_.source().string(), full, shape_str(info.shape), shape_str(shape));
      AVDIT_REQUIRE(dtype_is_float(info.dtype),
                    "{}: tensor {} has dtype {}, expected a float dtype", ckpt_.source().string(),
                    full, dtype_name(info.dtype));
    }
    std::vector<Tensor>* plain[3] = {&w.gate, &w.up, &w.down};
    std::vector<quant::Nvfp4Matrix>* nv[3] = {&w.gate_q, &w.up_q, &w.down_q};
    for (int i = 0; i < 3; ++i) {
      if (all && !packed && !opt_.nvfp4_experts) {
        plain[i]->push_back(stored(names[i]));  // every head's rows, one mapped view
        continue;
      }
      for (int64_t h = 0; h < c_.moe.num_heads; ++h) {
        const int64_t r0 = h * E + w.begin, r1 = h * E + w.end;
        if (packed) {
          nv[i]->push_back(
              quant::read_nvfp4_packed(ckpt_, names[i], spec_in(specs_, names[i]).shape, r0, r1));
          continue;
        }
        // Only the rows this process owns are touched (get_rows maps just those pages).
        Tensor rows = ckpt_.get_rows(names[i], r0, r1);
        // One global scale per expert matrix, so packing a head's slice equals slicing the packed
        // stack.
        if (opt_.nvfp4_experts)
          nv[i]->push_back(quant::quantize_nvfp4(rows, 1));
        else
          plain[i]->push_back(std::move(rows));
      }
    }
    return w;
  }

 private:
  ops::Context& ctx_;
  const Checkpoint& ckpt_;
  const Magi2Config& c_;
  const LoadOptions& opt_;
  std::map<std::string, TensorSpec> specs_;
};

class RandomSource final : public Source {
 public:
  RandomSource(ops::Context& ctx, const Magi2Config& c, uint64_t seed, bool nvfp4)
      : ctx_(ctx), c_(c), seed_(seed), nvfp4_(nvfp4) {
    for (TensorSpec& s : magi2_tensor_specs(c)) specs_.emplace(s.name, std::move(s));
  }
  Tensor matrix(const std::string& name, DType dtype) override {
    const TensorSpec& spec = spec_in(specs_, name);
    const double gain = init_linear_gain(name);
    AVDIT_CHECK(gain > 0, "magi2 random weights: {} is not a matrix", name);
    return normal(name, spec.shape, dtype,
                  static_cast<float>(gain / std::sqrt(static_cast<double>(spec.shape[1]))));
  }
  Tensor host(const std::string& name) override {
    return init_tensor(spec_in(specs_, name), seed_);
  }
  bool has(const std::string& name) const override { return specs_.count(name) > 0; }
  ops::ExpertWeights experts(const std::string& m, DType dtype) override {
    ops::ExpertWeights w;
    w.inter = c_.moe.expert_intermediate_size;
    w.begin = 0;
    w.end = c_.moe.num_experts;
    std::vector<Tensor>* parts[3] = {&w.gate, &w.up, &w.down};
    std::vector<quant::Nvfp4Matrix>* packed[3] = {&w.gate_q, &w.up_q, &w.down_q};
    const char* names[3] = {"W_gate", "W_up", "W_down"};
    for (int i = 0; i < 3; ++i) {
      const std::string name = m + names[i];
      const Shape& shape = spec_in(specs_, name).shape;  // [H E, in, out]
      const double gain = init_linear_gain(name);
      const auto sd = static_cast<float>(gain / std::sqrt(double(shape[1])));
      if (nvfp4_)  // every head's stack as one part; prepare_experts uploads it
        packed[i]->push_back(quant::random_nvfp4(
            shape, seed_ * 0x9e3779b97f4a7c15ull + stream_id(name.c_str()), sd));
      else
        parts[i]->push_back(normal(name, shape, dtype, sd));
    }
    return w;
  }

 private:
  Tensor normal(const std::string& name, const Shape& shape, DType dtype, float std) {
    Tensor t = ctx_.empty(shape, ctx_.is_cuda() ? dtype : DType::F32);
    ops::fill_normal(ctx_, t, seed_ * 0x9e3779b97f4a7c15ull + stream_id(name.c_str()), 0.f, std);
    if (ctx_.is_cuda()) bytes += t.nbytes();
    return t;
  }
  ops::Context& ctx_;
  const Magi2Config& c_;
  uint64_t seed_;
  bool nvfp4_;
  std::map<std::string, TensorSpec> specs_;
};

class Assembler {
 public:
  Assembler(ops::Context& ctx, Source& src, const Magi2Config& c, DType act)
      : ctx_(ctx), src_(src), c_(c), act_(act) {}

  Magi2Weights run(const LoadOptions& opt) {
    const int64_t R = c_.residual_width;
    Magi2Weights w;
    w.embedder_w[0] = src_.matrix("pre_adapter.video_embedder.weight", DType::F32);
    w.embedder_w[1] = src_.matrix("pre_adapter.audio_embedder.weight", DType::F32);
    w.embedder_w[2] = src_.matrix("pre_adapter.text_embedder.weight", DType::F32);
    w.embedder_b = table({"pre_adapter.video_embedder.bias", "pre_adapter.audio_embedder.bias",
                          "pre_adapter.text_embedder.bias"},
                         R);
    w.rope_bands = f32(src_.host("pre_adapter.rope.bands"));
    w.final_norm = table(
        {"post_adapter.final_norm_video.weight", "post_adapter.final_norm_audio.weight", ""}, R);
    w.final_linear[0] = src_.matrix("post_adapter.final_linear_video.weight", DType::F32);
    w.final_linear[1] = src_.matrix("post_adapter.final_linear_audio.weight", DType::F32);
    for (int64_t i = 0; i < c_.num_layers; ++i) w.layers.push_back(layer(i, opt));
    return w;
  }

 private:
  // A small host tensor as F32 on the context ([rows, width] when given).
  Tensor f32(const Tensor& host, Shape shape = {}) {
    Tensor t = host.to_f32();
    if (!shape.empty()) t = t.reshape(std::move(shape));
    if (!ctx_.is_cuda()) return t;
    Tensor d = ctx_.upload(t);
    src_.bytes += d.nbytes();
    return d;
  }
  // Rows stacked into one [rows, width] F32 table ("" = a zero row).
  Tensor table(const std::vector<std::string>& names, int64_t width) {
    Tensor h = Tensor::zeros({static_cast<int64_t>(names.size()), width}, DType::F32);
    for (size_t r = 0; r < names.size(); ++r) {
      if (names[r].empty()) continue;
      const Tensor f = src_.host(names[r]).to_f32();
      AVDIT_CHECK(f.numel() == width, "magi2 weights: {} has {} values for width {}", names[r],
                  f.numel(), width);
      std::memcpy(h.f32() + static_cast<int64_t>(r) * width, std::as_const(f).f32(),
                  sizeof(float) * width);
    }
    return f32(h);
  }
  float scalar(const std::string& name) {
    const Tensor t = src_.host(name).to_f32();
    return t.f32()[0];
  }

  MhcBranchWeights mhc(const std::string& p, const char* branch) {
    MhcBranchWeights m;
    // As the reference: alpha (f32) * matmul_scale (a python float -> f32).
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c_.residual_width)));
    m.coef.a_pre = scalar(fmt::format("{}mhc_alpha_pre_{}", p, branch)) * scale;
    m.coef.a_post = scalar(fmt::format("{}mhc_alpha_post_{}", p, branch)) * scale;
    m.coef.a_res = scalar(fmt::format("{}mhc_alpha_res_{}", p, branch)) * scale;
    m.coef.bias_pre = f32(src_.host(fmt::format("{}mhc_bias_pre_{}", p, branch)));
    m.coef.bias_post = f32(src_.host(fmt::format("{}mhc_bias_post_{}", p, branch)));
    m.coef.bias_res = f32(src_.host(fmt::format("{}mhc_bias_res_{}", p, branch)));
    m.phi = f32(src_.host(fmt::format("{}mhc_phi_fused_{}", p, branch)));
    return m;
  }

  MoeWeights moe(int64_t layer, const std::string& p, const LoadOptions& opt) {
    const int64_t hidden = c_.hidden_size;
    const std::string m = p + "mlp.";
    MoeWeights w;
    w.pre_norm = f32(src_.host(m + "pre_norm.weight"), {kNumModalities, hidden});
    w.split_linear = src_.matrix(m + "split_linear.weight", act_);
    w.gate = f32(src_.host(m + "moe_mlp.gate"));
    const std::string bias = m + "moe_mlp.router.expert_bias";
    // As the reference's loader: expert_bias_ema (the EMA model's bias) replaces expert_bias when
    // present.
    Tensor b =
        src_.host(!opt.router_bias_from_main && src_.has(bias + "_ema") ? bias + "_ema" : bias);
    if (auto add = opt.router_bias_add.find(layer); add != opt.router_bias_add.end()) {
      AVDIT_CHECK(add->second.numel() == b.numel(), "router bias of {}: {} values to add to {}",
                  bias, add->second.numel(), b.numel());
      Tensor sum = b.to(DType::F32);  // a copy: the stored bias may be a read-only mapping
      const Tensor delta = add->second.to_f32();
      for (int64_t e = 0; e < sum.numel(); ++e) sum.f32()[e] += delta.f32()[e];
      b = sum;
    }
    w.expert_bias = f32(b);
    w.shared_fc1 = src_.matrix(m + "shared_expert_fc1.weight", act_);
    w.ms_fc1 = src_.matrix(m + "modality_specific_shared_expert_fc1.weight", act_);
    w.ms_fc2 = src_.matrix(m + "modality_specific_shared_expert_fc2.weight", act_);
    const Tensor merge = src_.matrix(m + "merge_linear.weight", act_);
    const Tensor shared_fc2 = src_.matrix(m + "shared_expert_fc2.weight", act_);
    const int64_t before = src_.bytes;
    w.output = ops::prepare_moe_output(ctx_, merge, shared_fc2, act_);
    if (ctx_.is_cuda()) src_.bytes = before - merge.nbytes() - shared_fc2.nbytes() + w.output.bytes;
    const int64_t held = src_.bytes;
    w.experts =
        ops::prepare_experts(ctx_, src_.experts(m + "moe_mlp.", act_), moe_config(c_), act_);
    if (ctx_.is_cuda()) src_.bytes = held + w.experts.bytes;
    return w;
  }

  LayerWeights layer(int64_t i, const LoadOptions& opt) {
    const std::string p = fmt::format("block.layers.{}.", i);
    const int64_t G = c_.groups(i), hidden = c_.hidden_size, D = c_.head_dim;
    LayerWeights L;
    L.groups = G;
    L.moe = c_.is_moe_layer(i);
    L.mhc_attn = mhc(p, "attn");
    L.mhc_mlp = mhc(p, "mlp");
    L.mhc_norm = f32(src_.host(p + "mhc_norm.weight"), {G, c_.residual_width});
    AttentionWeights& a = L.attention;
    a.pre_norm = f32(src_.host(p + "attention.pre_norm.weight"), {G, hidden});
    a.linear_qkv = src_.matrix(p + "attention.linear_qkv.weight", act_);
    a.linear_g = src_.matrix(p + "attention.linear_g.weight", act_);
    a.linear_proj = src_.matrix(p + "attention.linear_proj.weight", act_);
    a.q_norm = f32(src_.host(p + "attention.q_norm.weight"), {G, D});
    a.k_norm = f32(src_.host(p + "attention.k_norm.weight"), {G, D});
    a.sinks = f32(combined_sinks(src_.host(p + "attention.sinks")));
    if (L.moe) {
      L.moe_mlp = moe(i, p, opt);
    } else {
      L.dense.pre_norm = f32(src_.host(p + "mlp.pre_norm.weight"), {G, hidden});
      L.dense.up_gate_proj = src_.matrix(p + "mlp.up_gate_proj.weight", act_);
      L.dense.down_proj = src_.matrix(p + "mlp.down_proj.weight", act_);
    }
    return L;
  }

  ops::Context& ctx_;
  Source& src_;
  const Magi2Config& c_;
  DType act_;
};

DType checked_act(DType act) {
  AVDIT_REQUIRE(act == DType::F32 || act == DType::BF16,
                "magi2: activations in {} are not supported (F32 or BF16; --precision fp16 is "
                "MiniMax-H3's recipe only)",
                dtype_name(act));
  return act;
}

}  // namespace

ops::MoeConfig moe_config(const Magi2Config& c) {
  ops::MoeConfig m;
  m.heads = c.moe.num_heads;
  m.experts = c.moe.num_experts;
  m.top_k = c.moe.top_k;
  m.head_dim = c.moe_head_dim;
  m.softmax = c.moe.score_func == "softmax";
  m.route_norm = c.moe.route_norm;
  m.route_scale = static_cast<float>(c.moe.route_scale);
  return m;
}

Tensor combined_sinks(const Tensor& sinks_in) {
  const Tensor sinks = sinks_in.to_f32();
  const int64_t S = sinks.size(0), Hq = sinks.size(1);
  const float* v =
      std::as_const(sinks).f32();  // const: the checkpoint's sinks may be a read-only mapping
  Tensor out = Tensor::empty({Hq}, DType::F32);
  for (int64_t h = 0; h < Hq; ++h) {
    float mx = v[h];
    for (int64_t s = 1; s < S; ++s) mx = std::max(mx, v[s * Hq + h]);
    double acc = 0;
    for (int64_t s = 0; s < S; ++s) acc += std::exp(static_cast<double>(v[s * Hq + h] - mx));
    // S == 1: exactly the sink (mx + log(exp(0)) = mx).
    out.f32()[h] = S == 1 ? v[h] : mx + static_cast<float>(std::log(acc));
  }
  return out;
}

Magi2Weights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const Magi2Config& config,
                          DType act, const LoadOptions& options, int64_t* bytes) {
  CheckpointSource src(ctx, ckpt, config, options);
  Magi2Weights w = Assembler(ctx, src, config, checked_act(act)).run(options);
  if (bytes) *bytes = src.bytes;
  return w;
}

Magi2Weights random_weights(ops::Context& ctx, const Magi2Config& config, DType act, uint64_t seed,
                            int64_t* bytes, const LoadOptions& options) {
  AVDIT_REQUIRE(!options.expert_range, "magi2 random weights: an expert range needs a checkpoint");
  RandomSource src(ctx, config, seed, options.nvfp4_experts);
  Magi2Weights w = Assembler(ctx, src, config, checked_act(act)).run(options);
  if (bytes) *bytes = src.bytes;
  return w;
}

}  // namespace avdit::models::magi2
