// The Stable Audio Open Oobleck decoder (MAGI-2 audio) on the GPU against
// ../shared/golden/vae-sa-audio-tiny: the same one definition on a CUDA context, float32, the final
// output at the README's float32 bar (an op refusing CUDA fails).
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

TEST(OobleckCuda, Fp32MatchesTheGolden) {
  const TensorMap in = read_all(testing::kSaAudioTiny / "inputs.safetensors");
  const TensorMap want = read_all(testing::kSaAudioTiny / "outputs.safetensors");
  const auto dec = open_decoder(gpu(), testing::kSaAudioTiny);
  const Tensor got = dec->decode(in.at("latent_tc"));
  const Tensor& ref = want.at("waveform_44k");
  ASSERT_EQ(got.numel(), ref.numel());
  // The golden's waveform_44k is time-major [samples, channels]; decode gives [channels, samples].
  const int64_t C = got.size(0), S = got.size(1);
  Tensor t = Tensor::empty({S, C}, DType::F32);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t s = 0; s < S; ++s) t.f32()[s * C + c] = got.f32()[c * S + s];
  EXPECT_LE(testing::audio_rel_err(t, ref), testing::kAudioVaeFp32Bar);
}

}  // namespace
}  // namespace avdit::models::vae
