// The H3 video VAE decoder opened from the release's folder layout (config.json naming source/,
// source/config.json, source/model.safetensors) decodes the golden as the golden folder does; a
// config describing another decoder, and a checkpoint missing a block, are refused by name. One
// temporal chunk of 7 latent frames in one 256 px tile decodes to 22 frames (its time is `avdit
// bench vae --decoder h3video`'s).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/h3video/decoder.h"
#include "ops/context.h"
#include "testing/compare.h"
#include "testing/h3_video_vae_folder.h"
#include "testing/h3_video_vae_golden.h"

namespace avdit::models::vae::h3video {
namespace {

using namespace avdit::testing;
namespace fs = std::filesystem;

std::string refusal(ops::Context& ctx, const fs::path& dir) {
  try {
    open_h3_video_decoder(ctx, dir);
  } catch (const BadInput& e) {
    return e.what();
  }
  return "(opened)";
}

TEST(H3VideoVaeFolder, ReleaseLayoutDecodesTheGolden) {
  TempFolder dir("avdit_h3video_release");
  write_json(dir.path / "config.json", golden_outer());
  write_json(dir.path / "source" / "config.json", golden_source());
  fs::copy_file(kH3VideoTiny / "model.safetensors", dir.path / "source" / "model.safetensors");
  ops::CpuContext ctx;
  auto dec = open_h3_video_decoder(ctx, dir.path);
  const TensorMap inputs = read_all(kH3VideoTiny / "inputs.safetensors");
  const TensorMap outputs = read_all(kH3VideoTiny / "outputs.safetensors");
  EXPECT_LE(test_util::rel_max_diff(dec->decode(inputs.at("latent")), outputs.at("video"), "video"),
            kH3VideoFp32Bar);
}

TEST(H3VideoVaeFolder, AnotherDecoderOrAMissingBlockIsNamed) {
  TempFolder dir("avdit_h3video_bad");
  write_json(dir.path / "config.json", golden_outer());
  fs::copy_file(kH3VideoTiny / "model.safetensors", dir.path / "source" / "model.safetensors");
  ops::CpuContext ctx;
  nlohmann::json source = golden_source();
  source["use_vit_decoder"] = false;
  write_json(dir.path / "source" / "config.json", source);
  const std::string cnn = refusal(ctx, dir.path);
  EXPECT_NE(cnn.find("use_vit_decoder"), std::string::npos) << cnn;
  source = golden_source();
  source["vit_decoder_kwargs"]["norm_type"] = "layer_norm";
  write_json(dir.path / "source" / "config.json", source);
  const std::string ln = refusal(ctx, dir.path);
  EXPECT_NE(ln.find("norm_type"), std::string::npos) << ln;
  source = golden_source();
  source["vit_decoder_kwargs"]["num_layers"] = 3;  // the file holds blocks 0 and 1
  write_json(dir.path / "source" / "config.json", source);
  const std::string missing = refusal(ctx, dir.path);
  EXPECT_NE(missing.find("decoder.transformer_blocks.2."), std::string::npos) << missing;
}

// 7 latent frames of 16 x 16 cells (1,797 tokens with the registers): one temporal chunk in one
// 256 px tile, 22 frames out (the first latent frame gives 1 frame, the token drop trims the
// chunk's end).
TEST(H3VideoVaeFolder, OneChunkTileDecodesTo22Frames) {
  TempFolder dir("avdit_h3video_chunk");
  write_json(dir.path / "config.json", golden_outer());
  write_json(dir.path / "source" / "config.json", golden_source());
  fs::copy_file(kH3VideoTiny / "model.safetensors", dir.path / "source" / "model.safetensors");
  ops::CpuContext ctx;
  auto dec = open_h3_video_decoder(ctx, dir.path);
  Tensor latent = Tensor::empty({1, 24, 7, 16, 16}, DType::F32);
  for (int64_t i = 0; i < latent.numel(); ++i)
    latent.f32()[i] = static_cast<float>((i * 7919) % 201) / 100.0f - 1.0f;
  const Tensor video = dec->decode(latent);
  EXPECT_EQ(video.shape(), (Shape{3, 22, 256, 256}));
  for (int64_t i = 0; i < video.numel(); ++i)
    ASSERT_TRUE(std::isfinite(video.f32()[i])) << "element " << i;
}

}  // namespace
}  // namespace avdit::models::vae::h3video
