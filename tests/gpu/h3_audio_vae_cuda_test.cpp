// The MiniMax-H3 audio decoder (BigVGAN) on the GPU against ../shared/golden/vae-h3audio-tiny: the
// same one definition on a CUDA context, float32, the final output at the README's float32 bar (an
// op refusing CUDA fails).
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/decoder_factory.h"
#include "testing/audio_vae_golden.h"

namespace avdit::models::vae {
namespace {

ops::CudaContext& gpu() {
  static ops::CudaContext c;
  return c;
}

TEST(H3AudioVaeCuda, Fp32MatchesTheGolden) {
  const TensorMap in = read_all(testing::kH3AudioTiny / "inputs.safetensors");
  const TensorMap want = read_all(testing::kH3AudioTiny / "outputs.safetensors");
  const auto dec = open_decoder(gpu(), testing::kH3AudioTiny);
  const Tensor got = dec->decode(in.at("latent"));
  const Tensor& ref = want.at("waveform");
  ASSERT_EQ(got.numel(), ref.numel());
  EXPECT_LE(testing::audio_rel_err(got, ref), testing::kAudioVaeFp32Bar);
}

}  // namespace
}  // namespace avdit::models::vae
