// The Wan2.2 VAE decoder on the CPU against ../shared/golden/vae-wan22-tiny: the video and every
// intermediate at the README's fp32 bar (1e-4 of max |ref|), the chunked schedule the README
// cross-checks, the latent statistics, bad latents refused by name, and the bf16 mode.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/wan22/decoder.h"
#include "models/vae/wan22/latent_stats.h"
#include "ops/context.h"
#include "testing/compare.h"
#include "testing/video_vae_golden.h"

namespace avdit::models::vae {
namespace {

using avdit::test_util::rel_max_diff;
using avdit::testing::kVideoVaeFp32Bar;

const auto& fixture() { return avdit::testing::video_vae_fixture("vae-wan22-tiny"); }
const std::filesystem::path& dir() { return fixture().dir; }
const TensorMap& inputs() { return fixture().inputs; }
const TensorMap& outputs() { return fixture().outputs; }

TEST(Wan22Vae, VideoMatchesTheGolden) {
  ops::CpuContext ctx;
  const auto dec = open_wan22_decoder(ctx, dir());
  EXPECT_EQ(dec->output_name(), "video");
  EXPECT_EQ(dec->media(), Media::Video);
  EXPECT_NE(dec->describe().find("Wan2.2"), std::string::npos) << dec->describe();
  const Tensor video = dec->decode(inputs().at("latent"));
  ASSERT_EQ(video.shape(), (Shape{3, 13, 48, 64}));
  EXPECT_LE(rel_max_diff(video, outputs().at("video"), "video"), kVideoVaeFp32Bar);
}

TEST(Wan22Vae, EveryIntermediateMatches) {
  ops::CpuContext ctx;
  const auto dec = open_wan22_decoder(ctx, dir());
  avdit::testing::KeepPoints probe;
  {
    ProbeScope scope(ctx.observer(), &probe);
    dec->decode(inputs().at("latent"));
  }
  for (const char* name : {"latent_denorm", "after_conv2", "after_decoder_conv1", "after_middle",
                           "after_up0", "after_up1", "after_up2", "after_up3"}) {
    ASSERT_TRUE(probe.got.count(name)) << "no point " << name;
    const Tensor want = avdit::testing::to_channel_last(outputs().at(name));
    ASSERT_EQ(probe.got.at(name).shape(), want.shape()) << name;
    EXPECT_LE(rel_max_diff(probe.got.at(name), want, name), kVideoVaeFp32Bar) << name;
  }
  // The de-normalisation divides by the fp32 reciprocal, as the reference: bit-exact.
  EXPECT_EQ(
      rel_max_diff(probe.got.at("latent_denorm"),
                   avdit::testing::to_channel_last(outputs().at("latent_denorm")), "latent_denorm"),
      0.0);
}

// The README's cross-check: after a first call of one latent frame, calls of several frames with
// the cache kept give the same video up to rounding.
TEST(Wan22Vae, SeveralFramesPerCallAgree) {
  ops::CpuContext ctx;
  const Checkpoint ckpt = Checkpoint::open(dir());
  for (int64_t per_call : {2, 3}) {
    const wan22::Wan22Decoder dec(ctx, ckpt, per_call);
    EXPECT_LE(rel_max_diff(dec.decode(inputs().at("latent")), outputs().at("video"),
                           "video, " + std::to_string(per_call) + " frames per call"),
              kVideoVaeFp32Bar);
  }
}

// Held-out sizes from the same golden: the decoder is causal in time, so the first k latent frames
// decode to the golden's first 1 + 4(k-1) frames (k = 1 is the single-image case: no time_conv
// ever runs).
TEST(Wan22Vae, ShorterLatentsDecodeToThePrefix) {
  ops::CpuContext ctx;
  const auto dec = open_wan22_decoder(ctx, dir());
  const Tensor z = inputs().at("latent").to_f32(), video = outputs().at("video").to_f32();
  for (int64_t k : {1, 2, 3}) {
    Tensor prefix = Tensor::empty({1, 48, k, 3, 4}, DType::F32);
    for (int64_t c = 0; c < 48; ++c)
      std::copy_n(z.f32() + c * 4 * 12, k * 12, prefix.f32() + c * k * 12);
    const int64_t frames = 1 + 4 * (k - 1), plane = 48 * 64;
    Tensor want = Tensor::empty({3, frames, 48, 64}, DType::F32);
    for (int64_t c = 0; c < 3; ++c)
      std::copy_n(video.f32() + c * 13 * plane, frames * plane, want.f32() + c * frames * plane);
    const Tensor got = dec->decode(prefix);
    ASSERT_EQ(got.shape(), want.shape()) << k;
    EXPECT_LE(rel_max_diff(got, want, "first " + std::to_string(k) + " latent frames"),
              kVideoVaeFp32Bar);
  }
}

TEST(Wan22Vae, LatentStatisticsAreTheReferences) {
  const Tensor mean = inputs().at("latents_mean").to_f32(),
               std = inputs().at("latents_std").to_f32();
  ASSERT_EQ(mean.numel(), wan22::kLatentChannels);
  for (int64_t c = 0; c < wan22::kLatentChannels; ++c) {
    EXPECT_EQ(wan22::kLatentsMean[c], mean.f32()[c]) << c;
    EXPECT_EQ(wan22::kLatentsStd[c], std.f32()[c]) << c;
  }
}

void expect_refused(const Decoder& dec, const Tensor& latents, const std::string& says) {
  try {
    dec.decode(latents);
    ADD_FAILURE() << "accepted latents " << latents.shape_str();
  } catch (const BadInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("latents"), std::string::npos) << msg;
    EXPECT_NE(msg.find(says), std::string::npos) << msg;
  }
}

TEST(Wan22Vae, BadLatentsAreRefusedByName) {
  ops::CpuContext ctx;
  const auto dec = open_wan22_decoder(ctx, dir());
  const Tensor good = inputs().at("latent");
  expect_refused(*dec, good.reshape({48, 4, 3, 4}), "[1, 48, T, H, W]");
  expect_refused(*dec, Tensor::zeros({1, 47, 4, 3, 4}, DType::F32), "[1, 48, T, H, W]");
  expect_refused(*dec, Tensor::zeros({2, 48, 4, 3, 4}, DType::F32), "[1, 48, T, H, W]");
  expect_refused(*dec, Tensor::zeros({1, 48, 0, 3, 4}, DType::F32), "no frames");
  Tensor nan = good.clone();
  nan.f32()[123] = std::numeric_limits<float>::quiet_NaN();
  expect_refused(*dec, nan, "NaN");
}

TEST(Wan22Vae, AMissingTensorIsNamed) {
  ops::CpuContext ctx;
  const TensorMap all = read_all(dir() / "model.safetensors");
  const auto tmp =
      std::filesystem::temp_directory_path() / ("wan22_missing_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  std::vector<std::pair<std::string, Tensor>> kept;
  for (const auto& [name, t] : all)
    if (name != "decoder.middle.1.proj.weight") kept.emplace_back(name, t);
  write_safetensors(tmp / "model.safetensors", kept);
  try {
    open_wan22_decoder(ctx, tmp);
    ADD_FAILURE() << "a checkpoint without decoder.middle.1.proj.weight loaded";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("decoder.middle.1.proj.weight"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(tmp);
}

// BF16 (the reference under bf16 autocast) on the CPU's rounding emulation, within the bar
// video_vae_golden.h derives; not the fp32 result (bf16 really ran); F16 is refused.
TEST(Wan22Vae, Bf16StaysWithinThreeTimesTheReferencesBf16Spread) {
  ops::CpuContext ctx;
  const auto dec = open_wan22_decoder(ctx, dir(), DType::BF16);
  EXPECT_NE(dec->describe().find("BF16"), std::string::npos) << dec->describe();
  const double err =
      rel_max_diff(dec->decode(inputs().at("latent")), outputs().at("video"), "video (bf16)");
  EXPECT_LE(err, avdit::testing::kWan22DecoderBf16Bar);
  EXPECT_GT(err, 1e-5);
  EXPECT_THROW(open_wan22_decoder(ctx, dir(), DType::F16), BadInput);
}

// config.json's WanVAE_kwargs must describe the checkpoint (the architecture is read from the
// tensors, so a config for another width is a mix-up worth stopping at).
TEST(Wan22Vae, AConfigThatDisagreesIsRefused) {
  ops::CpuContext ctx;
  const auto tmp =
      std::filesystem::temp_directory_path() / ("wan22_config_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  std::filesystem::copy_file(dir() / "model.safetensors", tmp / "model.safetensors");
  nlohmann::json config = read_json(dir() / "config.json");
  config["WanVAE_kwargs"]["dec_dim"] = 8;
  std::ofstream(tmp / "config.json") << config.dump();
  try {
    open_wan22_decoder(ctx, tmp);
    ADD_FAILURE() << "a config with dec_dim 8 was accepted for a width-16 checkpoint";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace avdit::models::vae
