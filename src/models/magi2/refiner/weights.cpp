// The refiner's checkpoint layout (refiner_tensor_specs) and its strict loading onto a context.
#include "models/magi2/refiner/weights.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/magi2/init.h"
#include "ops/random.h"

namespace avdit::models::magi2::refiner {
namespace {

void add(std::vector<TensorSpec>& out, std::string name, Shape shape, DType dtype) {
  out.push_back(TensorSpec{std::move(name), std::move(shape), dtype});
}

class Loader {
 public:
  // Random weights instead of a checkpoint (full-width benchmarks): matrices drawn on the context
  // in their final dtype, small tensors by init_checkpoint's rule on the host.
  Loader(ops::Context& ctx, const RefinerConfig& c, DType act, uint64_t seed)
      : ctx_(ctx), ckpt_(nullptr), c_(c), act_(act), seed_(seed), random_(true) {
    for (TensorSpec& s : refiner_tensor_specs(c)) specs_.emplace(s.name, std::move(s));
  }
  Loader(ops::Context& ctx, const Checkpoint& ckpt, const RefinerConfig& c, DType act)
      : ctx_(ctx), ckpt_(&ckpt), c_(c), act_(act) {
    for (TensorSpec& s : refiner_tensor_specs(c)) specs_.emplace(s.name, std::move(s));
    // load_state_dict(strict=True): a tensor the network does not have is refused too.
    for (const std::string& name : ckpt.names())
      AVDIT_REQUIRE(specs_.count(name) > 0,
                    "{}: tensor {} is not part of the MAGI-2 refiner of this config ({} layers, "
                    "mm_layers as configured); is this the refiner's checkpoint?",
                    ckpt.source().string(), name, c.num_layers);
  }

  RefinerWeights run() {
    const int64_t hidden = c_.hidden_size;
    RefinerWeights w;
    w.embedder_w[0] = matrix("pre_adapter.video_embedder.weight", DType::F32);
    w.embedder_w[1] = matrix("pre_adapter.audio_embedder.weight", DType::F32);
    w.embedder_w[2] = matrix("pre_adapter.text_embedder.weight", DType::F32);
    w.embedder_b = table({"pre_adapter.video_embedder.bias", "pre_adapter.audio_embedder.bias",
                          "pre_adapter.text_embedder.bias"},
                         hidden);
    w.rope_bands = small("pre_adapter.rope.bands");
    w.final_norm =
        table({"post_adapter.final_norm_video.weight", "post_adapter.final_norm_audio.weight", ""},
              hidden);
    w.final_linear[0] = matrix("post_adapter.final_linear_video.weight", DType::F32);
    w.final_linear[1] = matrix("post_adapter.final_linear_audio.weight", DType::F32);
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      const std::string p = fmt::format("block.layers.{}.", i);
      const int64_t G = c_.groups(i), D = c_.head_dim;
      RefinerLayerWeights L;
      L.groups = G;
      AttentionWeights& a = L.attention;
      a.pre_norm = small(p + "attention.pre_norm.weight", {G, hidden});
      a.linear_qkv = matrix(p + "attention.linear_qkv.weight", act_);
      a.linear_g = matrix(p + "attention.linear_g.weight", act_);
      a.linear_proj = matrix(p + "attention.linear_proj.weight", act_);
      a.q_norm = small(p + "attention.q_norm.weight", {G, D});
      a.k_norm = small(p + "attention.k_norm.weight", {G, D});
      L.mlp.pre_norm = small(p + "mlp.pre_norm.weight", {G, hidden});
      L.mlp.up_gate_proj = matrix(p + "mlp.up_gate_proj.weight", act_);
      L.mlp.down_proj = matrix(p + "mlp.down_proj.weight", act_);
      w.layers.push_back(std::move(L));
    }
    return w;
  }

  int64_t bytes = 0;

 private:
  Tensor stored(const std::string& name) const {
    auto it = specs_.find(name);
    AVDIT_CHECK(it != specs_.end(), "no refiner spec for {}", name);
    if (random_) return init_tensor(it->second, seed_);
    Tensor t = ckpt_->require(name, it->second.shape);
    AVDIT_REQUIRE(
        dtype_is_float(t.dtype()), "{}: tensor {} has dtype {}, expected a float dtype ({})",
        ckpt_->source().string(), name, dtype_name(t.dtype()), dtype_name(it->second.dtype));
    return t;
  }
  // A GEMM weight: the CPU widens stored values on the fly; the GPU holds it in `dtype`.
  Tensor matrix(const std::string& name, DType dtype) {
    if (random_) {
      // Drawn where it lives: 6 billion values made on the host and uploaded would take minutes.
      const TensorSpec& s = specs_.at(name);
      Tensor t = ctx_.empty(s.shape, ctx_.is_cuda() ? dtype : s.dtype);
      const double std = init_linear_gain(name) / std::sqrt(static_cast<double>(s.shape.back()));
      ops::fill_normal(ctx_, t, seed_ ^ stream_id(name.c_str()), 0.f, static_cast<float>(std));
      if (ctx_.is_cuda()) bytes += t.nbytes();
      return t;
    }
    Tensor t = stored(name);
    if (!ctx_.is_cuda()) return t;
    Tensor d = ctx_.upload(t.to(dtype));
    bytes += d.nbytes();
    return d;
  }
  Tensor on_ctx(Tensor host) {
    if (!ctx_.is_cuda()) return host;
    Tensor d = ctx_.upload(host);
    bytes += d.nbytes();
    return d;
  }
  Tensor small(const std::string& name, Shape shape = {}) {
    Tensor t = stored(name).to_f32();
    if (!shape.empty()) t = t.reshape(std::move(shape));
    return on_ctx(std::move(t));
  }
  // Rows stacked into one F32 [rows, width] table ("" = a zero row).
  Tensor table(const std::vector<std::string>& names, int64_t width) {
    Tensor h = Tensor::zeros({static_cast<int64_t>(names.size()), width}, DType::F32);
    for (size_t r = 0; r < names.size(); ++r) {
      if (names[r].empty()) continue;
      const Tensor f = stored(names[r]).to_f32();
      std::memcpy(h.f32() + static_cast<int64_t>(r) * width, std::as_const(f).f32(),
                  sizeof(float) * static_cast<size_t>(width));
    }
    return on_ctx(std::move(h));
  }

  ops::Context& ctx_;
  const Checkpoint* ckpt_;
  const RefinerConfig& c_;
  DType act_;
  uint64_t seed_ = 0;
  bool random_ = false;
  std::map<std::string, TensorSpec> specs_;
};

}  // namespace

std::vector<TensorSpec> refiner_tensor_specs(const RefinerConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t h = c.hidden_size, hq = c.num_heads_q, hkv = c.num_heads_kv, d = c.head_dim;
  const DType f32 = DType::F32, bf16 = DType::BF16;  // BaseLinear always creates bf16 weights
  add(out, "pre_adapter.video_embedder.weight", {h, c.video_in_channels}, f32);
  add(out, "pre_adapter.video_embedder.bias", {h}, f32);
  add(out, "pre_adapter.text_embedder.weight", {h, c.text_in_channels}, f32);
  add(out, "pre_adapter.text_embedder.bias", {h}, f32);
  add(out, "pre_adapter.audio_embedder.weight", {h, c.audio_in_channels}, f32);
  add(out, "pre_adapter.audio_embedder.bias", {h}, f32);
  add(out, "pre_adapter.rope.bands", {c.rope_bands}, f32);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("block.layers.{}.", i);
    const int64_t g = c.groups(i), inter = c.intermediate;
    add(out, p + "attention.pre_norm.weight", {g * h}, f32);
    add(out, p + "attention.linear_qkv.weight", {g * (hq + 2 * hkv) * d, h}, bf16);
    add(out, p + "attention.linear_g.weight", {g * hq, h}, bf16);
    add(out, p + "attention.linear_proj.weight", {g * h, hq * d}, bf16);
    add(out, p + "attention.q_norm.weight", {g * d}, f32);
    add(out, p + "attention.k_norm.weight", {g * d}, f32);
    add(out, p + "mlp.pre_norm.weight", {g * h}, f32);
    add(out, p + "mlp.up_gate_proj.weight", {g * 2 * inter, h}, bf16);
    add(out, p + "mlp.down_proj.weight", {g * h, inter}, bf16);
  }
  add(out, "post_adapter.final_norm_video.weight", {h}, f32);
  add(out, "post_adapter.final_norm_audio.weight", {h}, f32);
  add(out, "post_adapter.final_linear_video.weight", {c.video_in_channels, h}, f32);
  add(out, "post_adapter.final_linear_audio.weight", {c.audio_in_channels, h}, f32);
  return out;
}

RefinerWeights load_refiner_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                    const RefinerConfig& config, DType act, int64_t* bytes) {
  AVDIT_REQUIRE(act == DType::F32 || act == DType::BF16,
                "magi2 refiner: activations in {} are not supported (F32 or BF16)",
                dtype_name(act));
  Loader loader(ctx, ckpt, config, act);
  RefinerWeights w = loader.run();
  if (bytes) *bytes = loader.bytes;
  return w;
}

RefinerWeights random_refiner_weights(ops::Context& ctx, const RefinerConfig& config, DType act,
                                      uint64_t seed, int64_t* bytes) {
  AVDIT_REQUIRE(act == DType::F32 || act == DType::BF16,
                "magi2 refiner: activations in {} are not supported (F32 or BF16)",
                dtype_name(act));
  Loader loader(ctx, config, act, seed);
  RefinerWeights w = loader.run();
  if (bytes) *bytes = loader.bytes;
  return w;
}

}  // namespace avdit::models::magi2::refiner
