// The Wan2.2 VAE encoder on the CPU against ../shared/golden/vae-wan22enc-tiny: both cases' latents
// and every intermediate at the README's fp32 bar (1e-4 of max |ref|), MAGI-2's pixel
// preprocessing bit for bit, the dropped trailing frames, bad video refused by name, and the bf16
// mode.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/wan22/encoder.h"
#include "ops/context.h"
#include "testing/compare.h"
#include "testing/video_vae_golden.h"

namespace avdit::models::vae::wan22 {
namespace {

using avdit::test_util::rel_max_diff;
using avdit::testing::kVideoVaeFp32Bar;

const auto& fixture() { return avdit::testing::video_vae_fixture("vae-wan22enc-tiny"); }
const std::filesystem::path& dir() { return fixture().dir; }
const TensorMap& inputs() { return fixture().inputs; }
const TensorMap& outputs() { return fixture().outputs; }

TEST(Wan22Encoder, BothCasesAndEveryIntermediateMatch) {
  ops::CpuContext ctx;
  const auto enc = open_wan22_encoder(ctx, dir());
  EXPECT_NE(enc->describe().find("encoder"), std::string::npos) << enc->describe();
  for (const std::string c : {"case0", "case1"}) {
    avdit::testing::KeepPoints probe;
    Tensor latent;
    {
      ProbeScope scope(ctx.observer(), &probe);
      latent = enc->encode(inputs().at(c + ".video"));
    }
    const Tensor& want = outputs().at(c + ".latent");
    ASSERT_EQ(latent.shape(), want.shape()) << c;
    EXPECT_LE(rel_max_diff(latent, want, c + ".latent"), kVideoVaeFp32Bar) << c;
    for (const char* name : {"after_enc_conv1", "after_down0", "after_down1", "after_down2",
                             "after_down3", "after_middle", "after_head", "mu"}) {
      ASSERT_TRUE(probe.got.count(name)) << "no point " << name;
      const Tensor ref = avdit::testing::to_channel_last(outputs().at(c + "." + name));
      ASSERT_EQ(probe.got.at(name).shape(), ref.shape()) << c << " " << name;
      EXPECT_LE(rel_max_diff(probe.got.at(name), ref, c + "." + name), kVideoVaeFp32Bar);
    }
  }
}

// BF16 (the reference under bf16 autocast; MAGI-2 itself encodes in float32) on the CPU's
// rounding emulation, both cases within the bar video_vae_golden.h derives.
TEST(Wan22Encoder, Bf16StaysWithinThreeTimesTheReferencesBf16Spread) {
  ops::CpuContext ctx;
  const auto enc = open_wan22_encoder(ctx, dir(), DType::BF16);
  EXPECT_NE(enc->describe().find("BF16"), std::string::npos) << enc->describe();
  for (const std::string c : {"case0", "case1"}) {
    const double err = rel_max_diff(enc->encode(inputs().at(c + ".video")),
                                    outputs().at(c + ".latent"), c + ".latent (bf16)");
    EXPECT_LE(err, avdit::testing::kWan22EncoderBf16Bar) << c;
    EXPECT_GT(err, 1e-5) << c;
  }
}

TEST(Wan22Encoder, PreprocessIsMagi2sBitForBit) {
  for (const std::string c : {"case0", "case1"}) {
    const Tensor got = Wan22Encoder::preprocess(inputs().at(c + ".pixels_u8"));
    EXPECT_TRUE(avdit::test_util::same_bits(got, inputs().at(c + ".video"))) << c;
  }
}

// The README's check: frames past 1 + 4k change nothing (the reference never encodes them).
TEST(Wan22Encoder, TrailingFramesAreNotEncoded) {
  ops::CpuContext ctx;
  const auto enc = open_wan22_encoder(ctx, dir());
  const Tensor v = inputs().at("case0.video");  // [1, 3, 9, 48, 64]
  Tensor longer = Tensor::empty({1, 3, 11, 48, 64}, DType::F32);
  const int64_t frame = 48 * 64;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t t = 0; t < 11; ++t)
      std::copy_n(v.f32() + (c * 9 + std::min<int64_t>(t, 8)) * frame, frame,
                  longer.f32() + (c * 11 + t) * frame);
  EXPECT_TRUE(avdit::test_util::same_bits(enc->encode(longer), enc->encode(v)));
}

TEST(Wan22Encoder, BadVideoIsRefusedByName) {
  ops::CpuContext ctx;
  const auto enc = open_wan22_encoder(ctx, dir());
  const auto refused = [&](const Tensor& video, const std::string& says) {
    try {
      enc->encode(video);
      ADD_FAILURE() << "accepted video " << video.shape_str();
    } catch (const BadInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("Wan2.2 VAE encoder: video"), std::string::npos) << msg;
      EXPECT_NE(msg.find(says), std::string::npos) << msg;
    }
  };
  refused(Tensor::zeros({3, 1, 64, 96}, DType::F32), "[1, 3, T, H, W]");
  refused(Tensor::zeros({1, 4, 1, 64, 96}, DType::F32), "[1, 3, T, H, W]");
  refused(Tensor::zeros({1, 3, 1, 40, 96}, DType::F32), "multiples of 16");
  Tensor nan = inputs().at("case1.video").clone();
  nan.f32()[17] = std::numeric_limits<float>::quiet_NaN();
  refused(nan, "NaN");
}

}  // namespace
}  // namespace avdit::models::vae::wan22
