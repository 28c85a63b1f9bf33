// The MAGI-2 preview checkpoint layout as TensorSpecs: names and shapes as
// Transformer(arch_config).state_dict() of the reference; dtypes as the reference creates them
// (params_dtype for grouped linears and experts, bf16 hard-coded for split/merge and shared
// experts, fp32 for embedders, norms, router, sinks and mHC).
#include "models/magi2/tensor_specs.h"

#include <fmt/format.h>

namespace avdit::models::magi2 {
namespace {

void add(std::vector<TensorSpec>& out, std::string name, Shape shape, DType dtype) {
  out.push_back(TensorSpec{std::move(name), std::move(shape), dtype});
}

void add_layer(std::vector<TensorSpec>& out, const Magi2Config& c, int64_t i) {
  const std::string p = fmt::format("block.layers.{}.", i);
  const int64_t n = c.mhc_num_stream, h = c.hidden_size, g = c.groups(i);
  const DType pd = c.params_dtype, f32 = DType::F32;
  for (const char* branch : {"attn", "mlp"})
    for (const char* kind : {"pre", "post", "res"})
      add(out, fmt::format("{}mhc_alpha_{}_{}", p, kind, branch), {1}, f32);
  for (const char* branch : {"attn", "mlp"})
    for (const char* kind : {"pre", "post"})
      add(out, fmt::format("{}mhc_bias_{}_{}", p, kind, branch), {n}, f32);
  add(out, p + "mhc_bias_res_attn", {n, n}, f32);
  add(out, p + "mhc_bias_res_mlp", {n, n}, f32);
  add(out, p + "mhc_phi_fused_attn", {n * h, 2 * n + n * n}, f32);
  add(out, p + "mhc_phi_fused_mlp", {n * h, 2 * n + n * n}, f32);

  const int64_t hq = c.num_heads_q, hkv = c.num_heads_kv, d = c.head_dim;
  add(out, p + "attention.sinks", {std::max<int64_t>(1, c.sink_token_num), hq}, f32);
  add(out, p + "attention.pre_norm.weight", {g * h}, f32);
  add(out, p + "attention.linear_g.weight", {g * hq, h}, pd);
  add(out, p + "attention.linear_qkv.weight", {g * (hq + 2 * hkv) * d, h}, pd);
  add(out, p + "attention.linear_proj.weight", {g * h, hq * d}, pd);
  add(out, p + "attention.q_norm.weight", {g * d}, f32);
  add(out, p + "attention.k_norm.weight", {g * d}, f32);

  if (c.is_moe_layer(i)) {
    const int64_t he = c.moe.num_heads * c.moe.num_experts, dm = c.moe_head_dim,
                  de = c.moe.expert_intermediate_size;
    const int64_t is = c.moe.shared_expert_intermediate_size,
                  im = c.moe.modality_specific_expert_intermediate_size;
    const DType bf16 =
        DType::BF16;  // shared_expert_params_dtype is hard-coded bf16 in the reference
    add(out, p + "mlp.moe_mlp.gate", {he, dm}, f32);
    add(out, p + "mlp.moe_mlp.W_gate", {he, dm, de}, pd);
    add(out, p + "mlp.moe_mlp.W_up", {he, dm, de}, pd);
    add(out, p + "mlp.moe_mlp.W_down", {he, de, dm}, pd);
    add(out, p + "mlp.moe_mlp.router.expert_bias", {he}, f32);
    add(out, p + "mlp.moe_mlp.router.expert_bias_ema", {he}, f32);
    add(out, p + "mlp.shared_expert_fc1.weight", {2 * is, h}, bf16);
    add(out, p + "mlp.shared_expert_fc2.weight", {h, is}, bf16);
    add(out, p + "mlp.modality_specific_shared_expert_fc1.weight", {kNumModalities * 2 * im, h},
        bf16);
    add(out, p + "mlp.modality_specific_shared_expert_fc2.weight", {kNumModalities * h, im}, bf16);
    add(out, p + "mlp.pre_norm.weight", {kNumModalities * h}, f32);
    add(out, p + "mlp.split_linear.weight", {c.moe_width, h}, bf16);
    add(out, p + "mlp.merge_linear.weight", {h, c.moe_width}, bf16);
  } else {
    const int64_t inter = c.dense_intermediate;
    add(out, p + "mlp.pre_norm.weight", {g * h}, f32);
    add(out, p + "mlp.up_gate_proj.weight", {g * 2 * inter, h}, pd);
    add(out, p + "mlp.down_proj.weight", {g * h, inter}, pd);
  }
  add(out, p + "mhc_norm.weight", {g * n * h}, f32);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<TensorSpec> magi2_tensor_specs(const Magi2Config& c) {
  std::vector<TensorSpec> out;
  const int64_t r = c.residual_width;
  const DType f32 = DType::F32;
  add(out, "pre_adapter.video_embedder.weight", {r, c.video_in_channels}, f32);
  add(out, "pre_adapter.video_embedder.bias", {r}, f32);
  add(out, "pre_adapter.text_embedder.weight", {r, c.text_in_channels}, f32);
  add(out, "pre_adapter.text_embedder.bias", {r}, f32);
  add(out, "pre_adapter.audio_embedder.weight", {r, c.audio_in_channels}, f32);
  add(out, "pre_adapter.audio_embedder.bias", {r}, f32);
  add(out, "pre_adapter.rope.bands", {c.rope_bands}, f32);
  add(out, "post_adapter.final_norm_video.weight", {r}, f32);
  add(out, "post_adapter.final_norm_audio.weight", {r}, f32);
  add(out, "post_adapter.final_linear_video.weight", {c.video_in_channels, r}, f32);
  add(out, "post_adapter.final_linear_audio.weight", {c.audio_in_channels, r}, f32);
  for (int64_t i = 0; i < c.num_layers; ++i) add_layer(out, c, i);
  return out;
}

Magi2ParamCounts magi2_param_counts(const Magi2Config& c) {
  Magi2ParamCounts counts;
  const double expert_fraction = c.moe.num_experts > 0 ? static_cast<double>(c.moe.top_k) /
                                                             static_cast<double>(c.moe.num_experts)
                                                       : 0.0;
  double active = 0;
  for (const TensorSpec& s : magi2_tensor_specs(c)) {
    const int64_t n = numel(s);
    // Every stored value counts (buffers included: rope bands, router biases), as the checkpoint
    // holds them.
    counts.total += n;
    const bool routed = ends_with(s.name, "moe_mlp.W_gate") || ends_with(s.name, "moe_mlp.W_up") ||
                        ends_with(s.name, "moe_mlp.W_down");
    if (routed) {
      counts.routed_experts += n;
      active += static_cast<double>(n) * expert_fraction;
      continue;
    }
    // A video token uses its own embedder / final layer and one modality block of grouped weights.
    if (s.name.find("text_embedder") != std::string::npos ||
        s.name.find("audio_embedder") != std::string::npos || ends_with(s.name, "_audio.weight"))
      continue;
    const bool modality_grouped =
        s.name.find("modality_specific_shared_expert") != std::string::npos ||
        (s.name.find("mlp.pre_norm") != std::string::npos &&
         s.shape[0] == kNumModalities * c.hidden_size && c.hidden_size > 0) ||
        [&] {
          // block.layers.{i}.attention/mlp/mhc_norm weights of an mm layer carry 3 modality blocks.
          int64_t layer = -1;
          if (std::sscanf(s.name.c_str(), "block.layers.%ld.", &layer) != 1) return false;
          if (!c.is_mm_layer(layer)) return false;
          return s.name.find(".attention.") != std::string::npos ||
                 s.name.find(".mlp.") != std::string::npos ||
                 s.name.find("mhc_norm") != std::string::npos;
        }();
    active += modality_grouped ? static_cast<double>(n) / kNumModalities : static_cast<double>(n);
  }
  counts.active_per_token = static_cast<int64_t>(active + 0.5);
  return counts;
}

std::string format_param_count(int64_t n) {
  const double v = static_cast<double>(n);
  if (v >= 1e9) return fmt::format("{:.1f}B", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}K", v / 1e3);
  return fmt::format("{}", n);
}

std::vector<std::pair<std::string, std::string>> magi2_config_report(const Magi2Config& c) {
  const Magi2ParamCounts counts = magi2_param_counts(c);
  std::vector<std::pair<std::string, std::string>> r;
  r.emplace_back("family", "magi2 (MAGI-2 preview DiT, multi-head MoE + mHC)");
  r.emplace_back("parameters",
                 fmt::format("{} ({} params)", format_param_count(counts.total), counts.total));
  r.emplace_back(
      "routed experts",
      fmt::format("{} params ({:.1f}% of total)", format_param_count(counts.routed_experts),
                  counts.total > 0 ? 100.0 * counts.routed_experts / counts.total : 0.0));
  r.emplace_back(
      "active per token",
      fmt::format("{} params (video token, top-{} of {} experts per head)",
                  format_param_count(counts.active_per_token), c.moe.top_k, c.moe.num_experts));
  r.emplace_back("layers", fmt::format("{} ({} MoE, {} modality-specific)", c.num_layers,
                                       c.moe.moe_layers.size(), c.mm_layers.size()));
  r.emplace_back("hidden", fmt::format("{} x {} mHC streams = {}", c.hidden_size, c.mhc_num_stream,
                                       c.residual_width));
  r.emplace_back("attention",
                 fmt::format("{} q heads, {} kv heads, head_dim {}, RoPE on {} dims, sinks, gate",
                             c.num_heads_q, c.num_heads_kv, c.head_dim, c.rope_dim));
  r.emplace_back("dense MLP", fmt::format("swiglu7, intermediate {}", c.dense_intermediate));
  r.emplace_back(
      "MoE", fmt::format(
                 "{} heads x {} experts (d_head {}, expert width {}), top-{}, {} scores, scale {}",
                 c.moe.num_heads, c.moe.num_experts, c.moe_head_dim, c.moe.expert_intermediate_size,
                 c.moe.top_k, c.moe.score_func, c.moe.route_scale));
  r.emplace_back("inputs", fmt::format("video {} ch, audio {} ch, text {} ch, time embedding {} ch",
                                       c.video_in_channels, c.audio_in_channels, c.text_in_channels,
                                       c.data_proxy.time_channel_dim));
  r.emplace_back("weights dtype", std::string(dtype_name(c.params_dtype)));
  return r;
}

}  // namespace avdit::models::magi2
