// One tile through the decoder proper: post_quant_conv, then ViT3DDecoder.forward step by step as
// the reference computes it (x_embedder, register + zero cls tokens, pre-norm blocks with
// LayerScale, LayerNorm, proj_out, patch-to-pixel).
#include <cmath>

#include "core/error.h"
#include "models/vae/h3video/decoder.h"
#include "models/vae/h3video/tables.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/context.h"
#include "ops/layer_norm.h"
#include "ops/modulation.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::models::vae::h3video {
namespace {

// One TransformerBlock on the residual x [N, D] (F32, updated in place). act: the dtype of the
// block's linear outputs (the reference's autocast region; F32 for parity); the norms read the
// float32 residual as the reference's MINIMAX_H3_VAE_DECODER_VIT_FP32_NORM does.
void block(ops::Context& ctx, const H3VideoConfig& c, DType act, const BlockWeights& w,
           const Tensor& ones, const Tensor& cos, const Tensor& sin, const ops::Segments& all,
           Tensor& x) {
  const int64_t N = x.size(0), H = c.heads, dh = c.dim_head;
  const float eps = static_cast<float>(c.eps);
  {
    const Tensor n1 = ops::rms_norm(ctx, x, w.norm1, eps, false, act);
    // to_qkv viewed [N, heads, 3, dh]: each head's columns are [q_h | k_h | v_h]. Per-head
    // RMSNorm without weight (ones: the op's weight), then RoPE on the first rope_dim dims in
    // float32, rounded once to act as the reference's bf16 q times its float32 tables and SDPA's
    // autocast round it.
    const Tensor qkv = ops::linear(ctx, n1, w.to_qkv, &w.to_qkv_bias, act).reshape({N, H, 3, dh});
    Tensor q = ctx.empty({N, H, dh}, act), k = ctx.empty({N, H, dh}, act),
           v = ctx.empty({N, H, dh}, act);
    ops::qk_norm_rope_per_head(ctx, qkv, ones, ones, eps, &cos, &sin, q, k, v);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    const Tensor core = ops::attention(ctx, q, k, v, scale, all).reshape({N, H * dh});
    // x += to_out(core) * scale1 (scale1 folded into to_out), the residual added in the GEMM.
    ops::linear_into(ctx, core, w.to_out, &w.to_out_bias, x, &x);
  }
  {
    const Tensor n2 = ops::rms_norm(ctx, x, w.norm2, eps, false, act);
    const Tensor h = ops::linear(ctx, n2, w.w1, &w.w1_bias, act);
    const Tensor g = ops::gated(ctx, ops::Gated::Swiglu, h);  // silu(gate) * up, gate first
    ops::linear_into(ctx, g, w.w2, &w.w2_bias, x, &x);        // x += w2(g) * scale2
  }
}

}  // namespace

const H3VideoDecoder::TileTables& H3VideoDecoder::tables_for(int64_t t, int64_t h,
                                                             int64_t w) const {
  const std::array<int64_t, 3> key{t, h, w};
  auto it = tables_.find(key);
  if (it != tables_.end()) return it->second;
  const RopeTable rope = rope_table(config_, t, h, w, config_.num_register_tokens + 1);
  TileTables tt{ctx_.upload(rope.cos), ctx_.upload(rope.sin),
                ctx_.upload(unpatchify_index(config_, t, h, w))};
  return tables_.emplace(key, std::move(tt)).first->second;
}

Tensor H3VideoDecoder::decode_tile(const Tensor& rows, int64_t t, int64_t h, int64_t w,
                                   int64_t part) const {
  ops::Context& ctx = ctx_;
  const H3VideoConfig& c = config_;
  const int64_t cells = t * h * w, R = c.num_register_tokens, N = cells + R + 1, D = c.dim();
  AVDIT_CHECK(rows.ndim() == 2 && rows.size(0) == cells && rows.size(1) == c.z_channels,
              "H3 video VAE: tile rows {} for {}x{}x{} cells", rows.shape_str(), t, h, w);
  const TileTables& tab = tables_for(t, h, w);
  // post_quant_conv: a 1x1x1 Conv3d is a linear over the channels of each cell.
  const Tensor pq = ops::linear(ctx, rows, w_.post_quant_conv, &w_.post_quant_conv_bias);
  ops::observe(ctx, {"vit.post_quant_conv.out", -1, part}, pq);
  // Tokens: the embedded cells, the register tokens, one zero cls token.
  Tensor x = ctx.empty({N, D}, DType::F32);
  Tensor cells_rows = x.slice_rows(0, cells);
  ops::linear_into(ctx, pq, w_.x_embedder, &w_.x_embedder_bias, cells_rows);
  ops::observe(ctx, {"vit.x_embedder.out", -1, part}, cells_rows);
  if (R > 0) {
    Tensor reg = x.slice_rows(cells, cells + R);
    ops::copy_(ctx, reg, w_.register_tokens);
  }
  Tensor cls = x.slice_rows(cells + R, N);
  ops::zero_(ctx, cls);
  // One document, no mask (causal_decoder false).
  const ops::Segments all = ops::plan_segments(ctx, {0, N}, c.heads, c.dim_head, act_);
  for (size_t i = 0; i < w_.blocks.size(); ++i) {
    block(ctx, c, act_, w_.blocks[i], head_ones_, tab.cos, tab.sin, all, x);
    ops::observe(ctx, {"vit.block{}.out", static_cast<int64_t>(i), part}, x);
  }
  const Tensor y =
      ops::layer_norm(ctx, x, &w_.norm_out, &w_.norm_out_bias, static_cast<float>(c.eps));
  ops::observe(ctx, {"vit.norm_out.out", -1, part}, y);
  // proj_out on the cell tokens only, then [t h w, C pt p p] -> [C, pt t, p h, p w].
  const Tensor patches = ops::linear(ctx, y.slice_rows(0, cells), w_.proj_out, &w_.proj_out_bias);
  Tensor out = ctx.empty(tab.unpatchify.shape(), DType::F32);
  ops::gather_elements(ctx, patches, tab.unpatchify, out);
  ops::observe(ctx, {"vit.decoded", -1, part}, out);
  return out;
}

}  // namespace avdit::models::vae::h3video
