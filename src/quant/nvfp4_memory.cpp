// Routed-expert memory in bf16 vs NVFP4, counted from the checkpoint tensor list of a MAGI-2 config
// with the exact byte layout of Nvfp4Matrix (values, block scales, one global scale per expert).
#include "quant/nvfp4_memory.h"

#include <fmt/format.h>

#include "models/magi2/tensor_specs.h"
#include "quant/nvfp4.h"

namespace avdit::quant {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string bytes_str(int64_t b) {
  return fmt::format("{:.1f} GB ({:.1f} GiB, {} bytes)", static_cast<double>(b) / 1e9,
                     static_cast<double>(b) / static_cast<double>(int64_t{1} << 30), b);
}

}  // namespace

Nvfp4MemoryCounts nvfp4_memory_counts(const models::magi2::Magi2Config& config) {
  Nvfp4MemoryCounts c;
  for (const models::TensorSpec& s : models::magi2::magi2_tensor_specs(config)) {
    if (!ends_with(s.name, "moe_mlp.W_gate") && !ends_with(s.name, "moe_mlp.W_up") &&
        !ends_with(s.name, "moe_mlp.W_down"))
      continue;
    // [H E, K, N], stored [in, out]: the blocks run along K = dim 1.
    const int64_t g = s.shape.at(0), k = s.shape.at(1), n = s.shape.at(2);
    const int64_t numel = g * k * n;
    c.routed_params += numel;
    c.matrices += g;
    c.bf16_bytes += 2 * numel;
    if (k % kNvfp4Block != 0) {
      c.unpackable += numel;
      c.nvfp4_bytes += 2 * numel;
      continue;
    }
    c.nvfp4_bytes += numel / 2 + numel / kNvfp4Block + 4 * g;
  }
  return c;
}

std::vector<std::pair<std::string, std::string>> nvfp4_memory_report(const models::magi2::Magi2Config& config) {
  const Nvfp4MemoryCounts c = nvfp4_memory_counts(config);
  std::vector<std::pair<std::string, std::string>> r;
  r.emplace_back("routed expert params", fmt::format("{} ({} expert matrices)",
                                                     models::magi2::format_param_count(c.routed_params), c.matrices));
  r.emplace_back("routed experts bf16", bytes_str(c.bf16_bytes));
  r.emplace_back("routed experts nvfp4", bytes_str(c.nvfp4_bytes));
  const double bits = c.routed_params > 0 ? 8.0 * static_cast<double>(c.nvfp4_bytes) / c.routed_params : 0.0;
  r.emplace_back("nvfp4 bits per weight", fmt::format("{:.3f}", bits));
  r.emplace_back("nvfp4 saving", bytes_str(c.bf16_bytes - c.nvfp4_bytes));
  if (c.unpackable > 0)
    r.emplace_back("left in bf16", fmt::format("{} params (K not a multiple of {})", c.unpackable, kNvfp4Block));
  return r;
}

}  // namespace avdit::quant
