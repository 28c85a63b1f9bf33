// The refiner forward (see model.h), step by step as the reference's Transformer: Adapter
// (embedders, RoPE table), the TransformerLayers (residual + gated windowed attention, residual +
// MLP), PostAdapter.
#include "models/magi2/refiner/model.h"

#include <cmath>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/model.h"
#include "models/magi2/refiner/window_ranges.h"
#include "ops/activation.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::models::magi2::refiner {

RefinerModel::RefinerModel(ops::Context& ctx, const Checkpoint& ckpt, DType act)
    : RefinerModel(ctx, ckpt, refiner_config_from_checkpoint(ckpt), act) {}

RefinerModel::RefinerModel(ops::Context& ctx, const Checkpoint& ckpt, const RefinerConfig& config,
                           DType act)
    : ctx_(ctx), config_(config), act_(act) {
  w_ = load_refiner_weights(ctx, ckpt, config_, act_, &weight_bytes_);
}

RefinerModel::RefinerModel(ops::Context& ctx, const RefinerConfig& config, DType act,
                           uint64_t seed)
    : ctx_(ctx), config_(config), act_(act) {
  w_ = random_refiner_weights(ctx, config_, act_, seed, &weight_bytes_);
}

RefinerPlan RefinerModel::plan(const Shape& video, int64_t audio_tokens,
                               int64_t text_tokens) const {
  ops::Context& ctx = ctx_;
  const RefinerConfig& c = config_;
  RefinerPlan p;
  p.layout = refiner_layout(c, video, audio_tokens, text_tokens);
  const int64_t L = p.tokens();
  p.sorted = TokenLayout::from_modality(p.layout.modality);
  for (int64_t r = 0; r < L; ++r)
    AVDIT_CHECK(p.sorted.perm[r] == r, "magi2 refiner: model order is not modality-sorted at {}",
                r);
  p.perm = ops::index_tensor(ctx, p.sorted.perm);
  p.inv = ops::index_tensor(ctx, p.sorted.inv);
  p.group = ops::index_tensor(ctx, p.sorted.groups());
  p.rope = ctx.empty({L, c.rope_dim}, DType::F32);
  ops::rope_table(ctx, ctx.upload(p.layout.coords), w_.rope_bands, p.rope);
  p.window = ops::plan_window(ctx, window_range_list(p.layout.grid, c.data_proxy.window, L), L, L);
  bool all_local = true;
  for (int64_t i = 0; i < c.num_layers; ++i) all_local = all_local && c.is_local_layer(i);
  if (!all_local) p.full = ops::plan_window(ctx, {{{0, L}, {0, L}}}, L, L);
  p.video_in = ops::index_tensor(ctx, p.layout.video_in);
  p.video_out = ops::index_tensor(ctx, p.layout.video_out);
  p.audio_out = ops::index_tensor(ctx, p.layout.audio_out);
  return p;
}

Tensor RefinerModel::forward(const RefinerPlan& p, const Tensor& video_x, const Tensor& audio,
                             const Tensor& text) const {
  ops::Context& ctx = ctx_;
  const RefinerConfig& c = config_;
  const RefinerLayout& l = p.layout;
  AVDIT_REQUIRE(video_x.numel() == l.video * c.video_in_channels &&
                    audio.numel() == l.audio * c.audio_in_channels &&
                    text.numel() == l.text * c.text_in_channels,
                "magi2 refiner forward: inputs {} (video), {} (audio), {} (text) do not fit the "
                "plan: {} x {}, {} x {}, {} x {}",
                video_x.shape_str(), audio.shape_str(), text.shape_str(), l.video,
                c.video_in_channels, l.audio, c.audio_in_channels, l.text, c.text_in_channels);
  Tensor s = embed(p, video_x, audio, text);
  ops::observe(ctx, {"rope"}, p.rope);
  for (int64_t i = 0; i < c.num_layers; ++i) layer(i, p, s);
  return post_adapter(p, s);
}

Tensor RefinerModel::forward_packed(const RefinerPlan& p, const Tensor& x_any) const {
  ops::Context& ctx = ctx_;
  const RefinerConfig& c = config_;
  const RefinerLayout& l = p.layout;
  AVDIT_REQUIRE(
      x_any.ndim() == 2 && x_any.size(0) == l.tokens() && x_any.size(1) >= c.max_in_channels,
      "magi2 refiner forward: packed x has shape {}, expected [{}, >= {}]", x_any.shape_str(),
      l.tokens(), c.max_in_channels);
  const Tensor x = ops::cast(ctx, ctx.upload(x_any), DType::F32);
  auto part = [&](int64_t b, int64_t n, int64_t width) {
    return ops::take_columns(ctx, x.slice_rows(b, b + n), 0, width);
  };
  return forward(p, part(0, l.video, c.video_in_channels),
                 part(l.video, l.audio, c.audio_in_channels),
                 part(l.video + l.audio, l.text, c.text_in_channels));
}

std::array<Tensor, 2> RefinerModel::velocity(const RefinerPlan& p, const Tensor& video,
                                             const Tensor& audio, const Tensor& text) const {
  ops::Context& ctx = ctx_;
  const RefinerConfig& c = config_;
  const RefinerLayout& l = p.layout;
  const Shape vshape{1, l.channels, l.grid.T, l.grid.H, l.grid.W};
  AVDIT_REQUIRE(video.shape() == vshape,
                "magi2 refiner: video latent {} does not match the plan's {}", video.shape_str(),
                shape_str(vshape));
  AVDIT_REQUIRE(audio.ndim() == 3 && audio.size(0) == 1 && audio.size(1) == l.audio &&
                    audio.size(2) == c.audio_in_channels,
                "magi2 refiner: audio latent {} does not match [1, {}, {}]", audio.shape_str(),
                l.audio, c.audio_in_channels);
  AVDIT_REQUIRE(text.ndim() == 3 && text.size(0) == 1 && text.size(1) == l.text &&
                    text.size(2) == c.text_in_channels,
                "magi2 refiner: text features {} do not match [1, {}, {}]", text.shape_str(),
                l.text, c.text_in_channels);
  const Tensor v = ops::cast(ctx, ctx.upload(video), DType::F32);
  Tensor video_x = ctx.empty({l.video, l.channels}, DType::F32);
  ops::gather_elements(ctx, v, p.video_in, video_x);
  const Tensor out = forward(p, video_x, ctx.upload(audio).reshape({l.audio, c.audio_in_channels}),
                             ctx.upload(text).reshape({l.text, c.text_in_channels}));
  Tensor vv = ctx.empty(vshape, DType::F32), av = ctx.empty(audio.shape(), DType::F32);
  ops::gather_elements(ctx, out, p.video_out, vv);
  if (l.audio > 0) ops::gather_elements(ctx, out, p.audio_out, av);
  return {vv, av};
}

// Adapter: each modality's embedder (fp32, with bias) on its rows; the TransformerBlock casts the
// result to the stream dtype. There is no timestep input.
Tensor RefinerModel::embed(const RefinerPlan& p, const Tensor& video_x, const Tensor& audio,
                           const Tensor& text) const {
  ops::Context& ctx = ctx_;
  const int64_t L = p.tokens(), hidden = config_.hidden_size;
  const Tensor parts[3] = {video_x, audio, text};
  Tensor y = ctx.empty({L, hidden}, DType::F32);
  for (int m = 0; m < 3; ++m) {
    const int64_t b = p.sorted.begin[m], n = p.sorted.size[m];
    if (n == 0) continue;
    Tensor ym = y.slice_rows(b, b + n);
    const Tensor xm = ops::cast(ctx, ctx.upload(parts[m]), DType::F32);
    ops::linear_into(ctx, xm.reshape({n, xm.numel() / n}), w_.embedder_w[m], nullptr, ym);
  }
  auto epilogue = [&](DType dtype) {
    Tensor e = ctx.empty({L, hidden}, dtype);
    ops::embed_epilogue(ctx, y, w_.embedder_b, p.group, nullptr, p.perm, e);
    return e;
  };
  Tensor s = epilogue(act_);
  if (act_ == DType::F32)
    ops::observe(ctx, {"embed"}, s);
  else
    ops::observe_lazy(ctx, {"embed"}, [&] { return epilogue(DType::F32); });
  return s;
}

// hidden = hidden + attention(hidden); hidden = hidden + mlp(hidden). In bf16 the stream is bf16
// until the first MLP output (fp32) is added, fp32 from there on (torch's promotion).
void RefinerModel::layer(int64_t i, const RefinerPlan& p, Tensor& s) const {
  ops::Context& ctx = ctx_;
  const RefinerConfig& c = config_;
  const RefinerLayerWeights& lw = w_.layers[i];
  const ops::WindowPlan& window = c.is_local_layer(i) ? p.window : p.full;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  auto core = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
    ops::observe(ctx, {"layers.{}.attn.q", i}, q);
    ops::observe(ctx, {"layers.{}.attn.k", i}, k);
    ops::observe(ctx, {"layers.{}.attn.v", i}, v);
    Tensor lse;
    if (ops::observed(ctx, {"layers.{}.attn.lse", i}))
      lse = ctx.empty({p.tokens(), c.num_heads_q}, DType::F32);
    Tensor o = ops::windowed_attention(ctx, q, k, v, scale, window, nullptr, act_,
                                       lse.defined() ? &lse : nullptr);
    ops::observe(ctx, {"layers.{}.attn.out", i}, o);
    if (lse.defined()) ops::observe(ctx, {"layers.{}.attn.lse", i}, lse);
    return o;
  };
  const Tensor attn_out =
      gated_attention(ctx, p.rows(), lw.attention, lw.groups, c.num_heads_q, c.num_heads_kv,
                      c.head_dim, c.rope_dim / 2, act_, s, core);
  ops::add_(ctx, s, attn_out);
  const Tensor mlp_out = dense_mlp(ctx, p.rows(), lw.mlp, lw.groups, act_, s);
  if (s.dtype() == DType::F32)
    ops::add_(ctx, s, mlp_out);
  else
    s = ops::add(ctx, s, mlp_out, DType::F32);
  ops::observe(ctx, {"layers.{}.output", i}, s);
}

// PostAdapter in fp32: RMSNorm with the video / audio weight, then the modality's final linear;
// text rows stay 0.
Tensor RefinerModel::post_adapter(const RefinerPlan& p, const Tensor& s) const {
  ops::Context& ctx = ctx_;
  Tensor out = magi2::post_adapter(ctx, p.sorted, p.group, w_.final_norm, w_.final_linear,
                                   config_.out_channels, s);
  ops::observe(ctx, {"model_output"}, out);
  return out;
}

}  // namespace avdit::models::magi2::refiner
