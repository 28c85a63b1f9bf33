// MAGI-2 sampler parity: the schedule, CFG and FlowUniPC replayed on the per-step model outputs
// stored in ../shared/golden/magi2-tiny/sampler.safetensors must reproduce every stored latent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "io/safetensors.h"
#include "ops/context.h"
#include "sample/cfg.h"
#include "sample/sampler_loop.h"
#include "sample/schedule.h"
#include "testing/compare.h"

namespace avdit::sample {
namespace {

const std::string kFixture =
    std::string(AVDIT_SHARED_DIR) + "/golden/magi2-tiny/sampler.safetensors";

// max |a - b| / max |b|, printed so the report can quote it.
using avdit::test_util::rel_max_diff;

Tensor item(const Tensor& t, int64_t i) {  // [2, ...] -> [1, ...]
  Shape s = t.shape();
  s[0] = 1;
  return t.select(i).reshape(s);
}

TEST(SamplerMagi2, ScheduleMatchesFixture) {
  const TensorMap f = read_all(kFixture);
  const FlowUniPCSchedule s = magi2_schedule(4, 7.0);
  const Tensor& sig = f.at("sigmas");
  ASSERT_EQ(sig.numel(), static_cast<int64_t>(s.sigmas.size()));
  for (size_t i = 0; i < s.sigmas.size(); ++i)
    EXPECT_EQ(s.sigmas[i], sig.f32()[i]) << "sigma " << i;
  const Tensor& ts = f.at("timesteps");
  ASSERT_EQ(ts.numel(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.timesteps[i], ts.data<int64_t>()[i]) << "timestep " << i;
  const Tensor& mt = f.at("model_t");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.model_t[i], mt.f32()[i]) << "model_t " << i;  // bit-exact
  EXPECT_EQ(f.at("video_guidance_scale").f32()[0], Magi2Guidance{}.video_scale);
  EXPECT_EQ(f.at("audio_guidance_scale").f32()[0], Magi2Guidance{}.audio_scale);
}

TEST(SamplerMagi2, ReplayReproducesLatents) {
  const TensorMap f = read_all(kFixture);
  const FlowUniPCSchedule s = magi2_schedule(4, 7.0);
  const Magi2Guidance g;
  ops::CpuContext ctx;
  std::vector<std::unique_ptr<Stepper>> steppers;
  steppers.push_back(make_unipc_stepper(ctx, s.sigmas));
  steppers.push_back(make_unipc_stepper(ctx, s.sigmas));

  ModelFn model = [&](const StepInfo& step, const std::vector<Tensor>&) {
    const std::string p = "step" + std::to_string(step.index) + ".";
    const Tensor& v = f.at(p + "model_out_video");
    const Tensor& a = f.at(p + "model_out_audio");
    return ModelOut{{item(v, 0), item(a, 0)}, {item(v, 1), item(a, 1)}};
  };
  Trajectory traj;
  SamplerOptions o;
  o.modalities = {"video", "audio"};
  o.guide = [&](int m, const StepInfo& step, const Tensor& c, const Tensor& u, const Tensor& x) {
    return m == 0 ? magi2_cfg_video(c, u, x, g, s.timesteps[step.index])
                  : magi2_cfg_audio(c, u, x, g);
  };
  TrajectoryRecorder recorder(traj, o.modalities, /*model_out=*/false);
  const ProbeScope scope(ctx.observer(), &recorder);
  const auto final = run_sampler(ctx, {f.at("init_video_latent"), f.at("init_audio_latent")},
                                 steppers, 4, model, o);

  std::printf("MAGI-2 sampler replay (max |diff| / max |golden|):\n");
  for (int i = 0; i < 4; ++i) {
    const std::string p = "step" + std::to_string(i) + ".";
    EXPECT_EQ(rel_max_diff(traj.velocity[i][0], f.at(p + "cfg_video"), p + "cfg_video"), 0.0);
    EXPECT_EQ(rel_max_diff(traj.velocity[i][1], f.at(p + "cfg_audio"), p + "cfg_audio"), 0.0);
    EXPECT_LE(rel_max_diff(traj.latents[i + 1][0], f.at(p + "video_latent"), p + "video_latent"),
              1e-6);
    EXPECT_LE(rel_max_diff(traj.latents[i + 1][1], f.at(p + "audio_latent"), p + "audio_latent"),
              1e-6);
  }
  EXPECT_LE(rel_max_diff(final[0], f.at("final_video_latent"), "final_video_latent"), 1e-6);
  EXPECT_LE(rel_max_diff(final[1], f.at("final_audio_latent"), "final_audio_latent"), 1e-6);
}

}  // namespace
}  // namespace avdit::sample
