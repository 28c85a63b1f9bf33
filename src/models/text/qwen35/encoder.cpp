// The Qwen3.5 text forward as transformers' Qwen3_5TextModel computes it (the reference MAGI-2
// instantiates), stopping at the consumed hidden state. The residual, norms and the recurrence are
// F32 on every backend; weights stay in the checkpoint's dtype and every product accumulates in
// fp32. In BF16 mode the GEMMs' inputs are rounded to bf16 (as the reference's bf16 run rounds
// them), so the weights multiply on bf16 tensor cores instead of being widened per call.
#include "models/text/qwen35/encoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "io/safetensors.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/attention_prologue.h"
#include "ops/causal_conv1d.h"
#include "ops/embedding.h"
#include "ops/gated_delta_rule.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::models::text::qwen35 {

Tensor qwen35_rope_table(const Qwen35TextConfig& c, int64_t tokens) {
  const int64_t R = c.rotary_dims(), half = R / 2;
  Tensor t = Tensor::empty({tokens, R}, DType::F32);
  float* p = t.f32();
  const auto theta = static_cast<float>(c.rope_theta);
  for (int64_t j = 0; j < half; ++j) {
    // torch: inv_freq = 1 / theta ** (arange(0, R, 2) / R) in float32; angle = pos * inv_freq.
    const float inv = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(R));
    for (int64_t pos = 0; pos < tokens; ++pos) {
      const float angle = static_cast<float>(pos) * inv;
      p[pos * R + j] = std::sin(angle);
      p[pos * R + half + j] = std::cos(angle);
    }
  }
  return t;
}

Qwen35TextEncoder::Qwen35TextEncoder(ops::Context& ctx, Qwen35TextConfig config,
                                     Qwen35TextWeights weights, std::string source, DType act)
    : ctx_(ctx), config_(std::move(config)), w_(std::move(weights)), source_(std::move(source)),
      act_(act) {
  AVDIT_REQUIRE(act_ == DType::F32 || act_ == DType::BF16,
                "Qwen3.5 text encoder {}: activations in {} are not supported (F32 or BF16)",
                source_, dtype_name(act_));
  AVDIT_REQUIRE(!w_.layers.empty(), "Qwen3.5 text encoder {}: no layers to run", source_);
  // The attention prologue normalises q and k with the model's eps fixed at 1e-6.
  const bool any_full = std::any_of(w_.layers.begin(), w_.layers.end(), [](const LayerWeights& l) {
    return l.type == LayerType::FullAttention;
  });
  AVDIT_REQUIRE(!any_full || config_.rms_norm_eps == 1e-6,
                "Qwen3.5 text encoder {}: rms_norm_eps {} (the QK norm supports 1e-6 only)",
                source_, config_.rms_norm_eps);
}

std::string Qwen35TextEncoder::describe() const {
  return fmt::format(
      "qwen3_5 text (Gated DeltaNet + gated attention), hidden_states[-{}]: {} of "
      "{} layers, hidden {}, {} GEMM inputs",
      config_.num_hidden_layers - layers_run() + 1, layers_run(), config_.num_hidden_layers,
      config_.hidden_size, dtype_name(act_));
}

Tensor Qwen35TextEncoder::gemm_input(const Tensor& x) const { return ops::cast(ctx_, x, act_); }

Tensor Qwen35TextEncoder::linear_attention(const LayerWeights& l, int64_t i,
                                           const Tensor& y) const {
  ops::Context& ctx = ctx_;
  const Qwen35TextConfig& c = config_;
  const LinearAttentionWeights& w = l.linear;
  const int64_t T = y.size(0), nk = c.linear_num_key_heads, dk = c.linear_key_head_dim,
                nv = c.linear_num_value_heads, dv = c.linear_value_head_dim,
                C = c.linear_conv_channels(), kd = nk * dk;
  // mixed_qkv = silu(causal depthwise conv(in_proj_qkv(y))), channels [q | k | v].
  const Tensor u = ops::causal_conv1d_silu(ctx, ops::linear(ctx, y, w.in_proj_qkv), w.conv1d);
  const Tensor q = ops::take_columns(ctx, u, 0, kd).reshape({T, nk, dk});
  const Tensor k = ops::take_columns(ctx, u, kd, 2 * kd).reshape({T, nk, dk});
  const Tensor v = ops::take_columns(ctx, u, 2 * kd, C).reshape({T, nv, dv});
  const Tensor z = ops::linear(ctx, y, w.in_proj_z).reshape({T, nv, dv});
  Tensor g = ctx.empty({T, nv}, DType::F32), beta = ctx.empty({T, nv}, DType::F32);
  ops::delta_rule_gates(ctx, ops::linear(ctx, y, w.in_proj_a), ops::linear(ctx, y, w.in_proj_b),
                        w.A_log, w.dt_bias, g, beta);
  ops::observe(ctx, {"layer{}.linear_attn.delta_rule.query", i}, q);
  ops::observe(ctx, {"layer{}.linear_attn.delta_rule.key", i}, k);
  ops::observe(ctx, {"layer{}.linear_attn.delta_rule.value", i}, v);
  ops::observe(ctx, {"layer{}.linear_attn.delta_rule.g", i}, g);
  ops::observe(ctx, {"layer{}.linear_attn.delta_rule.beta", i}, beta);
  const Tensor core = ops::gated_delta_rule(ctx, q, k, v, g, beta);
  ops::observe(ctx, {"layer{}.linear_attn.delta_rule.out", i}, core);
  // The gated norm: rmsnorm(core) * norm.weight (a plain weight here) * silu(z), per value head.
  const Tensor normed = ops::rms_norm(ctx, core, w.norm, static_cast<float>(c.rms_norm_eps));
  const Tensor o = ops::mul(ctx, normed, ops::silu(ctx, z));
  return ops::linear(ctx, gemm_input(o.reshape({T, nv * dv})), w.out_proj);
}

Qwen35TextEncoder::AttentionPlan Qwen35TextEncoder::plan_attention(int64_t tokens) const {
  ops::Context& ctx = ctx_;
  AttentionPlan p;
  p.rope = ctx.upload(qwen35_rope_table(config_, tokens));
  std::vector<int32_t> rows(static_cast<size_t>(tokens));
  std::iota(rows.begin(), rows.end(), 0);
  p.identity = ops::index_tensor(ctx, rows);
  p.seg = ops::plan_segments(ctx, {0, tokens}, config_.num_attention_heads, config_.head_dim,
                             DType::F32);
  p.seg.causal = true;
  return p;
}

Tensor Qwen35TextEncoder::full_attention(const LayerWeights& l, int64_t i, const Tensor& y,
                                         const AttentionPlan& plan) const {
  ops::Context& ctx = ctx_;
  const Qwen35TextConfig& c = config_;
  const FullAttentionWeights& w = l.full;
  const int64_t T = y.size(0), Hq = c.num_attention_heads, Hkv = c.num_key_value_heads,
                D = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // q_proj rows hold, per head, the query and then its output gate.
  const Tensor qg = ops::linear(ctx, y, w.q_proj).reshape({T * Hq, 2 * D});
  const Tensor q = ops::take_columns(ctx, qg, 0, D).reshape({T, Hq * D});
  const Tensor gate = ops::take_columns(ctx, qg, D, 2 * D).reshape({T, Hq, D});
  const Tensor k = ops::linear(ctx, y, w.k_proj), v = ops::linear(ctx, y, w.v_proj);
  ops::observe_lazy(ctx, {"layer{}.self_attn.q_norm.out", i}, [&] {
    return ops::rms_norm(ctx, q.reshape({T, Hq, D}), w.q_norm.reshape({D}), eps, true);
  });
  ops::observe_lazy(ctx, {"layer{}.self_attn.k_norm.out", i}, [&] {
    return ops::rms_norm(ctx, k.reshape({T, Hkv, D}), w.k_norm.reshape({D}), eps, true);
  });
  // QK norm (1 + w) and RoPE on the first R dims of each head, in one prologue over [q | k | v].
  Tensor qkv = ctx.empty({T, (Hq + 2 * Hkv) * D}, DType::F32);
  ops::copy_columns(ctx, q, 0, qkv, 0, Hq * D);
  ops::copy_columns(ctx, k, 0, qkv, Hq * D, Hkv * D);
  ops::copy_columns(ctx, v, 0, qkv, (Hq + Hkv) * D, Hkv * D);
  Tensor qr = ctx.empty({T, Hq, D}, DType::F32), kr = ctx.empty({T, Hkv, D}, DType::F32),
         vr = ctx.empty({T, Hkv, D}, DType::F32);
  ops::qkv_prologue(ctx, qkv, w.q_norm, w.k_norm, nullptr, plan.identity, plan.rope,
                    c.rotary_dims() / 2, qr, kr, vr);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const Tensor a = ops::attention(ctx, qr, kr, vr, scale, plan.seg);
  // The output gate is element-wise (one per head and dim), unlike the op's per-head gate.
  const Tensor gated = ops::mul(ctx, a, ops::sigmoid(ctx, gate));
  return ops::linear(ctx, gemm_input(gated.reshape({T, Hq * D})), w.o_proj);
}

Tensor Qwen35TextEncoder::mlp(const LayerWeights& l, const Tensor& y) const {
  ops::Context& ctx = ctx_;
  const Tensor h = ops::mul(ctx, ops::silu(ctx, ops::linear(ctx, y, l.gate_proj)),
                            ops::linear(ctx, y, l.up_proj));
  return ops::linear(ctx, gemm_input(h), l.down_proj);
}

Tensor Qwen35TextEncoder::encode(const std::vector<int32_t>& ids) const {
  ops::Context& ctx = ctx_;
  const Qwen35TextConfig& c = config_;
  AVDIT_REQUIRE(!ids.empty(), "Qwen3.5 text encoder: no tokens to encode");
  for (int32_t id : ids)
    AVDIT_REQUIRE(id >= 0 && id < c.vocab_size,
                  "Qwen3.5 text encoder: token id {} outside the vocabulary [0, {})", id,
                  c.vocab_size);
  const auto T = static_cast<int64_t>(ids.size());
  const float eps = static_cast<float>(c.rms_norm_eps);
  // x_0 = embed_tokens[ids], no scaling.
  Tensor x = ops::cast(ctx, ops::gather_rows(ctx, w_.embed_tokens, ops::index_tensor(ctx, ids)),
                       DType::F32);
  if (x.raw() == w_.embed_tokens.raw()) x = ops::clone(ctx, x);
  ops::observe(ctx, {"embed"}, x);
  const AttentionPlan plan = plan_attention(T);
  ops::observe(ctx, {"rope"}, plan.rope);
  for (int64_t i = 0; i < layers_run(); ++i) {
    const LayerWeights& l = w_.layers[static_cast<size_t>(i)];
    const bool linear = l.type == LayerType::LinearAttention;
    Tensor y = ops::rms_norm(ctx, x, l.input_layernorm, eps, true);
    ops::observe(ctx, {"layer{}.input_layernorm.out", i}, y);
    const Tensor yg = gemm_input(y);
    const Tensor mixed = linear ? linear_attention(l, i, yg) : full_attention(l, i, yg, plan);
    ops::observe(ctx, {linear ? "layer{}.linear_attn.out" : "layer{}.self_attn.out", i}, mixed);
    ops::add_(ctx, x, mixed);
    y = ops::rms_norm(ctx, x, l.post_attention_layernorm, eps, true);
    ops::observe(ctx, {"layer{}.post_attention_layernorm.out", i}, y);
    const Tensor m = mlp(l, gemm_input(y));
    ops::observe(ctx, {"layer{}.mlp.out", i}, m);
    ops::add_(ctx, x, m);
    ops::observe(ctx, {"layer{}.out", i}, x);
  }
  return ctx.download(x).reshape({T, c.hidden_size});
}

}  // namespace avdit::models::text::qwen35

namespace avdit::models::text {

std::unique_ptr<TextEncoder> open_qwen35_text(ops::Context& ctx, const std::filesystem::path& dir,
                                              int skip_layers, DType act) {
  const Checkpoint ckpt = Checkpoint::open(dir);
  AVDIT_REQUIRE(ckpt.config() != nullptr,
                "Qwen3.5 text encoder {}: no config.json next to the weights", dir.string());
  qwen35::Qwen35TextConfig config = qwen35::parse_qwen35_text_config(*ckpt.config());
  AVDIT_REQUIRE(skip_layers >= 1 && skip_layers < config.num_hidden_layers,
                "Qwen3.5 text encoder {}: skip_layers {} must be in [1, {}) (MAGI-2 uses 2)",
                dir.string(), skip_layers, config.num_hidden_layers);
  const int64_t layers = config.num_hidden_layers - skip_layers;
  qwen35::Qwen35TextWeights w = qwen35::load_text_weights(ctx, ckpt, config, layers);
  return std::make_unique<qwen35::Qwen35TextEncoder>(ctx, std::move(config), std::move(w),
                                                     ckpt.source().string(), act);
}

}  // namespace avdit::models::text
