// Routed-expert memory in bf16 vs NVFP4, counted from the checkpoint tensor list of a MAGI-2 config
// with the exact byte layout of Nvfp4Matrix (values, block scales, one global scale per expert).
#include "models/magi2/nvfp4_memory.h"

#include <fmt/format.h>

#include "core/dtype.h"
#include "models/magi2/tensor_specs.h"
#include "quant/nvfp4.h"

namespace avdit::models::magi2 {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string bytes_str(int64_t b) {
  return fmt::format("{:.1f} GB ({:.1f} GiB, {} bytes)", static_cast<double>(b) / 1e9,
                     static_cast<double>(b) / static_cast<double>(int64_t{1} << 30), b);
}

}  // namespace

Nvfp4MemoryCounts nvfp4_memory_counts(const Magi2Config& config) {
  Nvfp4MemoryCounts c;
  for (const models::TensorSpec& s : magi2_tensor_specs(config)) {
    if (!ends_with(s.name, "moe_mlp.W_gate") && !ends_with(s.name, "moe_mlp.W_up") &&
        !ends_with(s.name, "moe_mlp.W_down"))
      continue;
    // [H E, K, N], stored [in, out]: the blocks run along K = dim 1.
    const int64_t g = s.shape.at(0), k = s.shape.at(1), n = s.shape.at(2);
    const int64_t numel = g * k * n;
    c.routed_params += numel;
    c.matrices += g;
    c.bf16_bytes += 2 * numel;
    if (k % quant::kNvfp4Block != 0) {
      c.unpackable += numel;
      c.nvfp4_bytes += 2 * numel;
      continue;
    }
    c.nvfp4_bytes += numel / 2 + numel / quant::kNvfp4Block + 4 * g;
  }
  return c;
}

std::vector<std::pair<std::string, std::string>> nvfp4_memory_report(const Magi2Config& config) {
  const Nvfp4MemoryCounts c = nvfp4_memory_counts(config);
  std::vector<std::pair<std::string, std::string>> r;
  r.emplace_back(
      "routed expert params",
      fmt::format("{} ({} expert matrices)", format_param_count(c.routed_params), c.matrices));
  r.emplace_back("routed experts bf16", bytes_str(c.bf16_bytes));
  r.emplace_back("routed experts nvfp4", bytes_str(c.nvfp4_bytes));
  const double bits =
      c.routed_params > 0 ? 8.0 * static_cast<double>(c.nvfp4_bytes) / c.routed_params : 0.0;
  r.emplace_back("nvfp4 bits per weight", fmt::format("{:.3f}", bits));
  r.emplace_back("nvfp4 saving", bytes_str(c.bf16_bytes - c.nvfp4_bytes));
  if (c.unpackable > 0)
    r.emplace_back("left in bf16", fmt::format("{} params (K not a multiple of {})", c.unpackable,
                                               quant::kNvfp4Block));
  return r;
}

// The activation peak of one MoE layer's forward (bf16 = 2 bytes, fp32 = 4; T tokens; n mHC
// streams, hidden h, W = MoE width, H_moe heads of D_moe, E experts, top-k k, expert width De):
//   residual stream in and out     2 * T * n * h * 2      (mHC streams; a layer reads one, writes
//   the next) branch input and its norm      2 * T * h * 2 mHC mixing coefficients        T * (2n +
//   n^2) * 4 split_out                      T * W * 2 router logits                  T * H_moe * E
//   * 4      (the router is fp32) top-k indices and weights      T * H_moe * k * (4 + 4) permuted
//   expert input          T * H_moe * k * D_moe * 2 gate/up output                 T * H_moe * k *
//   2 De * 2 swiglu7 output                 T * H_moe * k * De * 2 down output                    T
//   * H_moe * k * D_moe * 2 experts_out (combined)         T * W * 2 NVFP4 dequantisation scratch
//   E * 3 * D_moe * De * 2 (one head's experts in bf16 at a time)
// All are counted live at once: an upper bound for the unfused path (a fused gather-GEMM-scatter
// kernel, as the reference's Triton one, never holds the gate/up and swiglu7 outputs). The
// attention branch (qkv T * (Hq + 2 Hkv) D, output T * Hq D) and the dense MLP layers (T * 3 * I)
// peak lower.
Nvfp4ResidentEstimate nvfp4_resident_estimate(const Magi2Config& c, int64_t tokens) {
  Nvfp4ResidentEstimate r;
  r.tokens = tokens;
  for (const models::TensorSpec& s : magi2_tensor_specs(c)) {
    const bool routed = ends_with(s.name, "moe_mlp.W_gate") || ends_with(s.name, "moe_mlp.W_up") ||
                        ends_with(s.name, "moe_mlp.W_down");
    if (!routed) r.other_weight_bytes += dtype_nbytes(s.dtype, shape_numel(s.shape));
  }
  r.routed_nvfp4_bytes = nvfp4_memory_counts(c).nvfp4_bytes;
  r.weight_bytes = r.routed_nvfp4_bytes + r.other_weight_bytes;

  const int64_t T = tokens, n = c.mhc_num_stream, h = c.hidden_size, W = c.moe_width,
                Hm = c.moe.num_heads, E = c.moe.num_experts, k = c.moe.top_k, Dm = c.moe_head_dim,
                De = c.moe.expert_intermediate_size;
  const int64_t slots = T * Hm * k;  // routed (token, head, expert) rows
  auto add = [&](const char* name, const char* formula, int64_t bytes) {
    r.activation_parts.push_back({name, formula, bytes});
    r.activation_bytes += bytes;
  };
  add("residual stream in + out", "2 T n h 2", 2 * T * n * h * 2);
  add("branch input + norm", "2 T h 2", 2 * T * h * 2);
  add("mHC coefficients", "T (2n + n^2) 4", T * (2 * n + n * n) * 4);
  add("split_out", "T W 2", T * W * 2);
  add("router logits (fp32)", "T H_moe E 4", T * Hm * E * 4);
  add("top-k indices + weights", "T H_moe k 8", slots * 8);
  add("permuted expert input", "T H_moe k D_moe 2", slots * Dm * 2);
  add("gate/up output", "T H_moe k 2De 2", slots * 2 * De * 2);
  add("swiglu7 output", "T H_moe k De 2", slots * De * 2);
  add("down output", "T H_moe k D_moe 2", slots * Dm * 2);
  add("experts_out", "T W 2", T * W * 2);
  add("NVFP4 dequant scratch (one head)", "E 3 D_moe De 2", E * 3 * Dm * De * 2);
  r.total_bytes = r.weight_bytes + r.activation_bytes;
  return r;
}

std::vector<std::pair<std::string, std::string>> nvfp4_resident_report(const Magi2Config& config,
                                                                       int64_t tokens) {
  const Nvfp4ResidentEstimate e = nvfp4_resident_estimate(config, tokens);
  std::vector<std::pair<std::string, std::string>> r;
  r.emplace_back(
      "resident weights",
      fmt::format("{} = routed experts NVFP4 {:.1f} GB + other weights (bf16/fp32) {:.1f} GB",
                  bytes_str(e.weight_bytes), e.routed_nvfp4_bytes / 1e9,
                  e.other_weight_bytes / 1e9));
  for (const ActivationPart& p : e.activation_parts)
    r.emplace_back(fmt::format("  activation: {}", p.name),
                   fmt::format("{:.2f} GB ({})", p.bytes / 1e9, p.formula));
  r.emplace_back(
      fmt::format("activation peak at T = {}", e.tokens),
      fmt::format("{} (one MoE layer, bf16, unfused experts)", bytes_str(e.activation_bytes)));
  r.emplace_back("resident total (single GPU)", bytes_str(e.total_bytes));
  return r;
}

}  // namespace avdit::models::magi2
