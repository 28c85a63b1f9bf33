// NVFP4 routed-expert memory of the official MAGI-2 preview config: about 217 GB in bf16, about
// 61 GB (57 GiB) packed at 4.5 bits per weight; and the resident estimate of a single-GPU run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "io/safetensors.h"
#include "models/magi2/config.h"
#include "models/magi2/nvfp4_memory.h"

namespace avdit::models::magi2 {
namespace {

TEST(Nvfp4Memory, OfficialPreviewConfig) {
  const std::filesystem::path path = std::filesystem::path(AVDIT_SHARED_DIR) / "reference-configs" /
                                     "magi2" / "magi2_preview.json";
  const Magi2Config config = parse_magi2_config(read_json(path));
  const Nvfp4MemoryCounts c = nvfp4_memory_counts(config);
  for (const auto& [k, v] : nvfp4_memory_report(config))
    std::printf("%s: %s\n", k.c_str(), v.c_str());
  // 36 MoE layers x 3 tensors x (12 heads x 256 experts) matrices of 256 x 1280.
  EXPECT_EQ(c.matrices, 36 * 3 * 12 * 256);
  EXPECT_EQ(c.routed_params, c.matrices * 256 * 1280);
  EXPECT_EQ(c.unpackable, 0);
  EXPECT_EQ(c.bf16_bytes, 2 * c.routed_params);
  EXPECT_EQ(c.nvfp4_bytes, c.routed_params / 2 + c.routed_params / 16 + 4 * c.matrices);
  EXPECT_NEAR(static_cast<double>(c.bf16_bytes) / 1e9, 217.4, 0.5);
  EXPECT_NEAR(static_cast<double>(c.nvfp4_bytes) / 1e9, 61.2, 0.3);
  EXPECT_NEAR(static_cast<double>(c.nvfp4_bytes) / (1 << 30), 57.0, 0.3);
}

TEST(Nvfp4Memory, ResidentEstimateOfOfficialPreviewAt58kTokens) {
  const std::filesystem::path path = std::filesystem::path(AVDIT_SHARED_DIR) / "reference-configs" /
                                     "magi2" / "magi2_preview.json";
  const Magi2Config config = parse_magi2_config(read_json(path));
  const Nvfp4ResidentEstimate e = nvfp4_resident_estimate(config, 58000);
  for (const auto& [k, v] : nvfp4_resident_report(config, 58000))
    std::printf("%s: %s\n", k.c_str(), v.c_str());
  EXPECT_EQ(e.routed_nvfp4_bytes, nvfp4_memory_counts(config).nvfp4_bytes);
  // 113.93B parameters, 108.72B of them routed: ~5.2B others, almost all bf16 (fp32 norms /
  // router).
  EXPECT_GT(e.other_weight_bytes, 2 * 5'000'000'000LL);
  EXPECT_LT(e.other_weight_bytes, 4 * 5'300'000'000LL);
  EXPECT_EQ(e.weight_bytes, e.routed_nvfp4_bytes + e.other_weight_bytes);
  int64_t sum = 0;
  for (const ActivationPart& p : e.activation_parts) sum += p.bytes;
  EXPECT_EQ(sum, e.activation_bytes);
  EXPECT_EQ(e.total_bytes, e.weight_bytes + e.activation_bytes);
  // The largest part: gate/up output of T * 12 heads * top-6 rows of 2 * 1280 bf16 values.
  const auto gate_up =
      std::find_if(e.activation_parts.begin(), e.activation_parts.end(),
                   [](const ActivationPart& p) { return p.name == "gate/up output"; });
  ASSERT_NE(gate_up, e.activation_parts.end());
  EXPECT_EQ(gate_up->bytes, int64_t{58000} * 12 * 6 * 2 * 1280 * 2);
  // Activations scale linearly with T apart from the fixed dequantisation scratch.
  const Nvfp4ResidentEstimate half = nvfp4_resident_estimate(config, 29000);
  const int64_t scratch = e.activation_parts.back().bytes;
  EXPECT_EQ(2 * (half.activation_bytes - scratch), e.activation_bytes - scratch);
}

}  // namespace
}  // namespace avdit::models::magi2
