// MAGI-2's TurboVAED on the CPU against ../shared/golden/vae-turbo-tiny: the sliding-window video
// and window 0's intermediates at the README's fp32 bar (1e-4 of max |ref|), every window's input
// (the window plan), the config checks, bad latents refused by name, and the bf16 mode.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/turbo/decoder.h"
#include "ops/context.h"
#include "testing/compare.h"
#include "testing/video_vae_golden.h"

namespace avdit::models::vae {
namespace {

using avdit::test_util::rel_max_diff;
using avdit::testing::kVideoVaeFp32Bar;

const auto& fixture() { return avdit::testing::video_vae_fixture("vae-turbo-tiny"); }
const std::filesystem::path& dir() { return fixture().dir; }
const TensorMap& inputs() { return fixture().inputs; }
const TensorMap& outputs() { return fixture().outputs; }

TEST(TurboVaed, VideoMatchesTheGolden) {
  ops::CpuContext ctx;
  const auto dec = open_turbo_vaed(ctx, dir());
  EXPECT_EQ(dec->output_name(), "video");
  EXPECT_NE(dec->describe().find("TurboVAED"), std::string::npos) << dec->describe();
  const Tensor video = dec->decode(inputs().at("latent"));
  ASSERT_EQ(video.shape(), (Shape{3, 25, 32, 48}));
  EXPECT_LE(rel_max_diff(video, outputs().at("video"), "video"), kVideoVaeFp32Bar);
}

TEST(TurboVaed, WindowInputsAndWindowZeroIntermediates) {
  ops::CpuContext ctx;
  const auto dec = open_turbo_vaed(ctx, dir());
  avdit::testing::KeepPoints probe;
  {
    ProbeScope scope(ctx.observer(), &probe);
    dec->decode(inputs().at("latent"));
  }
  // Four windows (the README's plan: [0, 3), [1, 5), [3, 7), [5, 8) of the padded latent).
  EXPECT_FALSE(probe.got.count("window4_input"));
  for (const std::string name :
       {"window0_input", "window1_input", "window2_input", "window3_input", "window0_after_conv_in",
        "window0_after_mid_block", "window0_after_up_block0", "window0_after_up_block1",
        "window0_after_up_block2", "window0_after_up_block3", "window0_after_conv_out"}) {
    ASSERT_TRUE(probe.got.count(name)) << "no point " << name;
    const Tensor want = avdit::testing::to_channel_last(outputs().at(name));
    ASSERT_EQ(probe.got.at(name).shape(), want.shape()) << name;
    EXPECT_LE(rel_max_diff(probe.got.at(name), want, name), kVideoVaeFp32Bar) << name;
  }
  ASSERT_TRUE(probe.got.count("window0_output"));
  EXPECT_LE(rel_max_diff(probe.got.at("window0_output"), outputs().at("window0_output"),
                         "window0_output"),
            kVideoVaeFp32Bar);
}

// BF16 (MAGI-2's production mode: the module and z in bf16) on the CPU's rounding emulation,
// within the bar video_vae_golden.h derives; not the fp32 result (bf16 really ran).
TEST(TurboVaed, Bf16StaysWithinThreeTimesTheReferencesBf16Spread) {
  ops::CpuContext ctx;
  const auto dec = open_turbo_vaed(ctx, dir(), DType::BF16);
  EXPECT_NE(dec->describe().find("BF16"), std::string::npos) << dec->describe();
  const double err =
      rel_max_diff(dec->decode(inputs().at("latent")), outputs().at("video"), "video (bf16)");
  EXPECT_LE(err, avdit::testing::kTurboBf16Bar);
  EXPECT_GT(err, 1e-5);
  EXPECT_THROW(open_turbo_vaed(ctx, dir(), DType::F16), BadInput);
}

// A latent shorter than first_chunk_size is padded with copies of its last frame, decoded as one
// window, and the padding's 4 frames each are trimmed again.
TEST(TurboVaed, OneWindowWhenTheLatentIsShort) {
  ops::CpuContext ctx;
  const auto dec = open_turbo_vaed(ctx, dir());
  const Tensor one = inputs().at("latent").to_f32();
  // The first latent frame alone: padded to first_chunk_size (2) frames, 5 frames out, 1 kept.
  Tensor z = Tensor::empty({1, 48, 1, 2, 3}, DType::F32);
  for (int64_t c = 0; c < 48; ++c)
    for (int64_t i = 0; i < 6; ++i) z.f32()[c * 6 + i] = one.f32()[c * 7 * 6 + i];
  EXPECT_EQ(dec->decode(z).shape(), (Shape{3, 1, 32, 48}));
}

TEST(TurboVaed, BadLatentsAreRefusedByName) {
  ops::CpuContext ctx;
  const auto dec = open_turbo_vaed(ctx, dir());
  const auto refused = [&](const Tensor& latents, const std::string& says) {
    try {
      dec->decode(latents);
      ADD_FAILURE() << "accepted latents " << latents.shape_str();
    } catch (const BadInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("TurboVAED: latents"), std::string::npos) << msg;
      EXPECT_NE(msg.find(says), std::string::npos) << msg;
    }
  };
  refused(inputs().at("latent").reshape({48, 7, 2, 3}), "[1, 48, T, H, W]");
  refused(Tensor::zeros({1, 16, 7, 2, 3}, DType::F32), "[1, 48, T, H, W]");
  Tensor nan = inputs().at("latent").clone();
  nan.f32()[5] = std::numeric_limits<float>::infinity();
  refused(nan, "element");
}

TEST(TurboVaedConfig, RefusesWhatItDoesNotCompute) {
  const nlohmann::json good = read_json(dir() / "config.json");
  const auto c = turbo::TurboVaedConfig::from_json(good);
  EXPECT_EQ(c.first_chunk_size, 2);
  EXPECT_EQ(c.decoder_block_out_channels, (std::vector<int64_t>{4, 8, 12, 16}));
  // The release's file is the flat object.
  EXPECT_EQ(turbo::TurboVaedConfig::from_json(good.at("config")).step_size, 2);
  const auto refused = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json j = good.at("config");
    j[key] = value;
    try {
      turbo::TurboVaedConfig::from_json(j);
      ADD_FAILURE() << key << " = " << value.dump() << " accepted";
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  refused("decoder_causal", true);
  refused("decoder_is_dw_conv", {true, false, false, false, false});
  refused("use_unpatchify", false);
  refused("latent_channels", 16);
  refused("decoder_layers_per_block", {1, 1});
  refused("step_size", "two");
}

}  // namespace
}  // namespace avdit::models::vae
