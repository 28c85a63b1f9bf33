// The MiniMax-H3 text encoder (Qwen3-VL text path) on the GPU against ../shared/golden/
// te-h3-qwen3vl-tiny: the same one definition on a CUDA context, every case at the README's fp32
// bar with fp32 activations (the portable causal kernel), and at its bf16 bar with bf16
// activations (cuDNN's causal attention) against the reference's own bf16 GPU run.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/cuda/context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/qwen3vl/encoder.h"
#include "testing/qwen3vl_golden.h"

namespace avdit::models::text {
namespace {

using avdit::testing::kQwen3VLTiny;

ops::CudaContext& gpu() {
  static ops::CudaContext c;
  return c;
}

TEST(Qwen3VLTextCuda, Fp32EveryCaseMatchesTheConsumedState) {
  const TensorMap inputs = read_all(kQwen3VLTiny / "inputs.safetensors");
  const TensorMap outputs = read_all(kQwen3VLTiny / "outputs.safetensors");
  const auto enc = open_qwen3vl_text(gpu(), kQwen3VLTiny, testing::kQwen3VLTinySelected);
  for (int c = 0; c < testing::kQwen3VLCases; ++c) {
    const auto ids = testing::case_ids(inputs, c);
    const Tensor got = enc->encode(ids);
    const Tensor& want = outputs.at("case" + std::to_string(c) + ".text_states");
    EXPECT_LE(testing::rel_err(got, want), testing::kQwen3VLFp32Bar)
        << "case " << c << " (T=" << ids.size() << ")";
  }
}

TEST(Qwen3VLTextCuda, Bf16EveryCaseMatchesTheBf16Reference) {
  const TensorMap inputs = read_all(kQwen3VLTiny / "inputs.safetensors");
  const TensorMap outputs = read_all(kQwen3VLTiny / "outputs.safetensors");
  const auto enc =
      open_qwen3vl_text(gpu(), kQwen3VLTiny, testing::kQwen3VLTinySelected, DType::BF16);
  for (int c = 0; c < testing::kQwen3VLCases; ++c) {
    const Tensor got = enc->encode(testing::case_ids(inputs, c));
    const Tensor& want = outputs.at("case" + std::to_string(c) + ".text_states_bf16_gpu");
    EXPECT_LE(testing::rel_err(got, want), 3e-2) << "case " << c;
    EXPECT_GE(avdit::testing::golden_cosine(got, want), 0.9995) << "case " << c;
  }
}

}  // namespace
}  // namespace avdit::models::text
