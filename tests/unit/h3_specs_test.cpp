// The H3 tensor specs for the official config reproduce the official checkpoint index (names and
// total_size exactly) and the parameter counts `avdit inspect` reports (~33.1B, adaLN ~13.0B).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/config.h"
#include "models/h3/tensor_specs.h"

namespace avdit::models::h3 {
namespace {

const std::filesystem::path kOfficial = std::filesystem::path(AVDIT_SHARED_DIR) /
                                        "reference-configs" / "h3" / "FL2VA" / "transformer";

TEST(H3Specs, OfficialIndexNamesAndTotalSize) {
  const nlohmann::json config = read_json(kOfficial / "config.json");
  ASSERT_TRUE(is_h3_config(config));
  const H3Config c = H3Config::from_json(config);
  const nlohmann::json index = read_json(kOfficial / "model.safetensors.index.json");
  std::set<std::string> official;
  for (const auto& [name, file] : index["weight_map"].items()) official.insert(name);
  std::set<std::string> ours;
  int64_t bytes = 0;
  for (const TensorSpec& s : h3_tensor_specs(c)) {
    EXPECT_TRUE(ours.insert(s.name).second) << "duplicate " << s.name;
    bytes += dtype_nbytes(s.dtype, numel(s));
  }
  EXPECT_EQ(official.size(), 535u);
  EXPECT_EQ(ours, official);
  EXPECT_EQ(bytes, index["metadata"]["total_size"].get<int64_t>());
  EXPECT_EQ(bytes, int64_t{66280430144});
}

TEST(H3Specs, ParameterCountsOfTheOfficialConfig) {
  const H3Config c = H3Config::from_json(read_json(kOfficial / "config.json"));
  const H3ParamCounts n = h3_param_counts(c);
  EXPECT_NEAR(n.total / 1e9, 33.12, 0.01);
  EXPECT_NEAR(n.adaln_proj / 1e9, 13.04, 0.01);
  EXPECT_NEAR(static_cast<double>(n.adaln_proj) / n.total, 0.394, 0.001);
  bool saw_params = false, saw_adaln = false;
  for (const auto& [label, value] : h3_config_report(c)) {
    if (label == "parameters") saw_params = value.rfind("33.12B", 0) == 0;
    if (label == "adaln_proj parameters")
      saw_adaln = value.find("13.04B") != std::string::npos &&
                  value.find("39.4%") != std::string::npos;
  }
  EXPECT_TRUE(saw_params);
  EXPECT_TRUE(saw_adaln);
}

TEST(H3Specs, TinyFixtureMatchesItsCheckpoint) {
  const std::filesystem::path tiny = std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";
  const Checkpoint ckpt = Checkpoint::open(tiny);
  ASSERT_NE(ckpt.config(), nullptr);
  const H3Config c = resolve_variant(H3Config::from_json(*ckpt.config()), ckpt);
  EXPECT_FALSE(c.curve_variant());
  const auto specs = h3_tensor_specs(c);
  EXPECT_EQ(specs.size(), ckpt.names().size());
  for (const TensorSpec& s : specs) {
    ASSERT_TRUE(ckpt.contains(s.name)) << s.name;
    EXPECT_EQ(ckpt.info(s.name).shape, s.shape) << s.name;
    EXPECT_EQ(ckpt.info(s.name).dtype, s.dtype) << s.name;
  }
}

TEST(H3Specs, CurveVariantReplacesTheTimeEmbedder) {
  H3Config c = H3Config::from_json(read_json(kOfficial / "config.json"));
  c.adaln_curve_grid = 1025;
  c.time_embed_dim = 8;
  bool table = false;
  for (const TensorSpec& s : h3_tensor_specs(c)) {
    EXPECT_EQ(s.name.rfind("time_embedder.", 0), std::string::npos) << s.name;
    if (s.name == "adaln_t_table") {
      table = true;
      EXPECT_EQ(s.shape, (Shape{1025, 8}));
    }
    if (s.name == "blocks.0.adaln_proj.linear.weight") {
      EXPECT_EQ(s.shape, (Shape{96768, 8}));
      EXPECT_EQ(s.dtype, DType::F32);
    }
  }
  EXPECT_TRUE(table);
}

TEST(H3Config, RejectsInconsistentConfigs) {
  nlohmann::json j = read_json(kOfficial / "config.json");
  j["adaln_out_features"] = 12345;
  EXPECT_THROW(H3Config::from_json(j), BadInput);
  j = read_json(kOfficial / "config.json");
  j.erase("hidden_size");
  try {
    H3Config::from_json(j);
    FAIL() << "no error";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_size"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(is_h3_config(nlohmann::json{{"_class_name", "Magi2"}}));
}

}  // namespace
}  // namespace avdit::models::h3
