// MAGI-2 TurboVAED on the GPU against ../shared/golden/vae-turbo-tiny: the same one definition
// on a CUDA context, the sliding-window video at the README's fp32 bar and in bf16 (MAGI-2's
// production mode: cuDNN's convolutions through the replicate pad's copy) at the bf16 bar of
// video_vae_golden.h (an op refusing CUDA fails).
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/turbo/decoder.h"
#include "testing/compare.h"
#include "testing/video_vae_golden.h"

namespace avdit::models::vae {
namespace {

// One context for the whole program (its pool and cuDNN graphs shared by the tests).
ops::CudaContext& context() {
  static ops::CudaContext gpu;
  return gpu;
}

TEST(TurboVaedCuda, Fp32VideoMatchesTheGolden) {
  ops::CudaContext& gpu = context();
  const auto& golden = avdit::testing::video_vae_fixture("vae-turbo-tiny");
  const auto& [dir, inputs, outputs] = golden;
  const auto dec = open_turbo_vaed(gpu, dir);
  const Tensor video = dec->decode(inputs.at("latent"));
  EXPECT_LE(avdit::test_util::rel_max_diff(video, outputs.at("video"), "video"),
            avdit::testing::kVideoVaeFp32Bar);
}

TEST(TurboVaedCuda, Bf16VideoWithinTheBf16Bar) {
  ops::CudaContext& gpu = context();
  const auto& golden = avdit::testing::video_vae_fixture("vae-turbo-tiny");
  const auto& [dir, inputs, outputs] = golden;
  const auto dec = open_turbo_vaed(gpu, dir, DType::BF16);
  const double err = avdit::test_util::rel_max_diff(dec->decode(inputs.at("latent")),
                                                    outputs.at("video"), "video (bf16)");
  EXPECT_LE(err, avdit::testing::kTurboBf16Bar);
  EXPECT_GT(err, 1e-5);
}

}  // namespace
}  // namespace avdit::models::vae
