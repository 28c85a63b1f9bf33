// The H3 forward, step by step as the golden README (and the reference's MiniMaxH3DiTModel)
// defines it; each numbered comment matches a step of the README's "Forward pass".
#include "models/h3/model.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/layers.h"
#include "models/h3/rope.h"
#include "models/h3/time_embedding.h"
#include "ops/ops.h"

namespace avdit::models::h3 {
namespace {

H3Config config_of(const Checkpoint& ckpt) {
  const nlohmann::json* j = ckpt.config();
  AVDIT_REQUIRE(j != nullptr,
                "H3 checkpoint {}: no config.json next to the weights (the official "
                "transformer/config.json is needed)",
                ckpt.dir().string());
  return resolve_variant(H3Config::from_json(*j), ckpt);
}

// dst[rows[i]] = src[i] for src [n, H].
void scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src) {
  const int64_t H = dst.size(1);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(src.f32() + static_cast<int64_t>(i) * H, H, dst.f32() + rows[i] * H);
}

// [n, W] = src[rows[i]] * mask[i].
Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& rows,
                   const std::vector<uint8_t>& mask) {
  const int64_t W = src.size(1), n = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::zeros({n, W}, DType::F32);
  for (int64_t i = 0; i < n; ++i)
    if (mask[i]) std::copy_n(src.f32() + rows[i] * W, W, out.f32() + i * W);
  return out;
}

// The fixture's view of one adaLN slice: [3M, H], row m * 3 + modality.
Tensor slice_copy(const ModRows& s, int64_t n, int64_t H) {
  Tensor out = Tensor::empty({n, H}, DType::F32);
  for (int64_t i = 0; i < n; ++i) std::copy_n(s.row(i), H, out.f32() + i * H);
  return out;
}

}  // namespace

H3Model::H3Model(const Checkpoint& ckpt) : H3Model(ckpt, config_of(ckpt)) {}

H3Model::H3Model(const Checkpoint& ckpt, const H3Config& config)
    : config_(resolve_variant(config, ckpt)), weights_(load_weights(ckpt, config_)) {}

Tensor H3Model::refine_text(const Tensor& text_embeds_any, TensorMap* dump) const {
  const H3Config& c = config_;
  const H3Weights& w = weights_;
  Tensor text_embeds = rnd_(text_embeds_any.to(DType::F32));
  if (text_embeds.ndim() == 3 && text_embeds.size(0) == 1)
    text_embeds = text_embeds.reshape({text_embeds.size(1), text_embeds.size(2)});
  AVDIT_REQUIRE(text_embeds.ndim() == 2 && text_embeds.size(1) == c.text_dim &&
                    text_embeds.size(0) > 0,
                "H3: text_embeds must be [text_len, {}] (text_dim), found {}", c.text_dim,
                text_embeds.shape_str());
  const int64_t L = text_embeds.size(0);
  const Dump out{dump, ""};
  // 1. condition_proj, then refiner blocks: no RoPE, no adaLN, no gates, one text document.
  Tensor x = rnd_(ops::linear(text_embeds, w.condition_proj_weight, &w.condition_proj_bias));
  out.put("text_projected", x);
  const std::vector<int64_t> documents = {0, L};
  const float eps = static_cast<float>(c.norm_eps);
  for (size_t r = 0; r < w.refiner_blocks.size(); ++r) {
    const BlockWeights& b = w.refiner_blocks[r];
    ops::add_(x, attention(b, c, rnd_(ops::rms_norm(x, b.norm1, eps)), nullptr, documents,
                           Dump{}, rnd_));
    x = rnd_(x);
    ops::add_(x, mlp(b, rnd_(ops::rms_norm(x, b.norm2, eps)), rnd_));
    x = rnd_(x);
    out.put(fmt::format("refiner_block{}", r), x);
  }
  Tensor refined = rnd_(ops::rms_norm(x, w.refiner_final_norm, eps));
  out.put("text_refined", refined);
  return refined;
}

PackedOutput H3Model::forward(const PackedLayout& layout, const PackedTimesteps& timesteps,
                              const Tensor& text_refined_any, const Tensor& video_rows_any,
                              const Tensor& audio_rows_any, TensorMap* dump) const {
  const H3Config& c = config_;
  const H3Weights& w = weights_;
  const int64_t S = layout.seq_len, H = c.hidden_size;
  const Tensor text_refined = text_refined_any.to_f32();
  const Tensor video_rows = video_rows_any.to_f32();
  const Tensor audio_rows = audio_rows_any.to_f32();
  AVDIT_REQUIRE(text_refined.ndim() == 2 && text_refined.size(0) == layout.text_len &&
                    text_refined.size(1) == H,
                "H3 forward: text_refined must be [{}, {}], found {}", layout.text_len, H,
                text_refined.shape_str());
  AVDIT_REQUIRE(video_rows.ndim() == 2 &&
                    video_rows.size(0) == static_cast<int64_t>(layout.img_pos.size()) &&
                    video_rows.size(1) == c.video_patch_dim(),
                "H3 forward: video rows must be [{}, {}], found {}", layout.img_pos.size(),
                c.video_patch_dim(), video_rows.shape_str());
  AVDIT_REQUIRE(audio_rows.ndim() == 2 &&
                    audio_rows.size(0) == static_cast<int64_t>(layout.audio_pos.size()) &&
                    audio_rows.size(1) == c.audio_latents_dim,
                "H3 forward: audio rows must be [{}, {}], found {}", layout.audio_pos.size(),
                c.audio_latents_dim, audio_rows.shape_str());
  AVDIT_CHECK(static_cast<int64_t>(timesteps.inverse.size()) == S,
              "H3 forward: {} timestep rows for {} packed rows", timesteps.inverse.size(), S);
  const Dump out{dump, ""};

  // 2. Packed input: text, fp32 patch projections of video and audio rows; pad rows stay zero.
  Tensor x = Tensor::zeros({S, H}, DType::F32);
  scatter_rows(x, layout.text_pos, text_refined);
  // fp32 islands; their outputs are cast to the activation dtype when written into the sequence.
  scatter_rows(x, layout.img_pos,
               rnd_(ops::linear(video_rows, w.video_patch_proj_weight, &w.video_patch_proj_bias)));
  scatter_rows(x, layout.audio_pos,
               rnd_(ops::linear(audio_rows, w.audio_patch_proj_weight, &w.audio_patch_proj_bias)));
  out.put("hidden_embed", x);

  // 3. Time: one embedding per distinct timestep, shared by every adaLN projection.
  const TimeEmbedding time = embed_timesteps(w, c, timesteps.unique);
  if (time.t_emb.defined()) out.put("t_emb", time.t_emb);
  out.put("adaln_input", time.adaln_input);
  const auto M = static_cast<int64_t>(timesteps.unique.size());
  // silu(t_emb) is cast to the activation dtype before the adaLN linears.
  const Tensor adaln_input = rnd_.bf16 ? rnd_(time.adaln_input.clone()) : time.adaln_input;

  // 4. RoPE tables from the float32-cast positions and the stored inv_freq.
  const RopeTables rope = rope_tables(layout.positions, w.rope_inv_freq);
  out.put("rope_cos_sin_cache", rope_cos_sin_cache(rope));

  const std::vector<int64_t> mod_rows = adaln_rows(layout, timesteps);

  // 5. Blocks.
  const float eps = static_cast<float>(c.norm_eps);
  static constexpr const char* kSliceNames[kAdalnSlices] = {
      "shift_msa", "scale_msa", "gate_msa", "shift_mlp", "scale_mlp", "gate_mlp"};
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    const BlockWeights& b = w.blocks[i];
    const Dump block_dump{i == 0 ? dump : nullptr, "block0_"};
    // mod: [M, 18H] viewed as [3M, 6H]; slice s of row j starts at j * 6H + s * H.
    const Tensor mod = rnd_(ops::linear(adaln_input, b.adaln_weight, &b.adaln_bias));
    ModRows slice[kAdalnSlices];
    for (int64_t s = 0; s < kAdalnSlices; ++s) slice[s] = {mod.f32() + s * H, kAdalnSlices * H};
    if (block_dump) {
      block_dump.put("adaln_linear_out", mod);
      for (int64_t s = 0; s < kAdalnSlices; ++s)
        block_dump.put(kSliceNames[s], slice_copy(slice[s], kModalities * M, H));
    }

    Tensor h = rnd_(ops::rms_norm(x, b.norm1, eps));
    block_dump.put("norm1", h);
    modulate_(h, slice[0], slice[1], mod_rows, rnd_);
    block_dump.put("attn_in", h);
    const Tensor attn = attention(b, c, h, &rope, layout.cu_seqlens, block_dump, rnd_);
    gated_residual_(x, slice[2], attn, mod_rows, rnd_);

    h = rnd_(ops::rms_norm(x, b.norm2, eps));
    modulate_(h, slice[3], slice[4], mod_rows, rnd_);
    block_dump.put("mlp_in", h);
    const Tensor f = mlp(b, h, rnd_);
    block_dump.put("mlp_out", f);
    gated_residual_(x, slice[5], f, mod_rows, rnd_);
    out.put(fmt::format("hidden_block{}", i), x);
  }

  // 6. Final layer: no modality split, no gate; heads in fp32 on every row.
  const Tensor fmod = rnd_(ops::linear(adaln_input, w.final_adaln_weight, &w.final_adaln_bias));
  const ModRows shift{fmod.f32(), 2 * H}, scale{fmod.f32() + H, 2 * H};
  if (dump) {
    out.put("final_shift", slice_copy(shift, M, H));
    out.put("final_scale", slice_copy(scale, M, H));
  }
  Tensor h = rnd_(ops::rms_norm(x, w.final_norm, static_cast<float>(c.final_norm_eps)));
  modulate_(h, shift, scale, timesteps.inverse, rnd_);  // then cast to fp32 for the heads
  const Tensor video_all = ops::linear(h, w.video_out_weight, &w.video_out_bias);
  const Tensor audio_all = ops::linear(h, w.audio_out_weight, &w.audio_out_bias);
  out.put("final_video_all", video_all);
  out.put("final_audio_all", audio_all);

  // 7. Row selection and update masks (keyframe rows are not predicted).
  return {gather_rows(video_all, layout.img_pos, layout.update_mask),
          gather_rows(audio_all, layout.audio_pos, layout.update_audio_mask)};
}

}  // namespace avdit::models::h3
