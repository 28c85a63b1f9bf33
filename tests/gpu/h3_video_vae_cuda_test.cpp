// The MiniMax-H3 video VAE decoder on the GPU against ../shared/golden/vae-h3video-tiny: the same
// one definition on a CUDA context in fp32, the video, chunk 0's intermediates and the tiled
// variant at the README's float32 bar, and the bf16 blocks within 3x the README's bf16 spread.
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/context.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/vae/h3video/decoder.h"
#include "testing/compare.h"
#include "testing/h3_video_vae_golden.h"

namespace avdit::models::vae::h3video {
namespace {

using avdit::testing::kH3VideoFp32Bar;
using avdit::testing::kH3VideoTiny;
using test_util::rel_max_diff;

ops::CudaContext& gpu() {
  static ops::CudaContext c;
  return c;
}

TEST(H3VideoVaeCuda, Fp32VideoAndIntermediates) {
  const TensorMap inputs = read_all(kH3VideoTiny / "inputs.safetensors");
  const TensorMap outputs = read_all(kH3VideoTiny / "outputs.safetensors");
  auto dec = open_h3_video_decoder(gpu(), kH3VideoTiny);
  testing::TileProbe probe(0);
  Tensor got;
  {
    ProbeScope scope(gpu().observer(), &probe);
    got = dec->decode(inputs.at("latent"));
  }
  EXPECT_LE(rel_max_diff(got, outputs.at("video"), "video"), kH3VideoFp32Bar);
  EXPECT_LE(rel_max_diff(probe.got.at("latent_denorm"),
                         testing::to_tokens(outputs.at("latent_denorm")), "latent_denorm"),
            1e-6);
  EXPECT_LE(
      rel_max_diff(probe.got.at("vit.block1.out"), outputs.at("clip0_after_block1"), "block1"),
      kH3VideoFp32Bar);
  EXPECT_LE(rel_max_diff(probe.got.at("vit.norm_out.out"), outputs.at("clip0_after_norm_out"),
                         "norm_out"),
            kH3VideoFp32Bar);
  EXPECT_LE(rel_max_diff(probe.got.at("vit.decoded"), outputs.at("clip0_decoded"), "decoded"),
            kH3VideoFp32Bar);
}

TEST(H3VideoVaeCuda, Fp32Tiled) {
  const TensorMap inputs = read_all(kH3VideoTiny / "inputs.safetensors");
  const TensorMap outputs = read_all(kH3VideoTiny / "outputs.safetensors");
  auto dec = open_h3_video_decoder(gpu(), kH3VideoTiny);
  dynamic_cast<H3VideoDecoder&>(*dec).set_tiling(32, 16);
  Tensor got;
  got = dec->decode(inputs.at("latent"));
  EXPECT_LE(rel_max_diff(got, outputs.at("video_tiled"), "video_tiled"), kH3VideoFp32Bar);
}

// bf16 blocks (cuDNN attention, bf16 GEMMs): within 3x the README's GPU bf16 spread (0.00447).
TEST(H3VideoVaeCuda, Bf16Blocks) {
  const TensorMap inputs = read_all(kH3VideoTiny / "inputs.safetensors");
  const TensorMap outputs = read_all(kH3VideoTiny / "outputs.safetensors");
  auto dec = open_h3_video_decoder(gpu(), kH3VideoTiny, DType::BF16);
  Tensor got;
  got = dec->decode(inputs.at("latent"));
  EXPECT_LE(rel_max_diff(got, outputs.at("video"), "video (bf16 blocks)"), 3 * 0.00447);
}

}  // namespace
}  // namespace avdit::models::vae::h3video
