// The Qwen3-VL text forward, step by step as the golden README's "Architecture" (and transformers'
// Qwen3VLTextDecoderLayer) computes it. Named points carry the fixture's intermediate names.
#include "models/text/qwen3vl/encoder.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/qwen3vl/rope.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/context.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::models::text::qwen3vl {
namespace {

DType checked_act(DType act) {
  AVDIT_REQUIRE(act == DType::F32 || act == DType::BF16,
                "Qwen3-VL text encoder: activations in {} are not supported (F32 or BF16)",
                dtype_name(act));
  return act;
}

// x_0 = E[ids]: the prompt's rows gathered from the host table (the table never moves to the
// device), in the table's dtype (the caller casts them where they are used: on the host, a
// widening of T x hidden values cost more than the copy).
Tensor embed_rows(const Tensor& table, const std::vector<int32_t>& ids) {
  const int64_t V = table.size(0), H = table.size(1);
  const size_t row = static_cast<size_t>(dtype_nbytes(table.dtype(), H));
  Tensor out = Tensor::empty({static_cast<int64_t>(ids.size()), H}, table.dtype());
  auto* dst = static_cast<char*>(out.mutable_raw());
  const auto* src = static_cast<const char*>(table.raw());
  for (size_t t = 0; t < ids.size(); ++t) {
    AVDIT_REQUIRE(ids[t] >= 0 && ids[t] < V,
                  "Qwen3-VL text encoder: token id {} at position {} is outside the vocabulary "
                  "[0, {}) (is the tokenizer this model's?)",
                  ids[t], t, V);
    std::memcpy(dst + t * row, src + static_cast<size_t>(ids[t]) * row, row);
  }
  return out;
}

// rope(x) = x * cos + swap_halves(x) * sin_signed on heads x [T, heads, D] (see rope.h).
Tensor apply_rope(ops::Context& ctx, const Tensor& x, const RopeTable& table) {
  const int64_t D = x.size(-1), half = D / 2, rows = x.numel() / D;
  const Tensor flat = x.reshape({rows, D});
  Tensor swapped = ctx.empty({rows, D}, x.dtype());
  ops::copy_columns(ctx, flat, half, swapped, 0, half);
  ops::copy_columns(ctx, flat, 0, swapped, half, half);
  Tensor out = ops::mul(ctx, flat, table.cos);
  ops::add_(ctx, out, ops::mul(ctx, swapped, table.sin));
  return out.reshape(x.shape());
}

// The per-head tables [T * heads, D] on ctx: the [T, D] tables (rounded to the activation dtype,
// sin signed for the rotate-half) built on the host once, then gathered per head on the device,
// so the host builds T * D values instead of T * heads * D.
RopeTable per_head_on(ops::Context& ctx, const RopeTable& t, int64_t heads, DType dtype) {
  const RopeTable one = per_head(t, 1, dtype);
  const int64_t T = one.cos.size(0);
  std::vector<int32_t> idx(static_cast<size_t>(T * heads));
  for (int64_t r = 0; r < T; ++r)
    for (int64_t h = 0; h < heads; ++h) idx[static_cast<size_t>(r * heads + h)] = static_cast<int32_t>(r);
  const Tensor index = ctx.upload(Tensor::from_data({T * heads}, DType::I32, idx.data()));
  return {ops::gather_rows(ctx, ctx.upload(one.cos), index),
          ops::gather_rows(ctx, ctx.upload(one.sin), index)};
}

struct LayerInputs {
  const RopeTable& rope_q;  // per head, on the context
  const RopeTable& rope_k;
  const ops::Segments& causal;
};

// One Qwen3 decoder layer on the residual x [T, hidden] (updated in place).
void decoder_layer(ops::Context& ctx, const Qwen3VLTextConfig& c, DType act,
                   const DecoderLayerWeights& w, const LayerInputs& in, int64_t i, Tensor& x) {
  const int64_t T = x.size(0), Hq = c.num_attention_heads, Hkv = c.num_key_value_heads,
                D = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  {
    // Self-attention: pre-norm, q/k/v without biases, per-head RMSNorm of q and k before RoPE.
    const Tensor y = ops::rms_norm(ctx, x, w.input_layernorm, eps);
    ops::observe(ctx, {"layer{}.input_layernorm.out", i}, y);
    const Tensor q_raw = ops::linear(ctx, y, w.q_proj, nullptr, act).reshape({T, Hq, D});
    const Tensor k_raw = ops::linear(ctx, y, w.k_proj, nullptr, act).reshape({T, Hkv, D});
    const Tensor v = ops::linear(ctx, y, w.v_proj, nullptr, act).reshape({T, Hkv, D});
    const Tensor q_n = ops::rms_norm(ctx, q_raw, w.q_norm, eps);
    const Tensor k_n = ops::rms_norm(ctx, k_raw, w.k_norm, eps);
    ops::observe(ctx, {"layer{}.self_attn.q_norm.out", i}, q_n);
    ops::observe(ctx, {"layer{}.self_attn.k_norm.out", i}, k_n);
    const Tensor q = apply_rope(ctx, q_n, in.rope_q);
    const Tensor k = apply_rope(ctx, k_n, in.rope_k);
    // Causal softmax(q k^T / sqrt(D)) v; query head h reads kv head h / (Hq / Hkv).
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const Tensor core = ops::attention(ctx, q, k, v, scale, in.causal).reshape({T, Hq * D});
    const Tensor attn = ops::linear(ctx, core, w.o_proj, nullptr, act);
    ops::observe(ctx, {"layer{}.self_attn.out", i}, attn);
    ops::add_(ctx, x, attn);
  }
  {
    // MLP: SwiGLU, down_proj(silu(gate_proj(y)) * up_proj(y)).
    const Tensor y = ops::rms_norm(ctx, x, w.post_attention_layernorm, eps);
    ops::observe(ctx, {"layer{}.post_attention_layernorm.out", i}, y);
    const Tensor gate = ops::linear(ctx, y, w.gate_proj, nullptr, act);
    const Tensor up = ops::linear(ctx, y, w.up_proj, nullptr, act);
    const Tensor h = ops::mul(ctx, ops::silu(ctx, gate), up);
    const Tensor mlp = ops::linear(ctx, h, w.down_proj, nullptr, act);
    ops::observe(ctx, {"layer{}.mlp.out", i}, mlp);
    ops::add_(ctx, x, mlp);
  }
  ops::observe(ctx, {"layer{}.out", i}, x);
}

}  // namespace

Qwen3VLTextEncoder::Qwen3VLTextEncoder(ops::Context& ctx, const Checkpoint& ckpt,
                                       const Qwen3VLTextConfig& config, int64_t selected_layers,
                                       DType act)
    : ctx_(ctx), config_(config), act_(checked_act(act)) {
  w_ = load_weights(ctx, ckpt, config_, config_.checked_selected_layers(selected_layers), act_,
                    &weight_bytes_);
}

Qwen3VLTextEncoder::Qwen3VLTextEncoder(ops::Context& ctx, const Qwen3VLTextConfig& config,
                                       int64_t selected_layers, DType act, uint64_t seed)
    : ctx_(ctx), config_(config), act_(checked_act(act)) {
  w_ = random_weights(ctx, config_, config_.checked_selected_layers(selected_layers), act_, seed,
                      &weight_bytes_);
}

std::string Qwen3VLTextEncoder::describe() const {
  return fmt::format("qwen3_vl text path, {} of {} layers (hidden {}, {}, {})", selected_layers(),
                     config_.num_hidden_layers, config_.hidden_size, ctx_.name(), dtype_name(act_));
}

Tensor Qwen3VLTextEncoder::encode(const std::vector<int32_t>& ids) const {
  AVDIT_REQUIRE(!ids.empty(), "Qwen3-VL text encoder: no tokens to encode (empty prompt)");
  ops::Context& ctx = ctx_;
  const Qwen3VLTextConfig& c = config_;
  const int64_t T = static_cast<int64_t>(ids.size());
  Tensor x = ops::cast(ctx, ctx.upload(embed_rows(w_.embed_tokens, ids)), act_);
  ops::observe(ctx, {"embed"}, x);
  // Positions 0..T-1 in all three M-RoPE rows: plain 1-D RoPE over the whole head.
  const RopeTable rope = rope_table(T, c.head_dim, c.rope_theta);
  ops::observe_lazy(ctx, {"rope.cos"}, [&] { return ctx.upload(rope.cos); });
  ops::observe_lazy(ctx, {"rope.sin"}, [&] { return ctx.upload(rope.sin); });
  const RopeTable rope_q = per_head_on(ctx, rope, c.num_attention_heads, act_);
  const RopeTable rope_k = per_head_on(ctx, rope, c.num_key_value_heads, act_);
  // One document, causal: the prompt is batch 1 with an all-ones attention mask.
  ops::Segments causal = ops::plan_segments(ctx, {0, T}, c.num_attention_heads, c.head_dim, act_);
  causal.causal = true;
  const LayerInputs in{rope_q, rope_k, causal};
  for (size_t i = 0; i < w_.layers.size(); ++i)
    decoder_layer(ctx, c, act_, w_.layers[i], in, static_cast<int64_t>(i), x);
  // The raw residual after the last selected layer: no final norm (that state is not consumed),
  // widened on the device.
  return ctx.download(ops::cast(ctx, x, DType::F32));
}

}  // namespace avdit::models::text::qwen3vl

namespace avdit::models::text {

std::unique_ptr<TextEncoder> open_qwen3vl_text(ops::Context& ctx, const std::filesystem::path& dir,
                                               int selected_layers, DType act) {
  std::error_code ec;
  AVDIT_REQUIRE(std::filesystem::is_regular_file(dir / "config.json", ec),
                "Qwen3-VL text encoder {}: no config.json (the text encoder's folder with its "
                "config.json and safetensors is needed)",
                dir.string());
  const auto config = qwen3vl::Qwen3VLTextConfig::from_json(read_json(dir / "config.json"));
  config.checked_selected_layers(selected_layers);
  // Only the shards of the embedding and the selected layers are opened.
  const Checkpoint ckpt = Checkpoint::open(
      dir, [&](std::string_view name) { return qwen3vl::is_needed(name, selected_layers); });
  return std::make_unique<qwen3vl::Qwen3VLTextEncoder>(ctx, ckpt, config, selected_layers, act);
}

}  // namespace avdit::models::text
