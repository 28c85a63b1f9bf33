// NVFP4 routed-expert memory of the official MAGI-2 preview config: about 217 GB in bf16, about
// 61 GB (57 GiB) packed at 4.5 bits per weight.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "io/safetensors.h"
#include "models/magi2/config.h"
#include "quant/nvfp4_memory.h"

namespace avdit::quant {
namespace {

TEST(Nvfp4Memory, OfficialPreviewConfig) {
  const std::filesystem::path path =
      std::filesystem::path(AVDIT_SHARED_DIR) / "reference-configs" / "magi2" / "magi2_preview.json";
  const models::magi2::Magi2Config config = models::magi2::parse_magi2_config(read_json(path));
  const Nvfp4MemoryCounts c = nvfp4_memory_counts(config);
  for (const auto& [k, v] : nvfp4_memory_report(config)) std::printf("%s: %s\n", k.c_str(), v.c_str());
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

}  // namespace
}  // namespace avdit::quant
