// Checkpoint -> Qwen3VLTextWeights: one table of (name, shape) per layer, checked in full before
// anything is placed on the context.
#include "models/text/qwen3vl/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <functional>
#include <utility>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "ops/context.h"
#include "ops/random.h"

namespace avdit::models::text::qwen3vl {
namespace {

// The file to name in a message: the shard that holds `name`, else the checkpoint itself.
std::string file_holding(const Checkpoint& ckpt, const std::string& name) {
  for (const auto& f : ckpt.files())
    if (f->find(name)) return f->path().string();
  return ckpt.source().string();
}

bool is_float(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

using Bind = std::function<void(Tensor&, const std::string&, const Shape&)>;

// The one place that maps official names to members (and their expected shapes).
void visit_layer(const Qwen3VLTextConfig& c, int64_t i, DecoderLayerWeights& w, const Bind& bind) {
  const std::string p = fmt::format("{}layers.{}.", kPrefix, i);
  const int64_t H = c.hidden_size, F = c.intermediate_size, D = c.head_dim;
  bind(w.input_layernorm, p + "input_layernorm.weight", {H});
  bind(w.q_proj, p + "self_attn.q_proj.weight", {c.q_width(), H});
  bind(w.k_proj, p + "self_attn.k_proj.weight", {c.kv_width(), H});
  bind(w.v_proj, p + "self_attn.v_proj.weight", {c.kv_width(), H});
  bind(w.o_proj, p + "self_attn.o_proj.weight", {H, c.q_width()});
  bind(w.q_norm, p + "self_attn.q_norm.weight", {D});
  bind(w.k_norm, p + "self_attn.k_norm.weight", {D});
  bind(w.post_attention_layernorm, p + "post_attention_layernorm.weight", {H});
  bind(w.gate_proj, p + "mlp.gate_proj.weight", {F, H});
  bind(w.up_proj, p + "mlp.up_proj.weight", {F, H});
  bind(w.down_proj, p + "mlp.down_proj.weight", {H, F});
}

void visit(const Qwen3VLTextConfig& c, int64_t layers, Qwen3VLTextWeights& w, const Bind& bind) {
  bind(w.embed_tokens, std::string(kPrefix) + "embed_tokens.weight", {c.vocab_size, c.hidden_size});
  w.layers.resize(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) visit_layer(c, i, w.layers[static_cast<size_t>(i)], bind);
}

void check(const Checkpoint& ckpt, const std::string& name, const Shape& shape, int64_t layers) {
  AVDIT_REQUIRE(ckpt.contains(name),
                "Qwen3-VL checkpoint {}: missing tensor '{}' (expected [{}]; the first {} decoder "
                "layers are needed)",
                ckpt.source().string(), name, fmt::join(shape, ", "), layers);
  const TensorInfo& info = ckpt.info(name);
  AVDIT_REQUIRE(
      info.shape == shape, "Qwen3-VL checkpoint {}: tensor '{}' has shape [{}], expected [{}]",
      file_holding(ckpt, name), name, fmt::join(info.shape, ", "), fmt::join(shape, ", "));
  AVDIT_REQUIRE(is_float(info.dtype),
                "Qwen3-VL checkpoint {}: tensor '{}' has dtype {}, expected BF16 (or F32/F16)",
                file_holding(ckpt, name), name, dtype_name(info.dtype));
}

}  // namespace

bool is_needed(std::string_view name, int64_t selected_layers) {
  const std::string_view prefix = kPrefix;
  if (!name.starts_with(prefix)) return false;
  name.remove_prefix(prefix.size());
  if (name == "embed_tokens.weight") return true;
  constexpr std::string_view layers = "layers.";
  if (!name.starts_with(layers)) return false;
  name.remove_prefix(layers.size());
  int64_t i = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), i);
  return ec == std::errc() && end != name.data() + name.size() && *end == '.' && i >= 0 &&
         i < selected_layers;
}

Qwen3VLTextWeights load_weights(ops::Context& ctx, const Checkpoint& ckpt,
                                const Qwen3VLTextConfig& config, int64_t selected_layers, DType act,
                                int64_t* bytes) {
  Qwen3VLTextWeights w;
  visit(config, selected_layers, w, [&](Tensor&, const std::string& name, const Shape& shape) {
    check(ckpt, name, shape, selected_layers);
  });
  const std::string embed = std::string(kPrefix) + "embed_tokens.weight";
  int64_t total = 0;
  visit(config, selected_layers, w, [&](Tensor& t, const std::string& name, const Shape&) {
    t = ckpt.get(name);
    if (!ctx.is_cuda() || name == embed) return;
    t = ctx.upload(t.to(act));
    total += t.nbytes();
  });
  if (bytes) *bytes = total;
  return w;
}

Qwen3VLTextWeights random_weights(ops::Context& ctx, const Qwen3VLTextConfig& config,
                                  int64_t selected_layers, DType act, uint64_t seed,
                                  int64_t* bytes) {
  Qwen3VLTextWeights w;
  const std::string embed = std::string(kPrefix) + "embed_tokens.weight";
  int64_t total = 0;
  visit(config, selected_layers, w, [&](Tensor& t, const std::string& name, const Shape& shape) {
    const uint64_t stream = seed * 0x9e3779b97f4a7c15ull + stream_id(name.c_str());
    if (name == embed) {  // stays on the host, as a checkpoint's mapped table
      t = Tensor::empty(shape, DType::F32);
      ops::cpu::fill_normal(t, stream, 0.0f, 0.02f);
      return;
    }
    const bool norm = name.ends_with("norm.weight");
    t = ctx.empty(shape, ctx.is_cuda() ? act : DType::F32);
    ops::fill_normal(ctx, t, stream, norm ? 1.0f : 0.0f,
                     norm ? 0.1f : 1.0f / std::sqrt(static_cast<float>(shape.back())));
    if (ctx.is_cuda()) total += t.nbytes();
  });
  if (bytes) *bytes = total;
  return w;
}

}  // namespace avdit::models::text::qwen3vl
