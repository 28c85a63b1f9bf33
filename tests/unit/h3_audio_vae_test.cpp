// The MiniMax-H3 audio VAE decoder (DAC latents, BigVGAN) on the CPU against ../shared/golden/
// vae-h3audio-tiny: the clamped 32 kHz output and every intermediate the README lists at its
// float32 bar; the family recognised from the folder; bad latents refused with the tensor named.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/bigvgan/decoder.h"
#include "models/vae/decoder_factory.h"
#include "ops/context.h"
#include "testing/audio_vae_golden.h"

namespace avdit::models::vae {
namespace {

using testing::audio_rel_err;
using testing::kAudioVaeFp32Bar;
using testing::kH3AudioTiny;

TEST(H3AudioVae, GoldenOutputAndIntermediatesWithinTheReadmeBar) {
  ops::CpuContext ctx;
  const TensorMap in = read_all(kH3AudioTiny / "inputs.safetensors");
  const TensorMap want = read_all(kH3AudioTiny / "outputs.safetensors");
  EXPECT_EQ(detect_family(kH3AudioTiny), Family::H3Audio);
  const auto dec = open_decoder(ctx, kH3AudioTiny);
  EXPECT_EQ(dec->media(), Media::Audio);
  EXPECT_EQ(dec->rate(), 32000.0);
  EXPECT_EQ(dec->output_name(), "waveform");
  testing::AudioCaptureProbe probe;
  Tensor got;
  {
    ProbeScope scope(ctx.observer(), &probe);
    got = dec->decode(in.at("latent"));
  }
  ASSERT_EQ(got.shape(), (Shape{2, 8000}));
  EXPECT_LE(audio_rel_err(got, want.at("waveform")), kAudioVaeFp32Bar);
  std::vector<std::string> names = {"latent_denorm",   "after_dec_in_proj", "after_conv_pre",
                                    "stage0_after_up", "after_conv_post",   "waveform"};
  for (int i = 0; i < 7; ++i) names.push_back("stage" + std::to_string(i) + "_out");
  for (const std::string& name : names) {
    ASSERT_TRUE(probe.got.count(name)) << name;
    EXPECT_EQ(probe.got.at(name).shape(), want.at(name).shape()) << name;
    EXPECT_LE(audio_rel_err(probe.got.at(name), want.at(name)), kAudioVaeFp32Bar) << name;
  }
}

TEST(H3AudioVae, TheTestCanFail) {
  ops::CpuContext ctx;
  const TensorMap in = read_all(kH3AudioTiny / "inputs.safetensors");
  const TensorMap want = read_all(kH3AudioTiny / "outputs.safetensors");
  // Left and right swapped: each row is decoded alone, so the rows swap and miss the golden.
  const Tensor l = in.at("latent").to_f32();
  Tensor swapped = Tensor::empty(l.shape(), DType::F32);
  const int64_t half = l.numel() / 2;
  for (int64_t i = 0; i < half; ++i) {
    swapped.f32()[i] = l.f32()[half + i];
    swapped.f32()[half + i] = l.f32()[i];
  }
  const Tensor got = open_decoder(ctx, kH3AudioTiny)->decode(swapped);
  EXPECT_GT(audio_rel_err(got, want.at("waveform")), 100 * kAudioVaeFp32Bar);
}

TEST(H3AudioVae, ReleaseConfigDecodesTheSame) {
  // The release's FL2VA/audio_vae/config.json (top level, not a golden's wrapper) beside the
  // golden's weights: the same latent statistics, so the same bits.
  const auto release = std::filesystem::path(AVDIT_SHARED_DIR) / "reference-configs" / "h3" /
                       "FL2VA" / "audio_vae" / "config.json";
  if (!std::filesystem::exists(release)) GTEST_SKIP() << release << " absent";
  const auto dir = std::filesystem::temp_directory_path() /
                   ("avdit_h3_audio_release_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(release, dir / "config.json");
  std::filesystem::create_symlink(kH3AudioTiny / "model.safetensors", dir / "model.safetensors");
  ops::CpuContext ctx;
  EXPECT_EQ(detect_family(dir), Family::H3Audio);
  const Tensor latents = read_all(kH3AudioTiny / "inputs.safetensors").at("latent");
  const Tensor a = open_decoder(ctx, kH3AudioTiny)->decode(latents);
  const Tensor b = open_decoder(ctx, dir)->decode(latents);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes()));
}

std::string rejection(const Tensor& latents) {
  return testing::decode_rejection(kH3AudioTiny, latents);
}

TEST(H3AudioVae, BadLatentsAreRefusedByName) {
  EXPECT_NE(rejection(Tensor::zeros({32, 10}, DType::F32)).find("expected [channels, 32, T]"),
            std::string::npos);
  EXPECT_NE(rejection(Tensor::zeros({2, 16, 10}, DType::F32)).find("expected [channels, 32, T]"),
            std::string::npos);
  Tensor inf = Tensor::zeros({2, 32, 4}, DType::F32);
  inf.f32()[9] = std::numeric_limits<float>::infinity();
  const std::string msg = rejection(inf);
  EXPECT_NE(msg.find("latents"), std::string::npos) << msg;
}

}  // namespace
}  // namespace avdit::models::vae
