// H3 sampler parity: the two sigma schedules and the per-modality Euler update replayed on the
// per-step velocities stored in ../shared/golden/h3-tiny/sampler.safetensors must reproduce every
// stored latent, x0 estimate and the final (unpacked) latents.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "io/safetensors.h"
#include "sample/euler.h"
#include "sample/sampler_loop.h"
#include "sample/schedule.h"
#include "testing/compare.h"

namespace avdit::sample {
namespace {

const std::string kFixture = std::string(AVDIT_SHARED_DIR) + "/golden/h3-tiny/sampler.safetensors";

using avdit::test_util::rel_max_diff;

// The reference's unpatchify_video_rows ([T*H/2*W/2, 96], columns c*4 + p*2 + q) -> [1, 24, T, H, W]
// and unpack_audio_rows ([2*T_a, 32] -> [2, 32, T_a]); model packing code owns the real versions.
Tensor unpatchify_video(const Tensor& rows, int64_t T, int64_t H, int64_t W) {
  Tensor out = Tensor::empty({1, 24, T, H, W}, DType::F32);
  const float* r = rows.f32();
  const int64_t hh = H / 2, ww = W / 2;
  for (int64_t c = 0; c < 24; ++c)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          out.f32()[((c * T + t) * H + h) * W + w] =
              r[((t * hh + h / 2) * ww + w / 2) * 96 + c * 4 + (h % 2) * 2 + (w % 2)];
  return out;
}

Tensor unpack_audio(const Tensor& rows, int64_t Ta) {
  Tensor out = Tensor::empty({2, 32, Ta}, DType::F32);
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t c = 0; c < 32; ++c)
      for (int64_t t = 0; t < Ta; ++t) out.f32()[(ch * 32 + c) * Ta + t] = rows.f32()[(ch * Ta + t) * 32 + c];
  return out;
}

TEST(SamplerH3, SchedulesMatchFixture) {
  const TensorMap f = read_all(kFixture);
  const H3Schedule s = h3_schedule(4);
  auto same = [](const std::vector<float>& mine, const Tensor& ref, const char* what) {
    ASSERT_EQ(static_cast<int64_t>(mine.size()), ref.numel()) << what;
    for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i], ref.f32()[i]) << what << " " << i;  // bit-exact
  };
  same(s.video_sigmas, f.at("sigmas_video"), "sigmas_video");
  same(s.audio_sigmas, f.at("sigmas_audio"), "sigmas_audio");
  same(s.video_t, f.at("timesteps_video"), "timesteps_video");
  same(s.audio_t, f.at("timesteps_audio"), "timesteps_audio");
}

TEST(SamplerH3, ScheduleEdgeCases) {
  // Vectorised torch linspace only differs from the scalar formula in the last ulp.
  for (int w : {8, 16}) {
    const auto a = h3_sigmas(50, 12.0, 0), b = h3_sigmas(50, 12.0, w);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 2e-7) << i;
  }
  EXPECT_EQ(h3_sigmas(50, 12.0).front(), 1.0f);
  EXPECT_EQ(h3_sigmas(50, 12.0).back(), 0.0f);
  EXPECT_EQ(h3_schedule(49).steps(), 49);  // the reference's 50 sigma points
}

TEST(SamplerH3, ReplayReproducesLatents) {
  const TensorMap f = read_all(kFixture);
  const H3Schedule s = h3_schedule(4);
  const Tensor& vel_v = f.at("velocity_video_rows");  // [4, 18, 96]
  const Tensor& vel_a = f.at("velocity_audio_rows");  // [4, 24, 32]
  const Tensor& lat_v = f.at("latents_video_rows");   // [5, 18, 96]
  const Tensor& lat_a = f.at("latents_audio_rows");   // [5, 24, 32]
  std::printf("H3 sampler replay (max |diff| / max |golden|):\n");

  // The x0 estimates, from the stored latents and velocities.
  for (int k = 0; k < 4; ++k) {
    Tensor den_v, den_a;
    h3_euler_step(lat_v.select(k), vel_v.select(k), s.video_t[k], s.video_ratio[k], &den_v);
    h3_euler_step(lat_a.select(k), vel_a.select(k), s.audio_t[k], s.audio_ratio[k], &den_a);
    const std::string p = "denoised[" + std::to_string(k) + "] ";
    EXPECT_LE(rel_max_diff(den_v, f.at("denoised_video_rows").select(k), p + "video"), 1e-6);
    EXPECT_LE(rel_max_diff(den_a, f.at("denoised_audio_rows").select(k), p + "audio"), 1e-6);
  }

  // The loop, fed the stored velocities (single pass: guidance 1).
  ops::CpuContext ctx;
  std::vector<std::unique_ptr<Stepper>> steppers;
  steppers.push_back(make_h3_euler_stepper(ctx, s.video_t, s.video_ratio));
  steppers.push_back(make_h3_euler_stepper(ctx, s.audio_t, s.audio_ratio));
  ModelFn model = [&](const StepInfo& step, const std::vector<Tensor>&) {
    return ModelOut{{vel_v.select(step.index), vel_a.select(step.index)}, {}};
  };
  Trajectory traj;
  SamplerOptions o;
  o.modalities = {"video", "audio"};
  TrajectoryRecorder recorder(traj, o.modalities, false);
  const ProbeScope record(ctx.observer(), &recorder);
  const auto final = run_sampler(ctx, {f.at("noise_video_rows"), f.at("noise_audio_rows")}, steppers, 4, model, o);
  for (int k = 1; k <= 4; ++k) {
    const std::string p = "latents[" + std::to_string(k) + "] ";
    EXPECT_LE(rel_max_diff(traj.latents[k][0], lat_v.select(k), p + "video"), 1e-6);
    EXPECT_LE(rel_max_diff(traj.latents[k][1], lat_a.select(k), p + "audio"), 1e-6);
  }
  const Tensor& fv = f.at("final_video");  // [1, 24, 3, 4, 6]
  const Tensor& fa = f.at("final_audio");  // [2, 32, 12]
  EXPECT_EQ(rel_max_diff(unpatchify_video(f.at("noise_video_rows"), 3, 4, 6), f.at("noise_video"), "noise layout"), 0.0);
  EXPECT_LE(rel_max_diff(unpatchify_video(final[0], fv.size(2), fv.size(3), fv.size(4)), fv, "final_video"), 1e-6);
  EXPECT_LE(rel_max_diff(unpack_audio(final[1], fa.size(2)), fa, "final_audio"), 1e-6);
}

}  // namespace
}  // namespace avdit::sample
