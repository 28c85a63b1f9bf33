// The Wan2.2 VAE decoder on the GPU against ../shared/golden/vae-wan22-tiny: the same one
// definition on a CUDA context, the video at the README's fp32 bar (an op refusing CUDA fails).
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/wan22/decoder.h"
#include "testing/compare.h"
#include "testing/video_vae_golden.h"

namespace avdit::models::vae {
namespace {

TEST(Wan22VaeCuda, Fp32VideoMatchesTheGolden) {
  static ops::CudaContext gpu;
  const auto& golden = avdit::testing::video_vae_fixture("vae-wan22-tiny");
  const auto& [dir, inputs, outputs] = golden;
  const auto dec = open_wan22_decoder(gpu, dir);
  const Tensor video = dec->decode(inputs.at("latent"));
  EXPECT_LE(avdit::test_util::rel_max_diff(video, outputs.at("video"), "video"),
            avdit::testing::kVideoVaeFp32Bar);
}

}  // namespace
}  // namespace avdit::models::vae
