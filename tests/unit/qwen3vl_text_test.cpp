// The MiniMax-H3 text encoder (Qwen3-VL text path) on the CPU against ../shared/golden/
// te-h3-qwen3vl-tiny: every case's consumed state and every hidden state at the README's fp32 bar,
// layer 0's intermediates and the rotary tables, other layer counts (held out: the golden keeps
// the states of all 6 layers), and the checkpoint checks (a missing needed layer is named; a
// checkpoint without the unused layers loads).
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/qwen3vl/encoder.h"
#include "models/text/text_encoder.h"
#include "ops/context.h"
#include "testing/qwen3vl_golden.h"

namespace avdit::models::text {
namespace {

using avdit::testing::kQwen3VLTiny;
namespace fs = std::filesystem;

struct Golden {
  TensorMap inputs = read_all(kQwen3VLTiny / "inputs.safetensors");
  TensorMap outputs = read_all(kQwen3VLTiny / "outputs.safetensors");
};
const Golden& golden() {
  static const Golden g;
  return g;
}

TEST(Qwen3VLText, EveryCaseMatchesTheConsumedState) {
  ops::CpuContext ctx;
  const auto enc = open_qwen3vl_text(ctx, kQwen3VLTiny, testing::kQwen3VLTinySelected);
  EXPECT_EQ(enc->hidden_size(), 64);
  EXPECT_NE(enc->describe().find("4 of 6 layers"), std::string::npos) << enc->describe();
  for (int c = 0; c < testing::kQwen3VLCases; ++c) {
    const auto ids = testing::case_ids(golden().inputs, c);
    const Tensor got = enc->encode(ids);
    ASSERT_EQ(got.shape(), (Shape{static_cast<int64_t>(ids.size()), 64})) << "case " << c;
    const Tensor& want = golden().outputs.at("case" + std::to_string(c) + ".text_states");
    const double err = testing::rel_err(got, want);
    EXPECT_LE(err, testing::kQwen3VLFp32Bar) << "case " << c << " (T=" << ids.size() << ")";
    // The bar separates the consumed state from its neighbours: layer 3's output (one layer
    // short) and the post-norm state (the pitfall the README names) are far outside it.
    EXPECT_GT(testing::rel_err(got, testing::hidden_state(golden().outputs, c, 3)), 1e-2);
    EXPECT_GT(
        testing::rel_err(got, golden().outputs.at("case" + std::to_string(c) + ".final_norm")),
        1e-2);
  }
}

TEST(Qwen3VLText, EveryHiddenStateOfTheLongestCase) {
  ops::CpuContext ctx;
  const auto enc = open_qwen3vl_text(ctx, kQwen3VLTiny, 6);  // all layers: all hidden states
  testing::CaptureProbe probe;
  const int c = testing::kQwen3VLCases - 1;
  {
    ProbeScope scope(ctx.observer(), &probe);
    enc->encode(testing::case_ids(golden().inputs, c));
  }
  EXPECT_LE(testing::rel_err(probe.got.at("embed"), testing::hidden_state(golden().outputs, c, 0)),
            0.0);  // the embedding rows are exact
  for (int64_t j = 1; j <= 6; ++j)
    EXPECT_LE(testing::rel_err(probe.got.at("layer" + std::to_string(j - 1) + ".out"),
                               testing::hidden_state(golden().outputs, c, j)),
              testing::kQwen3VLFp32Bar)
        << "hidden_states[" << j << "]";
}

TEST(Qwen3VLText, LayerZeroIntermediatesAndRope) {
  ops::CpuContext ctx;
  const auto enc = open_qwen3vl_text(ctx, kQwen3VLTiny, 1);
  const TensorMap want = read_all(kQwen3VLTiny / "intermediates.safetensors");
  testing::CaptureProbe probe;
  {
    ProbeScope scope(ctx.observer(), &probe);
    enc->encode(testing::case_ids(golden().inputs, testing::kQwen3VLCases - 1));
  }
  ASSERT_EQ(want.size(), 8u);
  for (const auto& [name, ref] : want) {
    ASSERT_TRUE(probe.got.count(name)) << "no point named " << name;
    EXPECT_LE(testing::rel_err(probe.got.at(name), ref), testing::kQwen3VLFp32Bar) << name;
  }
}

// Held out: the fixture's K is 4, yet its hidden states give the answer for every other K.
TEST(Qwen3VLText, OtherLayerCountsMatchTheirHiddenStates) {
  ops::CpuContext ctx;
  for (int k : {1, 2, 6}) {
    const auto enc = open_qwen3vl_text(ctx, kQwen3VLTiny, k);
    for (int c : {1, 4}) {
      const Tensor got = enc->encode(testing::case_ids(golden().inputs, c));
      EXPECT_LE(testing::rel_err(got, testing::hidden_state(golden().outputs, c, k)),
                testing::kQwen3VLFp32Bar)
          << "K=" << k << " case " << c;
    }
  }
}

// bf16 activations (the pipelines' precision) against the reference run in bf16 on the GPU, at the
// README's bf16 bar: 3e-2 of max |ref| and cosine >= 0.9995.
TEST(Qwen3VLText, Bf16ActivationsMatchTheBf16Reference) {
  ops::CpuContext ctx;
  const auto enc = open_qwen3vl_text(ctx, kQwen3VLTiny, testing::kQwen3VLTinySelected, DType::BF16);
  for (int c = 0; c < testing::kQwen3VLCases; ++c) {
    const Tensor got = enc->encode(testing::case_ids(golden().inputs, c));
    const Tensor& want = golden().outputs.at("case" + std::to_string(c) + ".text_states_bf16_gpu");
    EXPECT_LE(testing::rel_err(got, want), 3e-2) << "case " << c;
    EXPECT_GE(avdit::testing::golden_cosine(got, want), 0.9995) << "case " << c;
  }
}

TEST(Qwen3VLTextConfig, ReadsBothRopeSchemasAndRefusesOtherModels) {
  using qwen3vl::Qwen3VLTextConfig;
  const nlohmann::json legacy = read_json(kQwen3VLTiny / "config.json");
  const Qwen3VLTextConfig c = Qwen3VLTextConfig::from_json(legacy);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.mrope_section, (std::array<int64_t, 3>{6, 5, 5}));
  // transformers 5's schema: theta and the section inside rope_parameters.
  nlohmann::json modern = legacy;
  auto& t = modern["text_config"];
  t["rope_parameters"] = t["rope_scaling"];
  t["rope_parameters"]["rope_theta"] = 1e6;
  t.erase("rope_scaling");
  t.erase("rope_theta");
  EXPECT_EQ(Qwen3VLTextConfig::from_json(modern).rope_theta, 1e6);
  const auto refused = [&](const char* key, const nlohmann::json& value, const char* named) {
    nlohmann::json j = legacy;
    if (value.is_null())
      j["text_config"].erase(key);
    else
      j["text_config"][key] = value;
    try {
      Qwen3VLTextConfig::from_json(j);
      ADD_FAILURE() << key << " = " << value.dump() << " accepted";
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  refused("hidden_act", "gelu", "hidden_act");
  refused("attention_bias", true, "attention_bias");
  refused("num_key_value_heads", 3, "num_key_value_heads");
  refused("hidden_size", nullptr, "hidden_size");
  refused("head_dim", 30, "mrope_section");
  EXPECT_THROW(Qwen3VLTextConfig::from_json(nlohmann::json{{"model_type", "qwen3_vl"}}), BadInput);
}

TEST(Qwen3VLText, LayerCountOutsideTheConfigIsNamed) {
  ops::CpuContext ctx;
  for (int k : {0, 7, 50}) {
    try {
      open_qwen3vl_text(ctx, kQwen3VLTiny, k);
      ADD_FAILURE() << "K=" << k << " loaded";
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find("num_hidden_layers"), std::string::npos) << e.what();
    }
  }
}

TEST(Qwen3VLText, BadIdsAreRefused) {
  ops::CpuContext ctx;
  const auto enc = open_qwen3vl_text(ctx, kQwen3VLTiny, testing::kQwen3VLTinySelected);
  EXPECT_THROW(enc->encode({}), BadInput);
  EXPECT_THROW(enc->encode({1, 2048}), BadInput);
  EXPECT_THROW(enc->encode({-1}), BadInput);
}

// A copy of the tiny checkpoint without the tensors `drop` selects, in a fresh folder.
fs::path copy_without(const std::string& tag, const std::function<bool(const std::string&)>& drop,
                      const std::string& model_type = "") {
  const fs::path dir =
      fs::temp_directory_path() / ("avdit_qwen3vl_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Checkpoint ckpt = Checkpoint::open(kQwen3VLTiny);
  std::vector<std::pair<std::string, Tensor>> kept;
  for (const std::string& n : ckpt.names())
    if (!drop(n)) kept.emplace_back(n, ckpt.get(n));
  write_safetensors(dir / "model.safetensors", kept);
  nlohmann::json config = read_json(kQwen3VLTiny / "config.json");
  if (!model_type.empty()) config["model_type"] = model_type;
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir;
}

bool in_layer_at_least(const std::string& name, int k) {
  const std::string p = "model.language_model.layers.";
  if (name.rfind(p, 0) != 0) return false;
  return std::stoi(name.substr(p.size())) >= k;
}

// The tensors the fixture's 4 layers read.
bool is_needed_by_tiny(const std::string& name) {
  return qwen3vl::is_needed(name, testing::kQwen3VLTinySelected);
}

TEST(Qwen3VLText, NeededTensorsAreTheEmbeddingAndTheSelectedLayers) {
  EXPECT_TRUE(is_needed_by_tiny("model.language_model.embed_tokens.weight"));
  EXPECT_TRUE(is_needed_by_tiny("model.language_model.layers.3.mlp.up_proj.weight"));
  EXPECT_FALSE(is_needed_by_tiny("model.language_model.layers.4.mlp.up_proj.weight"));
  EXPECT_FALSE(is_needed_by_tiny("model.language_model.layers.30.mlp.up_proj.weight"));
  EXPECT_FALSE(is_needed_by_tiny("model.language_model.norm.weight"));
  EXPECT_FALSE(is_needed_by_tiny("lm_head.weight"));
  EXPECT_FALSE(is_needed_by_tiny("model.visual.blocks.0.attn.qkv.weight"));
  EXPECT_FALSE(is_needed_by_tiny("model.language_model.layers.x.mlp.up_proj.weight"));
}

TEST(Qwen3VLText, MissingNeededLayerIsNamed) {
  const std::string missing = "model.language_model.layers.3.mlp.up_proj.weight";
  const fs::path dir = copy_without("missing", [&](const std::string& n) { return n == missing; });
  ops::CpuContext ctx;
  try {
    open_qwen3vl_text(ctx, dir, testing::kQwen3VLTinySelected);
    ADD_FAILURE() << "a checkpoint without " << missing << " loaded";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos) << e.what();
  }
  // Three layers do not need it.
  EXPECT_NO_THROW(open_qwen3vl_text(ctx, dir, 3));
  fs::remove_all(dir);
}

TEST(Qwen3VLText, UnusedLayersNormAndHeadAreNeverRead) {
  const fs::path dir = copy_without("trimmed", [](const std::string& n) {
    return in_layer_at_least(n, testing::kQwen3VLTinySelected) ||
           n == "model.language_model.norm.weight" || n == "lm_head.weight";
  });
  ops::CpuContext ctx;
  const auto enc = open_qwen3vl_text(ctx, dir, testing::kQwen3VLTinySelected);
  const Tensor got = enc->encode(testing::case_ids(golden().inputs, 2));
  EXPECT_LE(testing::rel_err(got, golden().outputs.at("case2.text_states")),
            testing::kQwen3VLFp32Bar);
  fs::remove_all(dir);
}

// The release is sharded: a shard holding only layers >= K is never opened (here it is deleted),
// while a missing shard that a selected layer needs is named.
TEST(Qwen3VLText, ShardsOfUnusedLayersAreNeverOpened) {
  const fs::path dir =
      fs::temp_directory_path() / ("avdit_qwen3vl_shards_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kQwen3VLTiny / "config.json", dir / "config.json");
  const Checkpoint ckpt = Checkpoint::open(kQwen3VLTiny);
  std::vector<std::pair<std::string, Tensor>> early, late;
  nlohmann::json map = nlohmann::json::object();
  for (const std::string& n : ckpt.names()) {
    const bool is_early = is_needed_by_tiny(n);
    (is_early ? early : late).emplace_back(n, ckpt.get(n));
    map[n] = is_early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_safetensors(dir / "model-00001-of-00002.safetensors", early);
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  // Shard 2 (layers 4 and 5, norm, lm_head) is absent.
  ops::CpuContext ctx;
  const auto enc = open_qwen3vl_text(ctx, dir, testing::kQwen3VLTinySelected);
  EXPECT_LE(testing::rel_err(enc->encode(testing::case_ids(golden().inputs, 3)),
                             golden().outputs.at("case3.text_states")),
            testing::kQwen3VLFp32Bar);
  try {
    open_qwen3vl_text(ctx, dir, 5);
    ADD_FAILURE() << "layer 4 loaded from a missing shard";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(TextEncoderFactory, PicksTheFamilyFromModelType) {
  ops::CpuContext ctx;
  const auto enc = open_text_encoder(ctx, kQwen3VLTiny, {testing::kQwen3VLTinySelected});
  const Tensor got = enc->encode(testing::case_ids(golden().inputs, 1));
  EXPECT_LE(testing::rel_err(got, golden().outputs.at("case1.text_states")),
            testing::kQwen3VLFp32Bar);
  // Without a layer count the pipeline's 50 applies, which this 6-layer fixture cannot give.
  EXPECT_THROW(open_text_encoder(ctx, kQwen3VLTiny), BadInput);

  const auto keep = [](const std::string&) { return false; };
  // qwen3_5 opens MAGI-2's encoder: the consumed state (hidden_states[-3]) of its golden within
  // that README's float32 bar (1e-4 of max |ref|), and the same state when the layer count is
  // given (8 layers, all but the last two).
  const fs::path magi2 = fs::path(AVDIT_SHARED_DIR) / "golden" / "te-magi2-qwen35-tiny";
  EXPECT_EQ(text_encoder_family(magi2), "qwen3_5");
  EXPECT_EQ(text_encoder_family(kQwen3VLTiny), "qwen3_vl");
  const TensorMap m_in = read_all(magi2 / "inputs.safetensors"),
                  m_out = read_all(magi2 / "outputs.safetensors");
  for (int layers : {0, 6}) {
    const auto m = open_text_encoder(ctx, magi2, {layers});
    const Tensor states = m->encode(testing::case_ids(m_in, 2));
    EXPECT_LE(testing::rel_err(states, m_out.at("case2.text_states")), 1e-4) << layers;
  }
  EXPECT_THROW(open_text_encoder(ctx, magi2, {8}), BadInput);  // nothing left to skip
  EXPECT_THROW(open_text_encoder(ctx, magi2, {0, DType::F16}), BadInput);  // F32 or BF16 only
  const fs::path qwen35 = copy_without("qwen35", keep, "qwen3_5");
  EXPECT_THROW(open_text_encoder(ctx, qwen35), BadInput);  // no tensors
  const fs::path other = copy_without("other", keep, "llama");
  EXPECT_THROW(open_text_encoder(ctx, other), BadInput);
  EXPECT_THROW(open_text_encoder(ctx, fs::temp_directory_path() / "avdit_no_such_encoder"),
               BadInput);
  fs::remove_all(qwen35);
  fs::remove_all(other);
}

}  // namespace
}  // namespace avdit::models::text
