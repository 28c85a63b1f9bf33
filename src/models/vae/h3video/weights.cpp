// Checkpoint -> H3VideoWeights: one table of (name, shape), checked in full before anything is
// placed on the context; LayerScale folded into the linear before it (weights.h).
#include "models/vae/h3video/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "ops/context.h"

namespace avdit::models::vae::h3video {
namespace {

using Bind = std::function<void(Tensor&, const std::string&, const Shape&)>;

// The one place that maps the release's names to members, with their shapes in the file.
void visit(const H3VideoConfig& c, H3VideoWeights& w, std::vector<Tensor>& scales,
           const Bind& bind) {
  const int64_t Z = c.z_channels, D = c.dim();
  bind(w.post_quant_conv, "post_quant_conv.weight", {Z, Z, 1, 1, 1});
  bind(w.post_quant_conv_bias, "post_quant_conv.bias", {Z});
  bind(w.x_embedder, "decoder.x_embedder.weight", {D, Z});
  bind(w.x_embedder_bias, "decoder.x_embedder.bias", {D});
  if (c.num_register_tokens > 0)
    bind(w.register_tokens, "decoder.register_tokens", {1, c.num_register_tokens, D});
  w.blocks.resize(static_cast<size_t>(c.num_layers));
  scales.resize(static_cast<size_t>(2 * c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    BlockWeights& b = w.blocks[static_cast<size_t>(i)];
    const std::string p = fmt::format("decoder.transformer_blocks.{}.", i);
    bind(b.norm1, p + "norm1.weight", {D});
    bind(b.to_qkv, p + "attn.to_qkv.weight", {3 * D, D});
    bind(b.to_qkv_bias, p + "attn.to_qkv.bias", {3 * D});
    bind(b.to_out, p + "attn.to_out.weight", {D, D});
    bind(b.to_out_bias, p + "attn.to_out.bias", {D});
    bind(scales[2 * i], p + "scale1", {D});
    bind(b.norm2, p + "norm2.weight", {D});
    bind(b.w1, p + "ff.w1.weight", {8 * D, D});
    bind(b.w1_bias, p + "ff.w1.bias", {8 * D});
    bind(b.w2, p + "ff.w2.weight", {D, 4 * D});
    bind(b.w2_bias, p + "ff.w2.bias", {D});
    bind(scales[2 * i + 1], p + "scale2", {D});
  }
  bind(w.norm_out, "decoder.norm_out.weight", {D});
  bind(w.norm_out_bias, "decoder.norm_out.bias", {D});
  bind(w.proj_out, "decoder.proj_out.weight", {c.patch_features(), D});
  bind(w.proj_out_bias, "decoder.proj_out.bias", {c.patch_features()});
}

void check(const Checkpoint& ckpt, const std::string& name, const Shape& shape) {
  AVDIT_REQUIRE(ckpt.contains(name),
                "H3 video VAE checkpoint {}: missing tensor '{}' (expected [{}])",
                ckpt.source().string(), name, fmt::join(shape, ", "));
  const TensorInfo& info = ckpt.info(name);
  AVDIT_REQUIRE(info.shape == shape,
                "H3 video VAE checkpoint {}: tensor '{}' has shape [{}], expected [{}]",
                ckpt.source().string(), name, fmt::join(info.shape, ", "), fmt::join(shape, ", "));
  AVDIT_REQUIRE(info.dtype == DType::F32 || info.dtype == DType::BF16 || info.dtype == DType::F16,
                "H3 video VAE checkpoint {}: tensor '{}' has dtype {}, expected F32, BF16 or F16",
                ckpt.source().string(), name, dtype_name(info.dtype));
}

// rows(W) * s and b * s in float32: (x W^T + b) * s == x (s W)^T + s b up to one rounding.
void fold_scale(Tensor& w, Tensor& b, const Tensor& s) {
  w = w.to(DType::F32).clone();
  b = b.to(DType::F32).clone();
  const Tensor sf = s.to_f32();
  const int64_t rows = w.size(0), cols = w.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    const float g = sf.f32()[r];
    for (int64_t k = 0; k < cols; ++k) w.f32()[r * cols + k] *= g;
    b.f32()[r] *= g;
  }
}

// diag(std) [Z, Z] and mean [Z]: the de-normalisation as a linear over channels, so it runs on
// whatever context the decoder does (exact: each output sums one product and zeros).
void denorm_tables(const H3VideoConfig& c, H3VideoWeights& w) {
  const int64_t Z = c.z_channels;
  std::vector<float> diag(static_cast<size_t>(Z * Z), 0.f);
  for (int64_t i = 0; i < Z; ++i) diag[static_cast<size_t>(i * Z + i)] = c.latents_std[i];
  w.denorm = Tensor::from_floats(std::move(diag), {Z, Z});
  w.denorm_bias = Tensor::from_floats(c.latents_mean, {Z});
}

}  // namespace

bool is_needed(std::string_view name) {
  return name.starts_with("post_quant_conv.") ||
         (name.starts_with("decoder.") && name != "decoder.mask_token");
}

H3VideoWeights load_weights(ops::Context& ctx, const Checkpoint& ckpt, const H3VideoConfig& c,
                            DType act, int64_t* bytes) {
  H3VideoWeights w;
  std::vector<Tensor> scales;
  visit(c, w, scales,
        [&](Tensor&, const std::string& name, const Shape& shape) { check(ckpt, name, shape); });
  visit(c, w, scales,
        [&](Tensor& t, const std::string& name, const Shape&) { t = ckpt.get(name); });
  const int64_t Z = c.z_channels;
  w.post_quant_conv = w.post_quant_conv.reshape({Z, Z});
  if (w.register_tokens.defined())
    w.register_tokens = w.register_tokens.reshape({c.num_register_tokens, c.dim()});
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    fold_scale(w.blocks[i].to_out, w.blocks[i].to_out_bias, scales[2 * i]);
    fold_scale(w.blocks[i].w2, w.blocks[i].w2_bias, scales[2 * i + 1]);
  }
  denorm_tables(c, w);
  // The blocks' linears in act (the reference's autocast region), the rest in float32.
  int64_t total = 0;
  auto place = [&](Tensor& t, DType dtype = DType::F32) {
    if (!t.defined()) return;
    t = ctx.upload(t.to(dtype));
    total += t.nbytes();
  };
  for (Tensor* t : {&w.denorm, &w.denorm_bias, &w.post_quant_conv, &w.post_quant_conv_bias,
                    &w.x_embedder, &w.x_embedder_bias, &w.register_tokens, &w.norm_out,
                    &w.norm_out_bias, &w.proj_out, &w.proj_out_bias})
    place(*t);
  for (BlockWeights& b : w.blocks) {
    for (Tensor* t : {&b.norm1, &b.norm2, &b.to_qkv_bias, &b.to_out_bias, &b.w1_bias, &b.w2_bias})
      place(*t);
    for (Tensor* t : {&b.to_qkv, &b.to_out, &b.w1, &b.w2}) place(*t, act);
  }
  if (bytes) *bytes = total;
  return w;
}

}  // namespace avdit::models::vae::h3video
