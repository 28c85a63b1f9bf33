// The official MiniMax-H3 checkpoint layout as data. Verified by tests/unit/h3_specs_test.cpp:
// for the official config it reproduces the 535 names and total_size of the official index.
#include "models/h3/tensor_specs.h"

#include <fmt/format.h>

namespace avdit::models::h3 {
namespace {

// Attention + MLP + norms: shared by token-refiner blocks and DiT blocks.
void add_block_core(std::vector<TensorSpec>& s, const std::string& p, const H3Config& c) {
  const int64_t H = c.hidden_size, I = c.inner_dim(), F = c.ffn_hidden_size;
  const int64_t dh = c.attention_head_dim;
  s.push_back({p + "attn.k_norm.weight", {dh}, DType::BF16});
  s.push_back({p + "attn.out_proj.weight", {H, I}, DType::BF16});
  s.push_back({p + "attn.q_norm.weight", {dh}, DType::BF16});
  // [3 I, H], grouped per head: rows [3 dh h, 3 dh (h+1)) = (q, k, v) of head h.
  s.push_back({p + "attn.qkv_proj.weight", {3 * I, H}, DType::BF16});
  // [2 F, H]: rows [0, F) gate, [F, 2F) up.
  s.push_back({p + "mlp.fc1.weight", {2 * F, H}, DType::BF16});
  s.push_back({p + "mlp.fc2.weight", {H, F}, DType::BF16});
  s.push_back({p + "norm1.weight", {H}, DType::BF16});
  s.push_back({p + "norm2.weight", {H}, DType::BF16});
}

}  // namespace

std::vector<TensorSpec> h3_tensor_specs(const H3Config& c, bool curve_variant) {
  curve_variant = curve_variant || c.curve_variant();
  const int64_t H = c.hidden_size, Dt = c.time_embed_dim;
  // The reference keeps the curve variant's small adaLN projections in fp32.
  const DType adaln_dtype = curve_variant ? DType::F32 : DType::BF16;
  std::vector<TensorSpec> s;
  s.push_back({"video_patch_proj.weight", {H, c.video_patch_dim()}, DType::F32});
  s.push_back({"video_patch_proj.bias", {H}, DType::F32});
  s.push_back({"audio_patch_proj.weight", {H, c.audio_latents_dim}, DType::F32});
  s.push_back({"audio_patch_proj.bias", {H}, DType::F32});
  s.push_back({"condition_proj.weight", {H, c.text_dim}, DType::BF16});
  s.push_back({"condition_proj.bias", {H}, DType::BF16});
  if (curve_variant) {
    const int64_t grid = c.adaln_curve_grid > 0 ? c.adaln_curve_grid : 1025;
    s.push_back({"adaln_t_table", {grid, Dt}, DType::F32});
  } else {
    s.push_back({"time_embedder.proj_in.weight", {c.time_embed_hidden_size, c.timestep_input_dim},
                 DType::F32});
    s.push_back({"time_embedder.proj_in.bias", {c.time_embed_hidden_size}, DType::F32});
    s.push_back({"time_embedder.proj_out.weight", {Dt, c.time_embed_hidden_size}, DType::F32});
    s.push_back({"time_embedder.proj_out.bias", {Dt}, DType::F32});
  }
  s.push_back({"rope.inv_freq", {c.rope_inv_freq_len}, DType::F32});
  for (int64_t r = 0; r < c.token_refiner_num_layers; ++r)
    add_block_core(s, fmt::format("token_refiner.blocks.{}.", r), c);
  s.push_back({"token_refiner.final_norm.weight", {H}, DType::BF16});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("blocks.{}.", i);
    // [18 H, Dt]: feature = modality * 6H + slice * H + channel.
    s.push_back({p + "adaln_proj.linear.weight", {c.adaln_out_features, Dt}, adaln_dtype});
    s.push_back({p + "adaln_proj.linear.bias", {c.adaln_out_features}, adaln_dtype});
    add_block_core(s, p, c);
  }
  s.push_back({"final_layer.norm.weight", {H}, DType::BF16});
  // [2 H, Dt]: rows [0, H) shift, [H, 2H) scale.
  s.push_back({"final_layer.adaln_proj.linear.weight", {c.final_adaln_out_features, Dt},
               adaln_dtype});
  s.push_back({"final_layer.adaln_proj.linear.bias", {c.final_adaln_out_features}, adaln_dtype});
  s.push_back({"final_layer.video_out.weight", {c.video_patch_dim(), H}, DType::F32});
  s.push_back({"final_layer.video_out.bias", {c.video_patch_dim()}, DType::F32});
  s.push_back({"final_layer.audio_out.weight", {c.audio_latents_dim, H}, DType::F32});
  s.push_back({"final_layer.audio_out.bias", {c.audio_latents_dim}, DType::F32});
  return s;
}

H3ParamCounts h3_param_counts(const H3Config& c, bool curve_variant) {
  H3ParamCounts n;
  for (const TensorSpec& t : h3_tensor_specs(c, curve_variant)) {
    const int64_t k = numel(t);
    n.total += k;
    n.bytes += dtype_nbytes(t.dtype, k);
    if (t.name.find("adaln_proj.") != std::string::npos) n.adaln_proj += k;
  }
  return n;
}

std::vector<std::pair<std::string, std::string>> h3_config_report(const H3Config& c) {
  const H3ParamCounts n = h3_param_counts(c);
  auto billions = [](int64_t v) { return fmt::format("{:.2f}B ({})", v / 1e9, v); };
  std::vector<std::pair<std::string, std::string>> r;
  r.emplace_back("family", "MiniMax-H3 (packed audio-video DiT)");
  r.emplace_back("variant", c.curve_variant()
                                ? fmt::format("adaLN curve table [{}, {}]", c.adaln_curve_grid,
                                              c.time_embed_dim)
                                : std::string("full time embedder"));
  r.emplace_back("blocks", fmt::format("{} + {} token-refiner blocks", c.num_layers,
                                       c.token_refiner_num_layers));
  r.emplace_back("hidden_size", std::to_string(c.hidden_size));
  r.emplace_back("attention", fmt::format("{} heads x {} = {} (rotary dims {})",
                                          c.num_attention_heads, c.attention_head_dim,
                                          c.inner_dim(), c.rope_dim()));
  r.emplace_back("ffn_hidden_size", fmt::format("{} (SwiGLU)", c.ffn_hidden_size));
  r.emplace_back("latents", fmt::format("video {} ch, patch 1x2x2 ({}), audio {} ch, text {}",
                                        c.latents_dim, c.video_patch_dim(), c.audio_latents_dim,
                                        c.text_dim));
  r.emplace_back("time_embed_dim", std::to_string(c.time_embed_dim));
  r.emplace_back("parameters", billions(n.total));
  r.emplace_back("adaln_proj parameters",
                 fmt::format("{} = {:.1f}% of all", billions(n.adaln_proj),
                             100.0 * static_cast<double>(n.adaln_proj) / n.total));
  r.emplace_back("checkpoint bytes", fmt::format("{:.2f} GB ({})", n.bytes / 1e9, n.bytes));
  return r;
}

}  // namespace avdit::models::h3
