// The Wan2.2 VAE encoder on the GPU against ../shared/golden/vae-wan22enc-tiny: the same one
// definition on a CUDA context, both cases' latents at the README's fp32 bar and in bf16 at the
// bf16 bar of video_vae_golden.h (an op refusing CUDA fails).
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/wan22/encoder.h"
#include "testing/compare.h"
#include "testing/video_vae_golden.h"

namespace avdit::models::vae::wan22 {
namespace {

// One context for the whole program (its pool and cuDNN graphs shared by the tests).
ops::CudaContext& context() {
  static ops::CudaContext gpu;
  return gpu;
}

TEST(Wan22EncoderCuda, Fp32LatentsMatchTheGolden) {
  ops::CudaContext& gpu = context();
  const auto& golden = avdit::testing::video_vae_fixture("vae-wan22enc-tiny");
  const auto& [dir, inputs, outputs] = golden;
  const auto enc = open_wan22_encoder(gpu, dir);
  for (const std::string c : {"case0", "case1"}) {
    const Tensor latent = enc->encode(inputs.at(c + ".video"));
    EXPECT_LE(avdit::test_util::rel_max_diff(latent, outputs.at(c + ".latent"), c + ".latent"),
              avdit::testing::kVideoVaeFp32Bar);
  }
}

TEST(Wan22EncoderCuda, Bf16LatentsWithinTheBf16Bar) {
  ops::CudaContext& gpu = context();
  const auto& golden = avdit::testing::video_vae_fixture("vae-wan22enc-tiny");
  const auto& [dir, inputs, outputs] = golden;
  const auto enc = open_wan22_encoder(gpu, dir, DType::BF16);
  for (const std::string c : {"case0", "case1"}) {
    const double err = avdit::test_util::rel_max_diff(
        enc->encode(inputs.at(c + ".video")), outputs.at(c + ".latent"), c + ".latent (bf16)");
    EXPECT_LE(err, avdit::testing::kWan22EncoderBf16Bar) << c;
    EXPECT_GT(err, 1e-5) << c;
  }
}

}  // namespace
}  // namespace avdit::models::vae::wan22
