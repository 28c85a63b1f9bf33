// MAGI-2 preview config parsing, derived sizes and the checkpoint tensor list (parameter counts from a config alone).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/config.h"
#include "models/magi2/tensor_specs.h"

namespace avdit::models::magi2 {
namespace {

const std::filesystem::path kShared = AVDIT_SHARED_DIR;

TEST(Magi2Config, OfficialPreviewSizes) {
  const nlohmann::json j = read_json(kShared / "reference-configs" / "magi2" / "magi2_preview.json");
  ASSERT_TRUE(is_magi2_config(j));
  const Magi2Config c = parse_magi2_config(j);
  EXPECT_EQ(c.num_heads_q, 24);
  EXPECT_EQ(c.num_heads_kv, 24);
  EXPECT_EQ(c.residual_width, 4 * 3072);
  EXPECT_EQ(c.dense_intermediate, 8192);
  EXPECT_EQ(c.moe_width, 3072);
  EXPECT_EQ(c.moe_head_dim, 256);
  EXPECT_EQ(c.rope_dim, 96);
  EXPECT_EQ(c.moe.moe_layers.size(), 36u);
  EXPECT_EQ(c.groups(0), 3);
  EXPECT_EQ(c.groups(2), 1);
  const Magi2ParamCounts n = magi2_param_counts(c);
  std::printf("official preview: total %lld, routed %lld, active/token %lld\n", static_cast<long long>(n.total),
              static_cast<long long>(n.routed_experts), static_cast<long long>(n.active_per_token));
  EXPECT_NEAR(static_cast<double>(n.total) / 1e9, 114.0, 0.5);
  EXPECT_NEAR(static_cast<double>(n.routed_experts) / 1e9, 108.7, 0.05);
  EXPECT_GT(n.active_per_token, 0);
  EXPECT_LT(n.active_per_token, n.total - n.routed_experts + n.routed_experts / 10);
  const auto report = magi2_config_report(c);
  bool has_routed = false;
  for (const auto& [k, v] : report) has_routed = has_routed || (k == "routed experts" && v.find("108.7B") == 0);
  EXPECT_TRUE(has_routed);
}

TEST(Magi2Config, RefinerIsNotPreview) {
  const nlohmann::json j = read_json(kShared / "reference-configs" / "magi2" / "magi2_refiner.json");
  EXPECT_FALSE(is_magi2_config(j));
}

TEST(Magi2Config, TinyFixtureSpecsMatchCheckpoint) {
  const std::filesystem::path dir = kShared / "golden" / "magi2-tiny";
  const Magi2Config c = parse_magi2_config(read_json(dir / "config.json"));
  EXPECT_EQ(c.num_heads_q, 2);
  EXPECT_EQ(c.residual_width, 512);
  EXPECT_EQ(c.dense_intermediate, 128);
  EXPECT_EQ(c.moe_width, 128);
  EXPECT_EQ(c.moe_head_dim, 64);
  EXPECT_EQ(c.rope_dim, 48);
  const Checkpoint ckpt = Checkpoint::open(dir);
  const std::vector<TensorSpec> specs = magi2_tensor_specs(c);
  EXPECT_EQ(specs.size(), ckpt.names().size());
  for (const TensorSpec& s : specs) {
    ASSERT_TRUE(ckpt.contains(s.name)) << s.name;
    EXPECT_EQ(ckpt.info(s.name).shape, s.shape) << s.name;
    EXPECT_EQ(ckpt.info(s.name).dtype, s.dtype) << s.name;
  }
  EXPECT_EQ(magi2_param_counts(c).total, 3292376);  // fixture.json model_num_params
}

TEST(Magi2Config, RejectionsNameTheField) {
  nlohmann::json j = read_json(kShared / "golden" / "magi2-tiny" / "config.json");
  j["arch_config"]["hidden_size"] = 100;  // not a multiple of head_dim 64
  try {
    parse_magi2_config(j);
    FAIL() << "expected BadInput";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
  j = read_json(kShared / "golden" / "magi2-tiny" / "config.json");
  j["arch_config"]["moe_config"]["top_k"] = 99;
  EXPECT_THROW(parse_magi2_config(j), BadInput);
}

}  // namespace
}  // namespace avdit::models::magi2
