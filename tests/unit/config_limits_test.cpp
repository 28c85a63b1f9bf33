// Config validation against hostile values (issue 30): sizes beyond plausible limits (a config of
// 10^9 layers used to run for minutes before bad_alloc), fractional and out-of-int64 integers,
// wrong types. Each rejection is a BadInput naming the field.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "models/h3/config.h"
#include "models/magi2/config.h"

namespace avdit::models {
namespace {

const std::filesystem::path kShared = AVDIT_SHARED_DIR;
using nlohmann::json;

std::string rejection(const std::function<void()>& f) {
  try {
    f();
  } catch (const BadInput& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ConfigLimits, Magi2FieldsAreBoundedAndIntegral) {
  const json base = read_json(kShared / "golden" / "magi2-tiny" / "config.json");
  struct Case {
    json::json_pointer field;
    json value;
    std::string expect;
  };
  const Case cases[] = {
      {json::json_pointer("/arch_config/num_layers"), 1000000000,
       "arch_config.num_layers = 1000000000"},
      {json::json_pointer("/arch_config/hidden_size"), 3072.5,
       "arch_config.hidden_size must be an integer"},
      {json::json_pointer("/arch_config/hidden_size"), 128.0,
       "arch_config.hidden_size must be an integer"},
      {json::json_pointer("/arch_config/hidden_size"), "128",
       "arch_config.hidden_size must be an integer"},
      {json::json_pointer("/arch_config/hidden_size"), 18446744073709551615ull,
       "arch_config.hidden_size"},
      {json::json_pointer("/arch_config/head_dim"), -64, "arch_config.head_dim"},
      {json::json_pointer("/arch_config/intermediate_factor"), 1e300,
       "arch_config.intermediate_factor"},
      {json::json_pointer("/arch_config/mm_layers"), json::array({0, 1.5}),
       "arch_config.mm_layers"},
      {json::json_pointer("/arch_config/mm_layers"), std::vector<int>(5000, 0),
       "arch_config.mm_layers"},
      {json::json_pointer("/arch_config/mhc_config/num_stream"), 100000, "mhc_config.num_stream"},
      {json::json_pointer("/arch_config/moe_config/num_experts"), 1 << 30,
       "moe_config.num_experts"},
      {json::json_pointer("/arch_config/moe_config/expert_intermediate_size"), int64_t{1} << 40,
       "moe_config.expert_intermediate_size"},
      {json::json_pointer("/arch_config/attn_sinks/sink_token_num"), 1 << 20, "sink_token_num"},
      {json::json_pointer("/evaluation_config/data_proxy_config/patch_size"), 1 << 20,
       "patch_size"},
  };
  for (const Case& c : cases) {
    json j = base;
    j[c.field] = c.value;
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = rejection([&] { magi2::parse_magi2_config(j); });
    EXPECT_NE(msg.find(c.expect), std::string::npos)
        << c.field.to_string() << " = " << c.value.dump().substr(0, 40) << " -> " << msg;
    // Describing the config (what `inspect` does) is refused as quickly.
    EXPECT_NE(rejection([&] { describe_family("magi2-preview", j); }), "(accepted)");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  }
  // The official configs stay inside the limits.
  EXPECT_NO_THROW(magi2::parse_magi2_config(
      read_json(kShared / "reference-configs" / "magi2" / "magi2_preview.json")));
}

TEST(ConfigLimits, H3FieldsAreBoundedAndIntegral) {
  const json base = read_json(kShared / "golden" / "h3-tiny" / "config.json");
  const std::pair<std::string, json> cases[] = {
      {"num_layers", 1000000000},
      {"hidden_size", 1.5},
      {"hidden_size", 192.0},
      {"ffn_hidden_size", int64_t{1} << 40},
      {"text_dim", "64"},
      {"num_attention_heads", -2},
      {"norm_eps", 1e300},
      {"qk_norm_eps", 0},
      {"time_embed_dim", 18446744073709551615ull},
      {"patch_size", json::array({"a", 2, 2})},
      {"patch_size", json::array({1.5, 2, 2})},
  };
  for (const auto& [field, value] : cases) {
    json j = base;
    j[field] = value;
    const std::string msg = rejection([&] { h3::H3Config::from_json(j); });
    EXPECT_NE(msg.find("H3 config"), std::string::npos) << field << " -> " << msg;
    EXPECT_NE(msg.find(field), std::string::npos) << field << " -> " << msg;
  }
  EXPECT_NO_THROW(h3::H3Config::from_json(
      read_json(kShared / "reference-configs" / "h3" / "FL2VA" / "transformer" / "config.json")));
}

TEST(ConfigLimits, FamilyDetectionTakesAnyJsonTypes) {
  // Found by config_fuzz: a numeric _class_name made nlohmann's value() throw type_error.302.
  json j = read_json(kShared / "golden" / "h3-tiny" / "config.json");
  for (const json& name : {json(5), json::array(), json::object(), json(nullptr), json("Other")}) {
    j["_class_name"] = name;
    EXPECT_EQ(detect_family(j), "h3") << name.dump();  // H3's fields still say what it is
  }
  for (const json& config :
       {json::array({1, 2}), json("h3"), json(3), json::object({{"_class_name", 1}})})
    EXPECT_NO_THROW(detect_family(config)) << config.dump();
}

}  // namespace
}  // namespace avdit::models
