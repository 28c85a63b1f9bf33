// The MAGI-2 text encoder (Qwen3.5 hybrid) on the GPU against ../shared/golden/
// te-magi2-qwen35-tiny: the same one definition on a CUDA context, every case's consumed state and
// every hidden state at the README's fp32 bar (1e-4 of max |ref|), the bf16 mode at its bf16 bar,
// and the DeltaNet recurrence alone on the reference kernel's own inputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/qwen35/encoder.h"
#include "ops/gated_delta_rule.h"
#include "testing/qwen35_golden.h"

namespace avdit::models::text {
namespace {

const std::filesystem::path& kTiny = testing::kQwen35Tiny;
constexpr double kBar = testing::kQwen35Fp32Bar;
constexpr int kCases = testing::kQwen35Cases;

ops::CudaContext& gpu() {
  static ops::CudaContext c;
  return c;
}

class Qwen35TextCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    inputs_ = read_all(kTiny / "inputs.safetensors");
    outputs_ = read_all(kTiny / "outputs.safetensors");
  }
  TensorMap inputs_, outputs_;
};

TEST_F(Qwen35TextCuda, Fp32EveryCaseMatchesTheConsumedState) {
  const auto enc = open_qwen35_text(gpu(), kTiny);
  for (int c = 0; c < kCases; ++c) {
    const auto ids = testing::case_ids(inputs_, c);
    const Tensor got = enc->encode(ids);
    const Tensor& want = outputs_.at("case" + std::to_string(c) + ".text_states");
    ASSERT_EQ(got.shape(), (Shape{want.size(1), 64})) << "case " << c;
    EXPECT_LE(testing::golden_rel_err(got, want), kBar)
        << "case " << c << " (T=" << ids.size() << ")";
  }
}

// BF16 mode on the GPU (bf16 tensor-core GEMMs): the README's bf16 bar, and really rounded.
TEST_F(Qwen35TextCuda, Bf16GemmInputsEveryCase) {
  const auto enc = open_qwen35_text(gpu(), kTiny, 2, DType::BF16);
  for (int c = 0; c < kCases; ++c) {
    const Tensor got = enc->encode(testing::case_ids(inputs_, c));
    const Tensor& want = outputs_.at("case" + std::to_string(c) + ".text_states");
    ASSERT_EQ(got.shape(), (Shape{want.size(1), 64})) << "case " << c;
    EXPECT_GE(testing::golden_cosine(got, want), testing::kQwen35Bf16Cosine) << "case " << c;
    EXPECT_GT(testing::golden_rel_err(got, want), kBar) << "case " << c;
  }
}

// One layer less skipped exposes hidden_states[7]; the embedding and layers 0..6 are points.
TEST_F(Qwen35TextCuda, Fp32EveryHiddenStateOfEveryCase) {
  const auto enc = open_qwen35_text(gpu(), kTiny, /*skip_layers=*/1);
  for (int c = 0; c < kCases; ++c) {
    testing::CapturePoints keep;
    {
      ProbeScope scope(gpu().observer(), &keep);
      enc->encode(testing::case_ids(inputs_, c));
    }
    const Tensor& hs = outputs_.at("case" + std::to_string(c) + ".hidden_states");
    for (int64_t j = 0; j <= 7; ++j) {
      const std::string point = j == 0 ? "embed" : "layer" + std::to_string(j - 1) + ".out";
      ASSERT_TRUE(keep.got.count(point)) << point;
      EXPECT_LE(testing::golden_rel_err(keep.got.at(point), hs.select(j)), kBar)
          << "case " << c << " hidden_states[" << j << "]";
    }
  }
}

// The recurrence alone, fed the reference kernel's inputs (already expanded to the value heads).
TEST_F(Qwen35TextCuda, DeltaRuleOnTheReferenceKernelInputs) {
  const TensorMap inter = read_all(kTiny / "intermediates.safetensors");
  auto get = [&](const char* n) {
    const Tensor& t = inter.at(std::string("layer0.linear_attn.delta_rule.") + n);
    Shape s(t.shape().begin() + 1, t.shape().end());  // drop the batch of 1
    return gpu().upload(t.reshape(s));
  };
  const Tensor out =
      ops::gated_delta_rule(gpu(), get("query"), get("key"), get("value"), get("g"), get("beta"));
  const Tensor& want = inter.at("layer0.linear_attn.delta_rule.out");
  EXPECT_LE(testing::golden_rel_err(gpu().download(out), want), 2e-5);
}

}  // namespace
}  // namespace avdit::models::text
