// CPU timing of the video VAEs (disabled by default: run with --gtest_also_run_disabled_tests).
// The goldens' decode times, then an estimate for a 10 s clip at 540p (61 latent frames of 34x60,
// 241 frames of 544x960) at the releases' widths: every block kind is timed on one frame with
// random weights at its real channel count (spatial extent capped at 136x240 to fit this machine),
// and its seconds per output voxel are multiplied by the voxels it processes in the clip (the
// convolutions dominate and scale linearly with voxels; attention is timed at its real size).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "io/safetensors.h"
#include "models/vae/turbo/decoder.h"
#include "models/vae/wan22/blocks.h"
#include "models/vae/wan22/decoder.h"
#include "models/vae/wan22/encoder.h"
#include "ops/context.h"
#include "testing/video_vae_golden.h"

namespace avdit::models::vae {
namespace {

using namespace wan22;

double seconds(const std::function<void()>& f, int reps = 1) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Tensor randn(Shape s, uint64_t stream, float std = 0.02f) {
  Tensor t = Tensor::empty(std::move(s), DType::F32);
  fill_normal(t, 3, stream, 0.f, std);
  return t;
}

Conv random_conv(int64_t out, int64_t in, int64_t kt, int64_t k, uint64_t stream) {
  return {ops::conv3d_weight(randn({out, in, kt, k, k}, stream)), Tensor::zeros({out}, DType::F32)};
}

// The clip: 10 s at 24 fps = 241 frames of 544x960 (540p on the 16-pixel grid).
constexpr int64_t kT = 61, kH = 34, kW = 60;
constexpr int64_t kCapVoxels = 136 * 240;

struct Frame {
  int64_t h, w;  // the stage's real frame, timed on at most kCapVoxels of it
  int64_t th() const { return h * w <= kCapVoxels ? h : kCapVoxels / w; }
};

// Seconds per output voxel of one ResidualBlock(in -> out) on one frame (first call of a cache).
double residual_per_voxel(int64_t in, int64_t out, Frame f) {
  ops::CpuContext ctx;
  ResidualBlockWeights w;
  w.gamma1 = Tensor::from_floats(std::vector<float>(in, 1.f), {in});
  w.gamma2 = Tensor::from_floats(std::vector<float>(out, 1.f), {out});
  w.conv1 = random_conv(out, in, 3, 3, 1);
  w.conv2 = random_conv(out, out, 3, 3, 2);
  if (in != out) w.shortcut = random_conv(out, in, 1, 1, 3);
  const Tensor x = randn({1, f.th(), f.w, in}, 4, 1.f);
  const double s = seconds([&] {
    FeatureCache cache;
    residual_block(ctx, w, x, cache);
  });
  std::printf("  residual %4ld -> %4ld on %3ldx%3ld: %7.3f s\n", long(in), long(out), long(f.th()),
              long(f.w), s);
  return s / static_cast<double>(f.th() * f.w);
}

double conv_per_voxel(int64_t in, int64_t out, int64_t kt, int64_t k, Frame f) {
  ops::CpuContext ctx;
  const Conv c = random_conv(out, in, kt, k, 5);
  const Tensor x = randn({1, f.th(), f.w, in}, 6, 1.f);
  ops::Conv3dGeometry g;
  g.pad_front = kt - 1;
  g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = k / 2;
  const double s = seconds([&] { ops::conv3d(ctx, x, c.w, &c.b, g); });
  std::printf("  conv %ldx%ldx%ld %4ld -> %4ld on %3ldx%3ld: %7.3f s\n", long(kt), long(k), long(k),
              long(in), long(out), long(f.th()), long(f.w), s);
  return s / static_cast<double>(f.th() * f.w);
}

double attention_per_frame(int64_t c, Frame f) {
  ops::CpuContext ctx;
  AttentionBlockWeights w;
  w.gamma = Tensor::from_floats(std::vector<float>(c, 1.f), {c});
  w.to_qkv_w = randn({3 * c, c}, 7);
  w.to_qkv_b = Tensor::zeros({3 * c}, DType::F32);
  w.proj_w = randn({c, c}, 8);
  w.proj_b = Tensor::zeros({c}, DType::F32);
  const Tensor x = randn({1, f.h, f.w, c}, 9, 1.f);
  const double s = seconds([&] { attention_block(ctx, w, x); });
  std::printf("  attention %ld on %ldx%ld: %.3f s\n", long(c), long(f.h), long(f.w), s);
  return s;
}

TEST(VideoVaeTiming, DISABLED_Goldens) {
  ops::CpuContext ctx;
  const auto wan = open_wan22_decoder(ctx, testing::video_vae_golden("vae-wan22-tiny"));
  const Tensor zw =
      read_all(testing::video_vae_golden("vae-wan22-tiny") / "inputs.safetensors").at("latent");
  std::printf("vae-wan22-tiny decode [1,48,4,3,4] -> [3,13,48,64]: %.4f s\n",
              seconds([&] { wan->decode(zw); }, 5));
  const auto turbo = open_turbo_vaed(ctx, testing::video_vae_golden("vae-turbo-tiny"));
  const Tensor zt =
      read_all(testing::video_vae_golden("vae-turbo-tiny") / "inputs.safetensors").at("latent");
  std::printf("vae-turbo-tiny decode [1,48,7,2,3] -> [3,25,32,48]: %.4f s\n",
              seconds([&] { turbo->decode(zt); }, 5));
  const auto enc = open_wan22_encoder(ctx, testing::video_vae_golden("vae-wan22enc-tiny"));
  const TensorMap in =
      read_all(testing::video_vae_golden("vae-wan22enc-tiny") / "inputs.safetensors");
  for (const char* c : {"case0", "case1"})
    std::printf("vae-wan22enc-tiny encode %s: %.4f s\n", c,
                seconds([&] { enc->encode(in.at(std::string(c) + ".video")); }, 5));
}

// Wan2.2 decoder at dec_dim 256 (widths 1024, 1024, 1024, 512, 256).
TEST(VideoVaeTiming, DISABLED_Wan22Decoder540p10s) {
  const Frame f0{kH, kW}, f1{2 * kH, 2 * kW}, f2{4 * kH, 4 * kW}, f3{8 * kH, 8 * kW};
  const double F0 = kT * f0.h * f0.w, F1 = (1 + 2 * (kT - 1)) * f1.h * f1.w,
               F2 = (1 + 4 * (kT - 1)) * f2.h * f2.w, F3 = (1 + 4 * (kT - 1)) * f3.h * f3.w;
  const double r1024_0 = residual_per_voxel(1024, 1024, f0),
               r1024_1 = residual_per_voxel(1024, 1024, f1);
  const double r1024_512 = residual_per_voxel(1024, 512, f2),
               r512 = residual_per_voxel(512, 512, f2);
  const double r512_256 = residual_per_voxel(512, 256, f3), r256 = residual_per_voxel(256, 256, f3);
  const double total = conv_per_voxel(48, 1024, 3, 3, f0) * F0 + (2 * r1024_0 * F0) +
                       attention_per_frame(1024, f0) * kT + 3 * r1024_0 * F0 +
                       conv_per_voxel(1024, 2048, 3, 1, f0) * F0 +
                       conv_per_voxel(1024, 1024, 1, 3, f1) * F1 + 3 * r1024_1 * F1 +
                       conv_per_voxel(1024, 2048, 3, 1, f1) * F1 +
                       conv_per_voxel(1024, 1024, 1, 3, f2) * F2 + (r1024_512 + 2 * r512) * F2 +
                       conv_per_voxel(512, 512, 1, 3, f3) * F3 + (r512_256 + 2 * r256) * F3 +
                       conv_per_voxel(256, 12, 3, 3, f3) * F3;
  std::printf("Wan2.2 VAE decoder, 10 s 540p (61 latent frames of 34x60): estimate %.0f s\n",
              total);
}

// TurboVAED at the reported release widths (512, 256, 128, 64; blocks 3 | 3, 2, 2, 2; windows
// 7 + 7): 61 latent frames pad to 63, decoded in windows of 8, 9 x 7, 8 latent frames.
TEST(VideoVaeTiming, DISABLED_TurboVaed540p10s) {
  const Frame f0{kH, kW}, f1{2 * kH, 2 * kW}, f2{4 * kH, 4 * kW}, f3{8 * kH, 8 * kW};
  const double r512_0 = residual_per_voxel(512, 512, f0), r512_1 = residual_per_voxel(512, 512, f1);
  const double r512_256 = residual_per_voxel(512, 256, f1), r256 = residual_per_voxel(256, 256, f2);
  const double r256_128 = residual_per_voxel(256, 128, f2), r128 = residual_per_voxel(128, 128, f3);
  const double r128_64 = residual_per_voxel(128, 64, f3), r64 = residual_per_voxel(64, 64, f3);
  const double c_in = conv_per_voxel(48, 512, 3, 3, f0), t0 = conv_per_voxel(512, 1024, 3, 1, f0),
               u0 = conv_per_voxel(512, 512, 1, 3, f1), t1 = conv_per_voxel(256, 512, 3, 1, f1),
               u1 = conv_per_voxel(256, 256, 1, 3, f2), u2 = conv_per_voxel(128, 128, 1, 3, f3),
               c_out = conv_per_voxel(64, 12, 3, 3, f3);
  double total = 0;
  for (int64_t t : {8, 9, 9, 9, 9, 9, 9, 9, 8}) {
    const bool first = t == 8 && total == 0;
    const double a = t * f0.h * f0.w;
    const int64_t n1 = 2 * t - (first ? 1 : 0), n2 = 2 * n1 - (first ? 1 : 0);
    const double b = n1 * f1.h * f1.w, c = n2 * f2.h * f2.w, d = n2 * f3.h * f3.w;
    total += (c_in + 3 * r512_0 + t0) * a + (u0 + 3 * r512_1 + r512_256 + t1) * b +
             (u1 + 2 * r256 + r256_128) * c + (u2 + 2 * r128 + r128_64 + 2 * r64 + c_out) * d;
  }
  std::printf("TurboVAED, 10 s 540p (61 latent frames of 34x60): estimate %.0f s\n", total);
}

}  // namespace
}  // namespace avdit::models::vae
