// Parity of the MAGI-2 preview forward (CPU, float32) with the golden fixture
// ../shared/golden/magi2-tiny: every output and recorded intermediate within a fraction of its max
// |value|, routing index sets identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "models/magi2/model.h"
#include "models/magi2/packing.h"
#include "models/magi2/weights.h"
#include "ops/context.h"
#include "testing/compare.h"

namespace avdit::models::magi2 {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "magi2-tiny";

// The CPU oracle's forward from unpacked inputs (a fresh model on the checkpoint).
TensorMap cpu_forward(const Checkpoint& ckpt, const TensorMap& inputs, bool dump,
                      const LoadOptions& load = {}) {
  ops::CpuContext ctx;
  const Magi2Model model(ctx, ckpt, DType::F32, load);
  return forward_from_inputs(model, inputs, dump);
}

struct Diff {
  double max_abs = 0, max_ref = 0;
  double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

Diff compare(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to_f32(), w = want.to_f32();
  Diff d;
  for (int64_t i = 0; i < w.numel(); ++i) {
    d.max_abs = std::max(d.max_abs, static_cast<double>(std::fabs(g.f32()[i] - w.f32()[i])));
    d.max_ref = std::max(d.max_ref, static_cast<double>(std::fabs(w.f32()[i])));
  }
  return d;
}

class Magi2Parity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(std::filesystem::exists(kFixture / "model.safetensors")) << kFixture;
  }

  // Checks every tensor of the fixture that `got` has; returns the number of tensors compared.
  int check_all(const TensorMap& got, double tol, const char* label) {
    int compared = 0;
    double worst = 0;
    std::map<std::string, double> worst_by_class;
    std::string worst_name;
    for (const char* file : {"outputs.safetensors", "intermediates.safetensors"}) {
      const TensorMap want = read_all(kFixture / file);
      for (const auto& [name, ref] : want) {
        if (name.rfind("bf16_reference.", 0) == 0)
          continue;  // informational (bf16 production dtypes)
        if (name == "modality_group_sizes") {
          auto it = got.find(name);
          EXPECT_NE(it, got.end());
          if (it != got.end()) {
            for (int m = 0; m < 3; ++m)
              EXPECT_EQ(it->second.data<int32_t>()[m], ref.data<int32_t>()[m]);
          }
          continue;
        }
        auto it = got.find(name);
        EXPECT_NE(it, got.end()) << label << ": avdit did not produce " << name;
        if (it == got.end()) continue;
        EXPECT_EQ(it->second.shape(), ref.shape()) << label << ": " << name;
        if (it->second.shape() != ref.shape()) continue;
        ++compared;
        if (name.find("topk_indices") != std::string::npos) {
          EXPECT_EQ(test_util::routing_flips(it->second, ref), 0) << label << ": " << name;
          continue;
        }
        Diff d;
        if (name.find("topk_weights") != std::string::npos) {
          const std::string base = name.substr(0, name.size() - std::string("topk_weights").size());
          const test_util::MaxDiff w = test_util::topk_weight_diff(
              got.at(base + "topk_indices"), it->second, want.at(base + "topk_indices"), ref);
          d.max_abs = w.max_abs;
          d.max_ref = w.max_ref;
        } else {
          d = compare(it->second, ref);
        }
        EXPECT_LE(d.rel(), tol) << label << ": " << name << " max|diff| " << d.max_abs
                                << " max|ref| " << d.max_ref;
        // Worst relative error per tensor class (the name without "layers.{i}.").
        std::string cls = name;
        if (cls.rfind("layers.", 0) == 0) cls = cls.substr(cls.find('.', 7) + 1);
        worst_by_class[cls] = std::max(worst_by_class[cls], d.rel());
        if (d.rel() > worst) {
          worst = d.rel();
          worst_name = name;
        }
      }
    }
    for (const auto& [cls, rel] : worst_by_class)
      std::printf("[%s]   %-22s %.3g\n", label, cls.c_str(), rel);
    std::printf("[%s] compared %d tensors; worst %s at %.3g of max\n", label, compared,
                worst_name.c_str(), worst);
    return compared;
  }
};

TEST_F(Magi2Parity, PackingMatchesDataProxy) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap inputs = read_all(kFixture / "inputs.safetensors");
  const TensorMap got = cpu_forward(ckpt, inputs, /*dump=*/true);
  for (const char* name : {"x", "coords_mapping", "per_token_t"}) {
    const Diff d = compare(got.at(name), inputs.at(name));
    EXPECT_EQ(got.at(name).shape(), inputs.at(name).shape()) << name;
    EXPECT_EQ(d.max_abs, 0.0) << name;
  }
  for (const char* name : {"modality_mapping", "cu_seqlens_q"}) {
    const Tensor g = got.at(name).to(DType::I64), w = inputs.at(name).to(DType::I64);
    ASSERT_EQ(g.shape(), w.shape()) << name;
    for (int64_t i = 0; i < w.numel(); ++i)
      EXPECT_EQ(g.data<int64_t>()[i], w.data<int64_t>()[i]) << name << "[" << i << "]";
  }
  // Our own time embedding (CPU frequency table) vs the GPU's: ~3e-5 expected (README).
  const Diff t = compare(got.at("time_token_sequence"), inputs.at("time_token_sequence"));
  std::printf("time embedding max|diff| %.3g\n", t.max_abs);
  EXPECT_LE(t.max_abs, 1e-4);
}

// The acceptance run: avdit packs and embeds time itself.
TEST_F(Magi2Parity, ForwardOwnTimeEmbedding) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap inputs = read_all(kFixture / "inputs.safetensors");
  const TensorMap got = cpu_forward(ckpt, inputs, /*dump=*/true);
  EXPECT_GE(check_all(got, 1e-4, "own time embedding"), 40);
}

// The stored time_token_sequence fed in: the tighter bar (reference on CPU lands at ~1e-5).
TEST_F(Magi2Parity, ForwardStoredTimeEmbedding) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap inputs = read_all(kFixture / "inputs.safetensors");
  ops::CpuContext ctx;
  const Magi2Model model(ctx, ckpt);
  const Magi2Config& config = model.config();
  PackedSequence packed = pack_inputs(config, inputs);
  packed.time_tokens = inputs.at("time_token_sequence");
  TensorMap got = forward_packed(model, packed, /*dump=*/true);
  Tensor video, audio;
  unpack_outputs(config, packed, got.at("model_output"), video, audio);
  got["video_velocity"] = video;
  got["audio_velocity"] = audio;
  EXPECT_GE(check_all(got, 5e-5, "stored time embedding"), 40);
}

// Weights stay memory-mapped: the loaded matrices are read-only views of the file.
TEST_F(Magi2Parity, WeightsAreMapped) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext ctx;
  const Magi2Weights w = load_weights(ctx, ckpt, config_from_checkpoint(ckpt), DType::F32);
  EXPECT_TRUE(w.layers[0].attention.linear_qkv.readonly());
  EXPECT_EQ(w.layers[0].attention.linear_qkv.dtype(), DType::BF16);
  ASSERT_EQ(w.layers[2].moe_mlp.experts.gate.size(), 1u);  // every head's rows, one view
  EXPECT_TRUE(w.layers[2].moe_mlp.experts.gate[0].readonly());
  EXPECT_EQ(w.layers[2].moe_mlp.experts.gate[0].raw(),
            ckpt.get("block.layers.2.mlp.moe_mlp.W_gate").raw());
}

// Expert parallelism: partial expert ranges sum to the full routed-expert output.
TEST_F(Magi2Parity, ExpertRangesSumToFull) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap inputs = read_all(kFixture / "inputs.safetensors");
  const Magi2Config config = config_from_checkpoint(ckpt);
  const TensorMap full = cpu_forward(ckpt, inputs, /*dump=*/true);
  const int64_t E = config.moe.num_experts;
  LoadOptions lo, hi;
  lo.expert_range = std::make_pair<int64_t, int64_t>(0, E / 2);
  hi.expert_range = std::make_pair<int64_t, int64_t>(E / 2, int64_t{E});
  const TensorMap a = cpu_forward(ckpt, inputs, /*dump=*/true, lo);
  const TensorMap b = cpu_forward(ckpt, inputs, /*dump=*/true, hi);
  // Layer 2 is the first MoE layer: its input is identical, so its expert outputs must add up.
  const Tensor& f = full.at("layers.2.moe.experts_out");
  const Tensor& x = a.at("layers.2.moe.experts_out");
  const Tensor& y = b.at("layers.2.moe.experts_out");
  double worst = 0;
  for (int64_t i = 0; i < f.numel(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(x.f32()[i] + y.f32()[i] - f.f32()[i])));
  EXPECT_LE(worst, 1e-5);
}

TEST_F(Magi2Parity, BiasEmaReplacesBias) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  ops::CpuContext ctx;
  const Magi2Weights w = load_weights(ctx, ckpt, config_from_checkpoint(ckpt), DType::F32);
  const Tensor ema = ckpt.get("block.layers.2.mlp.moe_mlp.router.expert_bias_ema");
  for (int64_t i = 0; i < ema.numel(); ++i)
    EXPECT_EQ(w.layers[2].moe_mlp.expert_bias.f32()[i], ema.f32()[i]);
}

TEST_F(Magi2Parity, WrongInputWidthIsBadInput) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  TensorMap inputs = read_all(kFixture / "inputs.safetensors");
  inputs["txt_feat"] = Tensor::zeros({2, 10, 32}, DType::F32);
  try {
    cpu_forward(ckpt, inputs, false);
    FAIL() << "expected BadInput";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("txt_feat"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), 2);
  }
}

// A copy of the fixture checkpoint with one tensor removed or the config changed must fail with
// BadInput naming the tensor and the file.
class Magi2BadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("avdit_magi2_bad_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& drop, const nlohmann::json& config) {
    std::vector<std::pair<std::string, Tensor>> kept;
    for (const auto& [name, t] : read_all(kFixture / "model.safetensors"))
      if (name != drop) kept.emplace_back(name, t);
    write_safetensors(dir_ / "model.safetensors", kept);
    std::ofstream(dir_ / "config.json") << config.dump(2);
  }
  std::string forward_error() {
    try {
      cpu_forward(Checkpoint::open(dir_), read_all(kFixture / "inputs.safetensors"), false);
    } catch (const BadInput& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(Magi2BadCheckpoint, MissingTensorIsNamed) {
  write("block.layers.3.mlp.moe_mlp.W_up", read_json(kFixture / "config.json"));
  const std::string err = forward_error();
  std::printf("error: %s\n", err.c_str());
  EXPECT_NE(err.find("block.layers.3.mlp.moe_mlp.W_up"), std::string::npos) << err;
}

TEST_F(Magi2BadCheckpoint, ConfigContradictingCheckpointIsNamed) {
  nlohmann::json cfg = read_json(kFixture / "config.json");
  cfg["arch_config"]["moe_config"]["num_experts"] = 8;
  write("", cfg);
  const std::string err = forward_error();
  std::printf("error: %s\n", err.c_str());
  EXPECT_NE(err.find("block.layers.2.mlp.moe_mlp."), std::string::npos) << err;
  EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
}

}  // namespace
}  // namespace avdit::models::magi2
