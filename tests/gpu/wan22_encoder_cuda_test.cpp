// The Wan2.2 VAE encoder on the GPU against ../shared/golden/vae-wan22enc-tiny: the same one
// definition on a CUDA context, both cases' latents at the README's fp32 bar (an op refusing CUDA
// fails).
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

TEST(Wan22EncoderCuda, Fp32LatentsMatchTheGolden) {
  static ops::CudaContext gpu;
  const auto& golden = avdit::testing::video_vae_fixture("vae-wan22enc-tiny");
  const auto& [dir, inputs, outputs] = golden;
  const auto enc = open_wan22_encoder(gpu, dir);
  for (const std::string c : {"case0", "case1"}) {
    const Tensor latent = enc->encode(inputs.at(c + ".video"));
    EXPECT_LE(avdit::test_util::rel_max_diff(latent, outputs.at(c + ".latent"), c + ".latent"),
              avdit::testing::kVideoVaeFp32Bar);
  }
}

}  // namespace
}  // namespace avdit::models::vae::wan22
