// The MAGI-2 preview forward (see model.h). The residual state lives in modality-sorted order throughout the
// block (as in the reference); dumps are mapped back to packed order.
#include "models/magi2/model.h"

#include <cstring>

#include "core/error.h"
#include "models/magi2/layers.h"
#include "models/magi2/mhc.h"
#include "ops/ops.h"

namespace avdit::models::magi2 {
namespace {

struct Recorder {
  TensorMap* out = nullptr;
  const TokenLayout* layout = nullptr;
  // Per-token tensor in permuted order -> packed order.
  void token(const std::string& name, const Tensor& permuted) const {
    if (out) (*out)[name] = gather_rows(permuted, layout->inv);
  }
  void token_i64(const std::string& name, const Tensor& permuted) const {
    if (!out) return;
    const int64_t L = permuted.size(0), row = permuted.numel() / std::max<int64_t>(L, 1);
    Tensor t = Tensor::empty(permuted.shape(), DType::I64);
    for (int64_t l = 0; l < L; ++l)
      std::memcpy(t.data<int64_t>() + l * row, permuted.data<int64_t>() + layout->inv[l] * row, sizeof(int64_t) * row);
    (*out)[name] = t;
  }
  void packed(const std::string& name, const Tensor& t) const {
    if (out) (*out)[name] = t;
  }
};

// PreAdapter: embedder of each modality on its first C_m channels, in permuted order: [L, n*hidden].
Tensor embed(const Magi2Weights& w, const PackedSequence& p, const TokenLayout& layout) {
  const Magi2Config& c = w.config;
  const Tensor* ws[3] = {&w.video_embedder_w, &w.audio_embedder_w, &w.text_embedder_w};
  const Tensor* bs[3] = {&w.video_embedder_b, &w.audio_embedder_b, &w.text_embedder_b};
  const int64_t cin[3] = {c.video_in_channels, c.audio_in_channels, c.text_in_channels};
  const Tensor x_perm = gather_rows(p.x, layout.perm);
  std::vector<Tensor> parts;
  for (int m = 0; m < 3; ++m) {
    if (layout.size[m] == 0) continue;
    const Tensor rows = x_perm.slice_rows(layout.begin[m], layout.begin[m] + layout.size[m]);
    parts.push_back(ops::linear(take_columns(rows, 0, cin[m]), *ws[m], bs[m]));
  }
  AVDIT_REQUIRE(!parts.empty(), "magi2 forward: the packed sequence is empty");
  return parts.size() == 1 ? parts[0] : ops::concat_rows(parts);
}

// PostAdapter: RMSNorm over all n*hidden channels + final linear for video and audio rows; text rows stay 0.
Tensor post_adapter(const Magi2Weights& w, const Tensor& s, const TokenLayout& layout) {
  const Magi2Config& c = w.config;
  const int64_t L = s.size(0), width = c.out_channels;
  Tensor out = Tensor::zeros({L, width}, DType::F32);
  struct Head {
    int m;
    const Tensor* norm;
    const Tensor* linear;
    int64_t channels;
  } heads[2] = {{kVideo, &w.final_norm_video, &w.final_linear_video, c.video_in_channels},
                {kAudio, &w.final_norm_audio, &w.final_linear_audio, c.audio_in_channels}};
  for (const Head& h : heads) {
    if (layout.size[h.m] == 0) continue;
    const Tensor rows = s.slice_rows(layout.begin[h.m], layout.begin[h.m] + layout.size[h.m]);
    const Tensor y = ops::linear(ops::rms_norm(rows, *h.norm, kNormEps, true), *h.linear);  // [n, C]
    for (int64_t r = 0; r < y.size(0); ++r)
      std::memcpy(out.f32() + (layout.begin[h.m] + r) * width, y.f32() + r * h.channels, sizeof(float) * h.channels);
  }
  return out;
}

// The mHC coefficients cast to the stream dtype (the reference's out_dtype=s.dtype); identity in fp32.
MhcCoefficients rounded(MhcCoefficients c, const Rounding& rnd) {
  c.h_pre = rnd(std::move(c.h_pre));
  c.h_post = rnd(std::move(c.h_post));
  c.h_res = rnd(std::move(c.h_res));
  return c;
}

}  // namespace

TensorMap forward_packed(const Magi2Weights& w, const PackedSequence& p, const ForwardOptions& options) {
  const Magi2Config& c = w.config;
  const int64_t L = p.tokens(), n = c.mhc_num_stream, hidden = c.hidden_size, R = c.residual_width;
  AVDIT_REQUIRE(p.x.ndim() == 2 && p.x.size(1) >= c.max_in_channels,
                "magi2 forward: packed x has shape {}, expected [L, >= {}]", p.x.shape_str(), c.max_in_channels);
  AVDIT_REQUIRE(static_cast<int64_t>(p.modality.size()) == L, "magi2 forward: {} modality ids for {} tokens",
                p.modality.size(), L);
  const int64_t tc = c.data_proxy.time_channel_dim;
  AVDIT_REQUIRE(tc == 0 || (p.time_tokens.defined() && p.time_tokens.size(0) == L && p.time_tokens.size(1) == tc),
                "magi2 forward: time_token_sequence must be [{}, {}], found {}", L, tc,
                p.time_tokens.defined() ? p.time_tokens.shape_str() : std::string("none"));
  const TokenLayout layout = TokenLayout::from_modality(p.modality);
  TensorMap result;
  Recorder rec{options.dump ? &result : nullptr, &layout};

  // Embedding, then the time embedding OVERWRITES channels [0, tc) of every token (text included).
  Tensor s = embed(w, p, layout);
  rec.token("embed_pre_time", s);
  if (tc > 0) {
    const Tensor tt = p.time_tokens.to_f32();
    for (int64_t r = 0; r < L; ++r)
      std::memcpy(s.f32() + r * R, tt.f32() + layout.perm[r] * tc, sizeof(float) * tc);
  }
  rec.token("embed", s);
  // TransformerBlock casts the (fp32) embedded sequence to bf16: the residual stream is bf16 from here on.
  const Rounding rnd{options.bf16_activations};
  s = rnd(std::move(s));

  const Tensor rope = rope_table(p.coords, w.rope_bands);  // [L, 6B] packed
  rec.packed("rope", rope);
  const int64_t half = c.rope_dim / 2;
  RopeTables tables{take_columns(rope, 0, half), take_columns(rope, half, 2 * half)};

  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LayerWeights& lw = w.layers[i];
    const std::string p_ = fmt::format("layers.{}.", i);
    // Attention branch.
    // bf16 mode: h_pre/h_post/h_res are cast to the stream dtype; the mHC kernels accumulate in fp32 and store in
    // the stream dtype (attn_in, mlp_in and the new streams are bf16).
    const MhcCoefficients ca =
        rounded(mhc_coefficients(s, lw.mhc_norm, lw.groups, layout, lw.mhc_attn, n, hidden), rnd);
    const Tensor attn_in = rnd(mhc_apply_pre(s, ca.h_pre, n));
    const Tensor attn_out =
        attention_forward(lw.attention, c, lw.groups, attn_in, layout, tables, p.cu_seqlens, rnd);
    const Tensor s1 = rnd(mhc_hyper_connect(s, attn_out, ca.h_post, ca.h_res, n));
    // MLP branch (same mhc_norm weight).
    const MhcCoefficients cm =
        rounded(mhc_coefficients(s1, lw.mhc_norm, lw.groups, layout, lw.mhc_mlp, n, hidden), rnd);
    const Tensor mlp_in = rnd(mhc_apply_pre(s1, cm.h_pre, n));
    Tensor mlp_out;
    if (lw.moe) {
      MoeOutputs mo = moe_forward(lw.moe_mlp, c, mlp_in, layout, rnd);
      mlp_out = mo.mlp_out;
      rec.token(p_ + "moe.split_out", mo.split_out);
      rec.token(p_ + "moe.experts_out", mo.experts_out);
      rec.token(p_ + "moe.merge_out", mo.merge_out);
      rec.token(p_ + "moe.shared_out", mo.shared_out);
      rec.token(p_ + "router.logits", mo.router_logits);
      rec.token(p_ + "router.topk_weights", mo.topk_weights);
      rec.token_i64(p_ + "router.topk_indices", mo.topk_indices);
    } else {
      mlp_out = dense_mlp_forward(lw.dense, lw.groups, mlp_in, layout, rnd);
    }
    s = rnd(mhc_hyper_connect(s1, mlp_out, cm.h_post, cm.h_res, n));
    rec.token(p_ + "mhc.attn.h_pre", ca.h_pre);
    rec.token(p_ + "mhc.attn.h_post", ca.h_post);
    rec.token(p_ + "mhc.attn.h_res", ca.h_res);
    rec.token(p_ + "attn_in", attn_in);
    rec.token(p_ + "attn_out", attn_out);
    rec.token(p_ + "mhc.mlp.h_pre", cm.h_pre);
    rec.token(p_ + "mhc.mlp.h_post", cm.h_post);
    rec.token(p_ + "mhc.mlp.h_res", cm.h_res);
    rec.token(p_ + "mlp_in", mlp_in);
    rec.token(p_ + "mlp_out", mlp_out);
    rec.token(p_ + "output", s);
  }
  // PostAdapter casts the stream to its fp32 norm weight's dtype: fp32 from here on in both modes.
  result["model_output"] = gather_rows(post_adapter(w, s, layout), layout.inv);
  if (options.dump) {
    Tensor sizes = Tensor::empty({3}, DType::I32);
    for (int m = 0; m < 3; ++m) sizes.data<int32_t>()[m] = static_cast<int32_t>(layout.size[m]);
    result["modality_group_sizes"] = sizes;
  }
  return result;
}

}  // namespace avdit::models::magi2
