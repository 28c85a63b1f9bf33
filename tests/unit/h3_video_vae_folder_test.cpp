// The H3 video VAE decoder opened from the release's folder layout (config.json naming source/,
// source/config.json, source/model.safetensors) decodes the golden as the golden folder does; a
// config describing another decoder, and a checkpoint missing a block, are refused by name. A
// disabled case times the full-width ViT per block on the CPU (the figure in bench/RESULTS.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

// Full width (D 2048, 32 heads of 64) with 1 and 2 random blocks, one 256 px tile of one temporal
// chunk (7 latent frames: 1,797 tokens, 22 frames out): the difference is one block's time; the
// rest is the per-tile overhead (embedding, norm_out, proj_out, patch-to-pixel). Run with
//   h3_video_vae_folder_test --gtest_also_run_disabled_tests --gtest_filter='*FullWidth*'
TEST(H3VideoVaeFolder, DISABLED_FullWidthTileTiming) {
  ops::CpuContext ctx;
  nlohmann::json source = golden_source();
  source["vit_decoder_kwargs"] =
      read_json(kH3VideoTiny / "config.json").at("production_vit_decoder_kwargs");
  const Tensor latent = Tensor::zeros({1, 24, 7, 16, 16}, DType::F32);
  double seconds[3] = {0, 0, 0};
  for (int layers : {1, 2}) {
    TempFolder dir("avdit_h3video_full");
    source["vit_decoder_kwargs"]["num_layers"] = layers;
    write_json(dir.path / "config.json", golden_outer());
    write_json(dir.path / "source" / "config.json", source);
    write_safetensors(dir.path / "source" / "model.safetensors", random_weights(source, 7));
    auto dec = open_h3_video_decoder(ctx, dir.path);
    dec->decode(latent);  // warm: the per-shape tables, first touch of the weights
    Tensor video;
    seconds[layers] = 1e30;
    for (int rep = 0; rep < 3; ++rep) {  // the best of three: the machine may be shared
      const auto t0 = std::chrono::steady_clock::now();
      video = dec->decode(latent);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      seconds[layers] = std::min(seconds[layers], s);
    }
    EXPECT_EQ(video.shape(), (Shape{3, 22, 256, 256}));
    std::printf("  %d block(s): %.2f s per tile decode\n", layers, seconds[layers]);
  }
  const double block = seconds[2] - seconds[1];
  // One block's GEMMs (qkv 3D^2, out D^2, w1 8D^2, w2 4D^2 per token) and attention (4 N^2 D).
  const double N = 7 * 16 * 16 + 5, D = 2048, flop = 2 * N * 16 * D * D + 4 * N * N * D;
  std::printf(
      "  per block %.2f s (%.0f GFLOP: %.0f GFLOP/s), per-tile overhead %.2f s, 36 blocks: "
      "%.1f s per tile\n",
      block, flop / 1e9, flop / 1e9 / block, seconds[1] - block, seconds[1] - block + 36 * block);
}

}  // namespace
}  // namespace avdit::models::vae::h3video
