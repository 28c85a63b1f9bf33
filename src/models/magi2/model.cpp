// The MAGI-2 preview forward (see model.h), step by step as the reference's Transformer:
// PreAdapter, the layers (mHC around attention and the MLP), PostAdapter. Named points: the
// fixture's names (embed_pre_time, embed, rope, layers.{i}.*) through observe_lazy with the gather
// back to packed order, so nothing is computed without a probe; and the MoE stages (moe.{i}.*: the
// tensor as it is, in the model's own order) for timers and statistics.
#include "models/magi2/model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "models/magi2/layers.h"
#include "models/stack_points.h"
#include "ops/activation.h"
#include "ops/attention_fp8.h"
#include "ops/attention_prologue.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/mhc.h"
#include "ops/moe.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::models::magi2 {

Magi2Model::Magi2Model(ops::Context& ctx, const Checkpoint& ckpt, DType act,
                       const LoadOptions& load)
    : Magi2Model(ctx, ckpt, config_from_checkpoint(ckpt), act, load) {}

Magi2Model::Magi2Model(ops::Context& ctx, const Checkpoint& ckpt, const Magi2Config& config,
                       DType act, const LoadOptions& load)
    : ctx_(ctx),
      config_(config),
      act_(act),
      moe_combine_(load.moe_combine),
      nvfp4_expert_inputs_(load.nvfp4_expert_inputs),
      fp8_attention_(load.fp8_attention) {
  if (load.fp8_gemm) fp8_.emplace(*load.fp8_gemm);
  w_ = load_weights(ctx, ckpt, config_, act_, load, &weight_bytes_);
  time_freqs_ = ctx.upload(ops::time_frequencies(config_.data_proxy.time_channel_dim));
}

Magi2Model::Magi2Model(ops::Context& ctx, const Magi2Config& config, DType act, uint64_t seed,
                       const LoadOptions& load)
    : ctx_(ctx),
      config_(config),
      act_(act),
      moe_combine_(load.moe_combine),
      nvfp4_expert_inputs_(load.nvfp4_expert_inputs),
      fp8_attention_(load.fp8_attention) {
  if (load.fp8_gemm) fp8_.emplace(*load.fp8_gemm);
  w_ = random_weights(ctx, config_, act_, seed, &weight_bytes_, load);
  time_freqs_ = ctx.upload(ops::time_frequencies(config_.data_proxy.time_channel_dim));
}

Magi2Plan Magi2Model::plan(const std::vector<int32_t>& modality, const Tensor& coords_any,
                           std::vector<int64_t> cu) const {
  ops::Context& ctx = ctx_;
  const Magi2Config& c = config_;
  Magi2Plan p;
  p.layout = TokenLayout::from_modality(modality);  // validates the ids
  const int64_t L = p.layout.tokens();
  AVDIT_REQUIRE(L > 0, "magi2 forward: the packed sequence is empty");
  AVDIT_REQUIRE(L < (int64_t{1} << 31), "magi2 forward: {} tokens do not fit 32-bit indices", L);
  AVDIT_REQUIRE(coords_any.defined() && coords_any.ndim() == 2 && coords_any.size(0) == L &&
                    coords_any.size(1) == 9,
                "magi2 forward: coords_mapping has shape {}, expected [{}, 9]",
                coords_any.defined() ? coords_any.shape_str() : std::string("none"), L);
  AVDIT_REQUIRE(
      cu.size() >= 2 && cu.front() == 0 && cu.back() == L && std::is_sorted(cu.begin(), cu.end()),
      "magi2 forward: cu_seqlens must rise from 0 to {} ({} entries)", L, cu.size());
  p.perm = ops::index_tensor(ctx, p.layout.perm);
  p.inv = ops::index_tensor(ctx, p.layout.inv);
  p.group = ops::index_tensor(ctx, p.layout.groups());
  p.rope = ctx.empty({L, 6 * c.rope_bands}, DType::F32);
  ops::rope_table(ctx, ops::cast(ctx, ctx.upload(coords_any), DType::F32), w_.rope_bands, p.rope);
  p.segments = ops::plan_segments(ctx, std::move(cu), c.num_heads_q, c.head_dim, act_);
  return p;
}

Tensor Magi2Model::time_embedding(const Tensor& per_token_t, const Tensor& freqs) const {
  ops::Context& ctx = ctx_;
  const int64_t tc = config_.data_proxy.time_channel_dim;
  const Tensor t = ops::cast(ctx, ctx.upload(per_token_t), DType::F32);
  Tensor out = ctx.empty({t.numel(), tc}, DType::F32);
  const Tensor f = freqs.defined() ? ops::cast(ctx, ctx.upload(freqs), DType::F32) : time_freqs_;
  AVDIT_REQUIRE(tc <= 1 || f.numel() == tc / 2,
                "magi2: {} time-embedding frequencies, expected {} (time_channel_dim / 2)",
                f.numel(), tc / 2);
  ops::time_embedding(ctx, t, f, out);
  return out;
}

Tensor Magi2Model::forward(const Magi2Plan& p, const Tensor& x_any, const Tensor& time_any) const {
  ops::Context& ctx = ctx_;
  const Magi2Config& c = config_;
  const int64_t L = p.tokens(), tc = c.data_proxy.time_channel_dim;
  const Tensor x = ops::cast(ctx, ctx.upload(x_any), DType::F32);
  AVDIT_REQUIRE(x.ndim() == 2 && x.size(0) == L && x.size(1) >= c.max_in_channels,
                "magi2 forward: packed x has shape {}, expected [{}, >= {}]", x.shape_str(), L,
                c.max_in_channels);
  Tensor time;
  if (tc > 0) {
    AVDIT_REQUIRE(time_any.defined() && time_any.numel() == L * tc,
                  "magi2 forward: time_token_sequence must be [{}, {}], found {}", L, tc,
                  time_any.defined() ? time_any.shape_str() : std::string("none"));
    time = ops::cast(ctx, ctx.upload(time_any), DType::F32).reshape({L, tc});
  }
  Tensor s = embed(p, x, time);
  ops::observe(ctx, {"rope"}, p.rope);
  // The stack points (models/stack_points.h): a step cache may answer the layers from block 0 or 1.
  ops::observe(ctx, {models::kStackInput}, s);
  if (c.num_layers > 0)
    ops::observe_lazy(ctx, {models::kStackModulated}, [&] {
      Tensor in = ctx.empty({L, c.hidden_size}, act_);
      ops::mhc_apply_pre(ctx, s, branch_coefficients(0, 0, p, s, w_.layers[0].mhc_attn).h_pre,
                         c.mhc_num_stream, in);
      return in;
    });
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (models::skip_rest_of_stack(ctx, i)) break;
    layer(i, p, s);
    if (i == 0) ops::observe(ctx, {models::kStackBlock0}, s);
  }
  ops::observe_mut(ctx, {models::kStackOutput}, s);
  return post_adapter(p, s);
}

// The mHC coefficients of one branch of layer i: RMSNorm of the flat state with the per-modality
// mhc_norm rows (the same weight for both branches), the phi GEMM in fp32, then sigmoid / 2
// sigmoid / Sinkhorn, cast to the stream dtype (the reference's out_dtype = s.dtype). The points
// mhc.{i}.logits (norm + phi) and mhc.{i}.coef (part = branch) only bound the
// stretches bench step times.
ops::MhcCoefficients Magi2Model::branch_coefficients(int64_t i, int branch, const Magi2Plan& p,
                                                     const Tensor& s,
                                                     const MhcBranchWeights& b) const {
  const LayerWeights& lw = w_.layers[i];
  const Tensor* grp = lw.groups > 1 ? &p.group : nullptr;
  const Tensor h =
      ops::mhc_logits(ctx_, s, ops::RmsNormWeight{lw.mhc_norm, true, grp}, kNormEps, b.phi);
  ops::observe(ctx_, {"mhc.{}.logits", i, branch}, h);
  ops::MhcCoefficients co = ops::mhc_coefficients(ctx_, h, b.coef, config_.mhc_num_stream, act_);
  ops::observe(ctx_, {"mhc.{}.coef", i, branch}, co.h_pre);
  return co;
}

// PreAdapter: each modality's embedder on its first C_m channels, in permuted order; then the time
// embedding OVERWRITES channels [0, tc) of every token (text included); the TransformerBlock casts
// the (fp32) result to the stream dtype.
Tensor Magi2Model::embed(const Magi2Plan& p, const Tensor& x, const Tensor& time) const {
  ops::Context& ctx = ctx_;
  const Magi2Config& c = config_;
  const int64_t L = p.tokens(), R = c.residual_width;
  const int64_t cin[3] = {c.video_in_channels, c.audio_in_channels, c.text_in_channels};
  const Tensor x_perm = ops::gather_rows(ctx, x, p.perm);
  Tensor y = ctx.empty({L, R}, DType::F32);
  for (int m = 0; m < 3; ++m) {
    const int64_t b = p.layout.begin[m], n = p.layout.size[m];
    if (n == 0) continue;
    Tensor ym = y.slice_rows(b, b + n);
    ops::linear_into(ctx, ops::take_columns(ctx, x_perm.slice_rows(b, b + n), 0, cin[m]),
                     w_.embedder_w[m], nullptr, ym);
  }
  const Tensor* tp = time.defined() ? &time : nullptr;
  auto epilogue_f32 = [&](const Tensor* t) {
    Tensor e = ctx.empty({L, R}, DType::F32);
    ops::embed_epilogue(ctx, y, w_.embedder_b, p.group, t, p.perm, e);
    return ops::gather_rows(ctx, e, p.inv);
  };
  ops::observe_lazy(ctx, {"embed_pre_time"}, [&] { return epilogue_f32(nullptr); });
  ops::observe_lazy(ctx, {"embed"}, [&] { return epilogue_f32(tp); });
  Tensor s = ctx.empty({L, R}, act_);
  ops::embed_epilogue(ctx, y, w_.embedder_b, p.group, tp, p.perm, s);
  return s;
}

void Magi2Model::layer(int64_t i, const Magi2Plan& p, Tensor& s) const {
  ops::Context& ctx = ctx_;
  const Magi2Config& c = config_;
  const LayerWeights& lw = w_.layers[i];
  const int64_t L = p.tokens(), n = c.mhc_num_stream, hidden = c.hidden_size;
  auto packed = [&](const Tensor& t) { return ops::gather_rows(ctx, t, p.inv); };
  auto coefficients = [&](int branch, const MhcBranchWeights& b) {
    return branch_coefficients(i, branch, p, s, b);
  };
  auto observe_coefficients = [&](const ops::MhcCoefficients& co, const char* pre, const char* post,
                                  const char* res) {
    ops::observe_lazy(ctx, {pre, i}, [&] { return packed(co.h_pre); });
    ops::observe_lazy(ctx, {post, i}, [&] { return packed(co.h_post); });
    ops::observe_lazy(ctx, {res, i}, [&] { return packed(co.h_res); });
  };

  // Attention branch: the mHC mix into the branch input, the branch, the mix back into the streams.
  const ops::MhcCoefficients ca = coefficients(0, lw.mhc_attn);
  observe_coefficients(ca, "layers.{}.mhc.attn.h_pre", "layers.{}.mhc.attn.h_post",
                       "layers.{}.mhc.attn.h_res");
  Tensor attn_in = ctx.empty({L, hidden}, act_);
  ops::mhc_apply_pre(ctx, s, ca.h_pre, n, attn_in);
  ops::observe_lazy(ctx, {"layers.{}.attn_in", i}, [&] { return packed(attn_in); });
  ops::observe(ctx, {"attn.{}.in", i}, attn_in);
  const Tensor attn_out = attention(i, p, attn_in);
  ops::observe(ctx, {"attn.{}.out", i}, attn_out);
  ops::observe_lazy(ctx, {"layers.{}.attn_out", i}, [&] { return packed(attn_out); });
  ops::mhc_hyper_connect_(ctx, s, attn_out, ca.h_post, ca.h_res, n);
  ops::observe(ctx, {"mhc.{}.post", i, 0}, s);

  // MLP branch.
  const ops::MhcCoefficients cm = coefficients(1, lw.mhc_mlp);
  observe_coefficients(cm, "layers.{}.mhc.mlp.h_pre", "layers.{}.mhc.mlp.h_post",
                       "layers.{}.mhc.mlp.h_res");
  Tensor mlp_in = ctx.empty({L, hidden}, act_);
  ops::mhc_apply_pre(ctx, s, cm.h_pre, n, mlp_in);
  ops::observe_lazy(ctx, {"layers.{}.mlp_in", i}, [&] { return packed(mlp_in); });
  ops::observe(ctx, {"mlp.{}.in", i}, mlp_in);
  const Tensor mlp_out = lw.moe ? moe_mlp(i, p, mlp_in) : dense_mlp(i, p, mlp_in);
  ops::observe(ctx, {"mlp.{}.out", i}, mlp_out);
  ops::observe_lazy(ctx, {"layers.{}.mlp_out", i}, [&] { return packed(mlp_out); });
  ops::mhc_hyper_connect_(ctx, s, mlp_out, cm.h_post, cm.h_res, n);
  ops::observe(ctx, {"mhc.{}.post", i, 1}, s);
  ops::observe_lazy(ctx, {"layers.{}.output", i}, [&] { return packed(s); });
}

// The shared gated attention sub-layer (layers.h) around the core with the sinks.
Tensor Magi2Model::attention(int64_t i, const Magi2Plan& p, const Tensor& attn_in) const {
  ops::Context& ctx = ctx_;
  const Magi2Config& c = config_;
  const AttentionWeights& w = w_.layers[i].attention;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  return gated_attention(ctx, row_order(p), w, w_.layers[i].groups, c.num_heads_q, c.num_heads_kv,
                         c.head_dim, c.rope_dim / 2, act_, attn_in,
                         [&](const Tensor& q, const Tensor& k, const Tensor& v) {
                           ops::observe(ctx, {"attn.{}.core_in", i}, q);
                           Tensor o =
                               fp8_attention_
                                   ? ops::attention_fp8(ctx, q, k, v, scale, p.segments, &w.sinks, act_)
                                   : ops::attention(ctx, q, k, v, scale, p.segments, &w.sinks,
                                                    nullptr, act_);  // [L, Hq, D] packed
                           ops::observe(ctx, {"attn.{}.core", i}, o);
                           return o;
                         },
                         fp8());
}

Tensor Magi2Model::dense_mlp(int64_t i, const Magi2Plan& p, const Tensor& mlp_in) const {
  return magi2::dense_mlp(ctx_, row_order(p), w_.layers[i].dense, w_.layers[i].groups, act_,
                          mlp_in, fp8());
}

// The multi-head MoE: pre_norm (always the three modality rows), split linear, the per-head fp32
// router, the routed experts, plus the shared expert and the modality-specific shared expert,
// summed by the merge (ops/moe.h).
Tensor Magi2Model::moe_mlp(int64_t i, const Magi2Plan& p, const Tensor& mlp_in) const {
  ops::Context& ctx = ctx_;
  const Magi2Config& c = config_;
  const MoeWeights& w = w_.layers[i].moe_mlp;
  AVDIT_CHECK(w_.layers[i].moe, "magi2: layer {} is not a MoE layer", i);
  ops::MoeConfig mc = moe_config(c);
  mc.combine = moe_combine_;
  mc.nvfp4_inputs = nvfp4_expert_inputs_;
  const int64_t L = p.tokens(), hidden = c.hidden_size, W = c.moe_width,
                Is = c.moe.shared_expert_intermediate_size;
  auto packed = [&](const Tensor& t) { return ops::gather_rows(ctx, t, p.inv); };
  const Tensor xn =
      ops::rms_norm(ctx, mlp_in, ops::RmsNormWeight{w.pre_norm, true, &p.group}, kNormEps, act_);
  ops::observe(ctx, {"moe.{}.norm", i}, xn);
  const Tensor split = grouped_linear(p, xn, w.split_linear, 1);  // [L, W]: the heads side by side
  ops::observe(ctx, {"moe.{}.split", i}, split);
  // Router logits and score gaps only when a probe wants them; the gap comes before the choices
  // (router statistics pair them, analysis/routes/recorder.h).
  const ops::Routing r = ops::route(ctx, split, w.gate, w.expert_bias, mc,
                                    ops::observed(ctx, {"layers.{}.router.logits", i}),
                                    ops::observed(ctx, {"moe.{}.router.gap", i}));
  if (r.gap.defined()) ops::observe(ctx, {"moe.{}.router.gap", i}, r.gap);
  ops::observe(ctx, {"moe.{}.router", i}, r.indices);
  // [routed experts' output | shared expert's h] side by side: moe_output sums both in one GEMM on
  // the GPU.
  Tensor cat = ctx.empty({L, W + Is}, act_);
  ops::routed_experts(ctx, split, r, w.experts, mc, cat);
  ops::observe(ctx, {"moe.{}.experts", i}, cat);
  // The shared expert on every token (fc1 rows interleave gate / linear), its h beside the
  // experts'.
  ops::gated_into(ctx, ops::Gated::Swiglu7Interleaved, grouped_linear(p, xn, w.shared_fc1, 1),
                  nullptr, cat, W);
  ops::observe(ctx, {"moe.{}.shared", i}, cat);
  // The modality-specific shared expert.
  const Tensor ms_h = ops::gated(ctx, ops::Gated::Swiglu7Interleaved,
                                 grouped_linear(p, xn, w.ms_fc1, kNumModalities));
  const Tensor specific = grouped_linear(p, ms_h, w.ms_fc2, kNumModalities);
  ops::observe(ctx, {"moe.{}.specific", i}, specific);
  Tensor out = ctx.empty({L, hidden}, act_);
  ops::moe_output(ctx, cat, specific, w.output, out);
  ops::observe(ctx, {"moe.{}.out", i}, out);

  ops::observe_lazy(ctx, {"layers.{}.moe.split_out", i}, [&] { return packed(split); });
  ops::observe_lazy(ctx, {"layers.{}.moe.experts_out", i},
                    [&] { return packed(ops::take_columns(ctx, cat, 0, W)); });
  if (ops::observed(ctx, {"layers.{}.moe.merge_out", i}) ||
      ops::observed(ctx, {"layers.{}.moe.shared_out", i})) {
    Tensor merge_out = ctx.empty({L, hidden}, act_), shared_out = ctx.empty({L, hidden}, act_);
    Tensor again = ctx.empty({L, hidden}, act_);
    ops::moe_output(ctx, cat, specific, w.output, again, &merge_out, &shared_out);
    ops::observe_lazy(ctx, {"layers.{}.moe.merge_out", i}, [&] { return packed(merge_out); });
    ops::observe_lazy(ctx, {"layers.{}.moe.shared_out", i}, [&] { return packed(shared_out); });
  }
  if (r.logits.defined())
    ops::observe_lazy(ctx, {"layers.{}.router.logits", i}, [&] { return packed(r.logits); });
  ops::observe_lazy(ctx, {"layers.{}.router.topk_weights", i}, [&] { return packed(r.weights); });
  ops::observe_lazy(ctx, {"layers.{}.router.topk_indices", i}, [&] { return packed(r.indices); });
  return out;
}

// PostAdapter in fp32 (the stream cast to its fp32 norm weight's dtype): RMSNorm over all n*hidden
// channels with the video / audio weight, then the modality's final linear; text rows stay 0.
Tensor Magi2Model::post_adapter(const Magi2Plan& p, const Tensor& s) const {
  ops::Context& ctx = ctx_;
  const Tensor out = magi2::post_adapter(ctx, p.layout, p.group, w_.final_norm, w_.final_linear,
                                         config_.out_channels, s);
  return ops::gather_rows(ctx, out, p.inv);
}

Tensor Magi2Model::grouped_linear(const Magi2Plan& p, const Tensor& x, const Tensor& w,
                                  int64_t groups) const {
  return magi2::grouped_linear(ctx_, p.layout, x, w, groups, act_, fp8());
}

}  // namespace avdit::models::magi2
