// The Stable Audio Open Oobleck decoder as MAGI-2 runs it, on the CPU against ../shared/golden/
// vae-sa-audio-tiny: the 44.1 kHz output, the decoder's own waveform and every intermediate the
// README lists, at its float32 bar; the family recognised from the folder; bad latents refused
// with the tensor named.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/decoder_factory.h"
#include "models/vae/oobleck/decoder.h"
#include "ops/context.h"
#include "testing/audio_vae_golden.h"

namespace avdit::models::vae {
namespace {

using testing::audio_rel_err;
using testing::kAudioVaeFp32Bar;
using testing::kSaAudioTiny;

// [C, S] -> [S, C]: the golden's waveform_44k is time-major.
Tensor transpose(const Tensor& t) {
  const int64_t C = t.size(0), S = t.size(1);
  Tensor out = Tensor::empty({S, C}, DType::F32);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t s = 0; s < S; ++s) out.f32()[s * C + c] = t.f32()[c * S + s];
  return out;
}

TEST(Oobleck, GoldenOutputAndIntermediatesWithinTheReadmeBar) {
  ops::CpuContext ctx;
  const TensorMap in = read_all(kSaAudioTiny / "inputs.safetensors");
  const TensorMap want = read_all(kSaAudioTiny / "outputs.safetensors");
  const auto dec = open_decoder(ctx, kSaAudioTiny);
  EXPECT_EQ(dec->media(), Media::Audio);
  EXPECT_EQ(dec->rate(), 44100.0);
  EXPECT_EQ(dec->output_name(), "waveform_44k");
  testing::AudioCaptureProbe probe;
  Tensor got;
  {
    ProbeScope scope(ctx.observer(), &probe);
    got = dec->decode(in.at("latent_tc"));
  }
  ASSERT_EQ(got.shape(), (Shape{2, 21168}));
  EXPECT_LE(audio_rel_err(transpose(got), want.at("waveform_44k")), kAudioVaeFp32Bar);
  for (const char* name : {"after_conv_in", "after_block1", "after_block2", "after_block3",
                           "after_block4", "after_block5", "waveform"}) {
    ASSERT_TRUE(probe.got.count(name)) << name;
    EXPECT_EQ(probe.got.at(name).shape(), want.at(name).shape()) << name;
    EXPECT_LE(audio_rel_err(probe.got.at(name), want.at(name)), kAudioVaeFp32Bar) << name;
  }
}

TEST(Oobleck, TheTestCanFail) {
  // A decode of other latents is far from the golden: the bar separates right from wrong.
  ops::CpuContext ctx;
  const TensorMap in = read_all(kSaAudioTiny / "inputs.safetensors");
  const TensorMap want = read_all(kSaAudioTiny / "outputs.safetensors");
  Tensor shifted = in.at("latent_tc").to_f32().clone();
  shifted.f32()[5] += 0.5f;
  const Tensor got = open_decoder(ctx, kSaAudioTiny)->decode(shifted);
  EXPECT_GT(audio_rel_err(transpose(got), want.at("waveform_44k")), 100 * kAudioVaeFp32Bar);
}

TEST(Oobleck, FamilyAndStretch) {
  ops::CpuContext ctx;
  EXPECT_EQ(detect_family(kSaAudioTiny), Family::Oobleck);
  const oobleck::OobleckDecoder dec(ctx, kSaAudioTiny);
  EXPECT_EQ(dec.config().hop(), 2048);
  // MAGI-2: int(N * 441 / 512); ten seconds of video = 250 latents.
  EXPECT_EQ(dec.stretched_length(2048 * 250), 441000);
  EXPECT_EQ(dec.stretched_length(1000), 861);
}

TEST(Oobleck, ReleaseLayoutDecodesTheSame) {
  // The release folder: model_config.json beside one checkpoint whose autoencoder sits under
  // "pretransform.model." (with the DiT's tensors around it, which the decoder never reads).
  const auto dir = std::filesystem::temp_directory_path() /
                   ("avdit_oobleck_release_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  TensorMap renamed;
  for (const auto& [name, t] : read_all(kSaAudioTiny / "model.safetensors"))
    renamed["pretransform.model." + name] = t;
  renamed["model.model.transformer.proj_in.weight"] = Tensor::zeros({3, 5}, DType::F32);
  write_safetensors(dir / "model.safetensors", renamed);
  std::ifstream in(kSaAudioTiny / "config.json");
  const nlohmann::json wrapper = nlohmann::json::parse(in);
  std::ofstream(dir / "model_config.json")
      << wrapper.at("model_config.json (as the loader reads it)");
  ops::CpuContext ctx;
  const Tensor latents = read_all(kSaAudioTiny / "inputs.safetensors").at("latent_tc");
  const Tensor a = open_decoder(ctx, kSaAudioTiny)->decode(latents);
  const Tensor b = open_decoder(ctx, dir)->decode(latents);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes()));
}

std::string rejection(const Tensor& latents) {
  return testing::decode_rejection(kSaAudioTiny, latents);
}

TEST(Oobleck, BadLatentsAreRefusedByName) {
  EXPECT_NE(rejection(Tensor::zeros({1, 12, 64}, DType::F32)).find("expected [T, 64]"),
            std::string::npos);
  EXPECT_NE(rejection(Tensor::zeros({12, 32}, DType::F32)).find("expected [T, 64]"),
            std::string::npos);
  Tensor nan = Tensor::zeros({3, 64}, DType::F32);
  nan.f32()[70] = std::numeric_limits<float>::quiet_NaN();
  const std::string msg = rejection(nan);
  EXPECT_NE(msg.find("latents"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
}

}  // namespace
}  // namespace avdit::models::vae
