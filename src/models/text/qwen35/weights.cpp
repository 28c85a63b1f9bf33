// Checkpoint -> Qwen35TextWeights by official name (see weights.h). Every needed tensor is checked
// (present, shape, a float dtype) before the first is read, and only the layers asked for are.
#include "models/text/qwen35/weights.h"

#include "ops/random.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <utility>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "ops/context.h"
#include "ops/random.h"

namespace avdit::models::text::qwen35 {
namespace {

bool is_float(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

// Fetches a tensor by name (prefix added) with its expected shape; the same code validates (a
// dry run) and loads, so the two can never disagree on a name.
using Get = std::function<Tensor(const std::string&, const Shape&)>;

LayerWeights assemble_layer(const Qwen35TextConfig& c, int64_t i, const Get& get) {
  const std::string p = fmt::format("layers.{}.", i);
  const int64_t H = c.hidden_size, F = c.intermediate_size;
  LayerWeights l;
  l.type = c.layer_types[i];
  l.input_layernorm = get(p + "input_layernorm.weight", {H});
  l.post_attention_layernorm = get(p + "post_attention_layernorm.weight", {H});
  if (l.type == LayerType::LinearAttention) {
    const int64_t nv = c.linear_num_value_heads, dv = c.linear_value_head_dim;
    const int64_t C = c.linear_conv_channels();
    LinearAttentionWeights& w = l.linear;
    const std::string a = p + "linear_attn.";
    w.in_proj_qkv = get(a + "in_proj_qkv.weight", {C, H});
    w.in_proj_z = get(a + "in_proj_z.weight", {nv * dv, H});
    w.in_proj_b = get(a + "in_proj_b.weight", {nv, H});
    w.in_proj_a = get(a + "in_proj_a.weight", {nv, H});
    w.conv1d = get(a + "conv1d.weight", {C, 1, c.linear_conv_kernel_dim});
    w.dt_bias = get(a + "dt_bias", {nv});
    w.A_log = get(a + "A_log", {nv});
    w.norm = get(a + "norm.weight", {dv});
    w.out_proj = get(a + "out_proj.weight", {H, nv * dv});
  } else {
    const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
    FullAttentionWeights& w = l.full;
    const std::string a = p + "self_attn.";
    w.q_proj = get(a + "q_proj.weight", {Hq * 2 * D, H});
    w.k_proj = get(a + "k_proj.weight", {Hkv * D, H});
    w.v_proj = get(a + "v_proj.weight", {Hkv * D, H});
    w.o_proj = get(a + "o_proj.weight", {H, Hq * D});
    w.q_norm = get(a + "q_norm.weight", {D});
    w.k_norm = get(a + "k_norm.weight", {D});
  }
  l.gate_proj = get(p + "mlp.gate_proj.weight", {F, H});
  l.up_proj = get(p + "mlp.up_proj.weight", {F, H});
  l.down_proj = get(p + "mlp.down_proj.weight", {H, F});
  return l;
}

Qwen35TextWeights assemble(const Qwen35TextConfig& c, int64_t layers, const Get& get) {
  Qwen35TextWeights w;
  w.embed_tokens = get("embed_tokens.weight", {c.vocab_size, c.hidden_size});
  for (int64_t i = 0; i < layers; ++i) w.layers.push_back(assemble_layer(c, i, get));
  return w;
}

}  // namespace

std::string text_prefix(const Checkpoint& ckpt) {
  for (const char* prefix : {"model.language_model.", "model."})
    if (ckpt.contains(std::string(prefix) + "embed_tokens.weight")) return prefix;
  AVDIT_REQUIRE(false,
                "Qwen3.5 checkpoint {}: no 'model.language_model.embed_tokens.weight' (nor "
                "'model.embed_tokens.weight'); is this the MAGI-2 text encoder (Qwen3.5)?",
                ckpt.source().string());
  return {};
}

Qwen35TextWeights load_text_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                    const Qwen35TextConfig& config, int64_t layers) {
  AVDIT_REQUIRE(layers >= 1 && layers <= config.num_hidden_layers,
                "Qwen3.5: {} layers asked of a model with {}", layers, config.num_hidden_layers);
  const std::string prefix = text_prefix(ckpt);
  const std::string where = ckpt.source().string();
  // Dry run: every tensor present, of the right shape and a float dtype.
  assemble(config, layers, [&](const std::string& name, const Shape& shape) {
    const std::string full = prefix + name;
    AVDIT_REQUIRE(ckpt.contains(full),
                  "Qwen3.5 checkpoint {}: missing tensor '{}' (expected shape {}); the text "
                  "encoder needs layers 0..{}",
                  where, full, shape_str(shape), layers - 1);
    const TensorInfo& info = ckpt.info(full);
    AVDIT_REQUIRE(info.shape == shape,
                  "Qwen3.5 checkpoint {}: tensor '{}' has shape {}, config.json implies {}", where,
                  full, shape_str(info.shape), shape_str(shape));
    AVDIT_REQUIRE(is_float(info.dtype),
                  "Qwen3.5 checkpoint {}: tensor '{}' has dtype {} (expected BF16, F16 or F32)",
                  where, full, dtype_name(info.dtype));
    return Tensor();
  });
  return assemble(config, layers, [&](const std::string& name, const Shape&) {
    Tensor t = ckpt.get(prefix + name);
    // The QK norms are read as F32 by the attention prologue on every backend (a few hundred
    // values per layer).
    if (name.ends_with("q_norm.weight") || name.ends_with("k_norm.weight"))
      t = t.to_f32().reshape({1, t.numel()});
    return ctx.is_cuda() ? ctx.upload(t) : t;
  });
}

Qwen35TextWeights random_text_weights(ops::Context& ctx, const Qwen35TextConfig& config,
                                      int64_t layers, uint64_t seed, int64_t* bytes) {
  AVDIT_REQUIRE(layers >= 1 && layers <= config.num_hidden_layers,
                "Qwen3.5: {} layers asked of a model with {}", layers, config.num_hidden_layers);
  if (bytes) *bytes = 0;
  return assemble(config, layers, [&](const std::string& name, const Shape& shape) {
    // Made where they are used (ops::fill_normal): 27B parameters drawn on the host and uploaded
    // took minutes, on the GPU seconds.
    // Scales that keep activations finite and of order one through many layers: linears
    // N(0, 1 / fan_in), zero-centred norms near 0, the gated norm near 1.
    float mean = 0.f, std = 0.02f;
    if (name.ends_with("linear_attn.norm.weight"))
      mean = 1.f;
    else if (name.ends_with("conv1d.weight"))
      std = 0.5f;
    else if (name.ends_with("A_log") || name.ends_with("dt_bias"))
      std = 0.5f;
    else if (name == "embed_tokens.weight")
      std = 1.f;
    else if (shape.size() == 2)
      std = 1.f / std::sqrt(static_cast<float>(shape[1]));
    const bool f32 = name.ends_with("q_norm.weight") || name.ends_with("k_norm.weight") ||
                     name.ends_with("A_log");
    Tensor t = ctx.empty(shape, f32 ? DType::F32 : DType::BF16);
    ops::fill_normal(ctx, t, seed * 0x9e3779b97f4a7c15ull + stream_id(name.c_str()), mean, std);
    if (name.ends_with("q_norm.weight") || name.ends_with("k_norm.weight"))
      t = t.reshape({1, t.numel()});
    if (bytes) *bytes += t.nbytes();
    return t;
  });
}

}  // namespace avdit::models::text::qwen35
