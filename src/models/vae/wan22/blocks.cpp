// The Wan2.2 VAE blocks, step by step as vae2_2.py computes them (see blocks.h).
#include "models/vae/wan22/blocks.h"

#include <cmath>

#include "core/error.h"
#include "io/safetensors.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/context.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::models::vae::wan22 {
namespace {

bool is_float(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

void require_float(const Checkpoint& ckpt, const std::string& name) {
  const TensorInfo& i = ckpt.info(name);
  AVDIT_REQUIRE(is_float(i.dtype), "{}: tensor '{}' has dtype {}, expected F32 (or BF16/F16)",
                ckpt.source().string(), name, dtype_name(i.dtype));
}

// [rows, C] view of channel-last video.
Tensor rows_of(const Tensor& x) { return x.reshape({x.numel() / x.size(-1), x.size(-1)}); }

}  // namespace

DType require_act(DType act, const char* what) {
  AVDIT_REQUIRE(act == DType::F32 || act == DType::BF16,
                "{}: activations in {} are not supported (F32 or BF16)", what, dtype_name(act));
  return act;
}

Tensor& FeatureCache::slot() {
  if (next == slots.size()) slots.emplace_back();
  return slots[next++];
}

void ChunkPoints::add(const Point& p, const Tensor& t) {
  if (ops::observed(ctx_, p)) parts_[p.str()].push_back(ops::clone(ctx_, t));
}

void ChunkPoints::emit() {
  for (auto& [name, parts] : parts_)
    ops::observe(ctx_, {name.c_str()}, ops::concat_rows(ctx_, parts));
}

Conv load_conv(const Checkpoint& ckpt, const std::string& name, int64_t out, int64_t in) {
  const std::string wn = name + ".weight", bn = name + ".bias";
  const Shape& s = ckpt.info(wn).shape;
  AVDIT_REQUIRE((s.size() == 5 || s.size() == 4) && s[0] == out && s[1] == in,
                "{}: tensor '{}' has shape {}, expected a convolution [{}, {}, k...]",
                ckpt.source().string(), wn, shape_str(s), out, in);
  require_float(ckpt, wn);
  require_float(ckpt, bn);
  Conv c;
  c.w = ops::conv3d_weight(ckpt.get(wn));
  c.b = ckpt.require(bn, {out}).to_f32();
  return c;
}

Tensor load_gamma(const Checkpoint& ckpt, const std::string& name, int64_t channels) {
  const Shape& s = ckpt.info(name).shape;
  AVDIT_REQUIRE(!s.empty() && s[0] == channels && shape_numel(s) == channels,
                "{}: tensor '{}' has shape {}, expected an RMSNorm gamma of {} channels",
                ckpt.source().string(), name, shape_str(s), channels);
  require_float(ckpt, name);
  return ckpt.get(name).to_f32().reshape({channels});
}

int64_t residual_block_out(const Checkpoint& ckpt, const std::string& prefix) {
  const std::string n = prefix + ".residual.2.weight";
  return ckpt.contains(n) ? ckpt.info(n).shape.at(0) : 0;
}

std::vector<ResidualBlockWeights> load_residual_run(const Checkpoint& ckpt,
                                                    const std::string& prefix, int64_t in,
                                                    int64_t* next, int64_t* out) {
  std::vector<ResidualBlockWeights> blocks;
  int64_t j = 0, c = in;
  for (int64_t o; (o = residual_block_out(ckpt, prefix + std::to_string(j))) > 0; ++j, c = o)
    blocks.push_back(load_residual_block(ckpt, prefix + std::to_string(j), c, o));
  *next = j;
  *out = c;
  return blocks;
}

ResidualBlockWeights load_residual_block(const Checkpoint& ckpt, const std::string& prefix,
                                         int64_t in, int64_t out) {
  ResidualBlockWeights w;
  w.gamma1 = load_gamma(ckpt, prefix + ".residual.0.gamma", in);
  w.conv1 = load_conv(ckpt, prefix + ".residual.2", out, in);
  w.gamma2 = load_gamma(ckpt, prefix + ".residual.3.gamma", out);
  w.conv2 = load_conv(ckpt, prefix + ".residual.6", out, out);
  if (in != out) w.shortcut = load_conv(ckpt, prefix + ".shortcut", out, in);
  return w;
}

AttentionBlockWeights load_attention_block(const Checkpoint& ckpt, const std::string& prefix,
                                           int64_t c) {
  AttentionBlockWeights w;
  w.gamma = load_gamma(ckpt, prefix + ".norm.gamma", c);
  w.to_qkv_w =
      ckpt.require(prefix + ".to_qkv.weight", {3 * c, c, 1, 1}).to_f32().reshape({3 * c, c});
  w.to_qkv_b = ckpt.require(prefix + ".to_qkv.bias", {3 * c}).to_f32();
  w.proj_w = ckpt.require(prefix + ".proj.weight", {c, c, 1, 1}).to_f32().reshape({c, c});
  w.proj_b = ckpt.require(prefix + ".proj.bias", {c}).to_f32();
  return w;
}

void place(ops::Context& ctx, Conv& c, DType act) {
  if (!c.w.defined()) return;
  c.w = ctx.upload(c.w.to(act));
  c.b = ctx.upload(c.b);
}
void place(ops::Context& ctx, ResidualBlockWeights& w, DType act) {
  w.gamma1 = ctx.upload(w.gamma1);
  w.gamma2 = ctx.upload(w.gamma2);
  place(ctx, w.conv1, act);
  place(ctx, w.conv2, act);
  place(ctx, w.shortcut, act);
}
void place(ops::Context& ctx, AttentionBlockWeights& w, DType act) {
  for (Tensor* t : {&w.gamma, &w.to_qkv_b, &w.proj_b}) *t = ctx.upload(*t);
  for (Tensor* t : {&w.to_qkv_w, &w.proj_w}) *t = ctx.upload(t->to(act));
}

Tensor conv(ops::Context& ctx, const Conv& c, const Tensor& x) {
  ops::Conv3dGeometry g;
  g.pad_top = g.pad_bottom = c.w.size(2) / 2;
  g.pad_left = g.pad_right = c.w.size(3) / 2;
  return ops::conv3d(ctx, x, c.w, &c.b, g, c.w.dtype());
}

Tensor causal_conv(ops::Context& ctx, const Conv& c, const Tensor& x, FeatureCache& cache) {
  if (c.kt() == 1) return conv(ctx, c, x);
  return causal_conv(ctx, c, x, cache.slot());
}

Tensor causal_conv(ops::Context& ctx, const Conv& c, const Tensor& x, Tensor& slot) {
  AVDIT_CHECK(c.kt() == kCacheFrames + 1, "causal_conv: temporal kernel {}", c.kt());
  const Tensor input = slot.defined() ? ops::concat_rows(ctx, {slot, x}) : x;
  ops::Conv3dGeometry g;
  g.pad_front = kCacheFrames - (slot.defined() ? slot.size(0) : 0);
  g.pad_top = g.pad_bottom = c.w.size(2) / 2;
  g.pad_left = g.pad_right = c.w.size(3) / 2;
  Tensor y = ops::conv3d(ctx, input, c.w, &c.b, g, c.w.dtype());
  const int64_t n = input.size(0), keep = std::min(n, kCacheFrames);
  // A copy: the slot must not alias a tensor that a later op updates in place.
  slot = ops::clone(ctx, input.slice_rows(n - keep, n));
  return y;
}

Tensor rms_norm(ops::Context& ctx, const Tensor& x, const Tensor& gamma, DType out) {
  // x / max(|x|, 1e-12) * sqrt(C) = x / sqrt(|x|^2 / C): the row RMSNorm with an epsilon of the
  // clamp's size, so an all-zero voxel stays zero as in the reference.
  const float eps = 1e-24f / static_cast<float>(x.size(-1));
  return ops::rms_norm(ctx, rows_of(x), gamma, eps, false, out).reshape(x.shape());
}

Tensor residual_block(ops::Context& ctx, const ResidualBlockWeights& w, const Tensor& x,
                      FeatureCache& cache) {
  const Tensor h = w.shortcut.w.defined() ? conv(ctx, w.shortcut, x) : x;
  // The SiLU runs in float32 on the norm's float32 output; the convolution reads it rounded.
  const DType act = w.conv1.w.dtype();
  Tensor r = ops::silu(ctx, rms_norm(ctx, x, w.gamma1), act);
  r = causal_conv(ctx, w.conv1, r, cache);
  r = ops::silu(ctx, rms_norm(ctx, r, w.gamma2), act);
  r = causal_conv(ctx, w.conv2, r, cache);
  ops::add_(ctx, r, h);
  return r;
}

Tensor attention_block(ops::Context& ctx, const AttentionBlockWeights& w, const Tensor& x) {
  const int64_t T = x.size(0), hw = x.size(1) * x.size(2), C = x.size(3), S = T * hw;
  const DType act = w.to_qkv_w.dtype();
  const Tensor n = rows_of(rms_norm(ctx, x, w.gamma, act));
  const Tensor qkv = ops::linear(ctx, n, w.to_qkv_w, &w.to_qkv_b, act);
  const Tensor q = ops::take_columns(ctx, qkv, 0, C).reshape({S, 1, C});
  const Tensor k = ops::take_columns(ctx, qkv, C, 2 * C).reshape({S, 1, C});
  const Tensor v = ops::take_columns(ctx, qkv, 2 * C, 3 * C).reshape({S, 1, C});
  // Each frame is its own document: the reference folds time into the batch.
  std::vector<int64_t> cu(static_cast<size_t>(T + 1));
  for (int64_t t = 0; t <= T; ++t) cu[static_cast<size_t>(t)] = t * hw;
  const ops::Segments seg = ops::plan_segments(ctx, cu, 1, C, act);
  const float scale = 1.0f / std::sqrt(static_cast<float>(C));
  const Tensor o = ops::attention(ctx, q, k, v, scale, seg).reshape({S, C});
  Tensor y = ops::linear(ctx, o, w.proj_w, &w.proj_b, act);
  ops::add_(ctx, y, rows_of(x));
  return y.reshape(x.shape());
}

}  // namespace avdit::models::vae::wan22
