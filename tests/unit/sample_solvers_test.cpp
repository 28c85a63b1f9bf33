// Solvers and guidance on cases with known answers: a straight flow is integrated exactly by UniPC and
// the H3 Euler update, CFG combines as u + s (c - u), and the MAGI-2 guidance tricks behave as the
// reference describes.
#include <gtest/gtest.h>

#include <cmath>
#include <span>

#include "core/error.h"
#include "sample/cfg.h"
#include "sample/euler.h"
#include "sample/noise.h"
#include "sample/schedule.h"
#include "sample/unipc.h"

namespace avdit::sample {
namespace {

TEST(SampleSolvers, UniPCIntegratesAStraightFlowExactly) {
  // x_sigma = (1 - sigma) x0 + sigma e has the constant velocity v = e - x0 (noise-ward).
  for (int steps : {1, 2, 3, 10}) {
    const FlowUniPCSchedule s = magi2_schedule(steps, 5.0);
    FlowUniPC solver(s.sigmas);
    const Tensor e = make_noise({64}, 3, 0), x0 = make_noise({64}, 4, 0);
    std::vector<float> x(64), v(64);
    for (int i = 0; i < 64; ++i) {
      x[i] = (1.0f - s.sigmas[0]) * x0.f32()[i] + s.sigmas[0] * e.f32()[i];
      v[i] = e.f32()[i] - x0.f32()[i];
    }
    for (int k = 0; k < steps; ++k) solver.step(v, x);
    EXPECT_EQ(solver.step_index(), steps);
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(x[i], x0.f32()[i], 2e-6f) << steps;
    EXPECT_THROW(solver.step(v, x), BadInput);  // past the schedule
    solver.reset();
    EXPECT_EQ(solver.step_index(), 0);
  }
}

TEST(SampleSolvers, H3EulerIntegratesAStraightFlowExactly) {
  const H3Schedule s = h3_schedule(6);
  std::vector<float> x = {0.5f, -1.0f, 2.0f}, den(3);
  const std::vector<float> target = {1.0f, 0.25f, -3.0f};
  for (int k = 0; k < s.steps(); ++k) {
    // data-ward velocity: x0 = x + sigma v
    std::vector<float> v(3);
    for (int i = 0; i < 3; ++i) v[i] = (target[i] - x[i]) / s.video_sigmas[k];
    h3_euler_step(x, v, s.video_t[k], s.video_ratio[k], den);
  }
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(x[i], target[i], 1e-5f);
}

TEST(SampleSolvers, CfgCombine) {
  const Tensor c = Tensor::from_floats({1, 2, 3}, {3}), u = Tensor::from_floats({0, 1, 5}, {3});
  const Tensor g = cfg_combine(c, u, 5.0f);
  EXPECT_EQ(g.f32()[0], 5.0f);
  EXPECT_EQ(g.f32()[1], 6.0f);
  EXPECT_EQ(g.f32()[2], -5.0f);
  EXPECT_THROW(cfg_combine(c, Tensor::zeros({2}, DType::F32), 1.0f), BadInput);
}

TEST(SampleSolvers, Magi2GuidanceTricks) {
  Magi2Guidance g;
  EXPECT_EQ(magi2_video_scales(g, 20, 100), std::vector<float>(20, 5.0f));  // defaults: off
  g.use_cfg_trick = true;
  auto s = magi2_video_scales(g, 20, 900);
  EXPECT_EQ(s[0], 2.0f);
  EXPECT_EQ(s[12], 2.0f);
  EXPECT_EQ(s[13], 5.0f);
  g.use_cfg_trick = false;
  g.use_dynamic_cfg = true;
  EXPECT_EQ(magi2_video_scales(g, 3, 500), std::vector<float>(3, 5.0f));  // not yet below 500
  EXPECT_EQ(magi2_video_scales(g, 3, 499), std::vector<float>(3, 2.0f));

  // Per-frame scales reach the right elements of [1, C, T, H, W].
  Magi2Guidance trick;
  trick.use_cfg_trick = true;
  trick.cfg_trick_start_frame = 1;
  const Tensor c = Tensor::from_floats(std::vector<float>(2 * 2 * 3, 1.0f), {1, 2, 2, 3, 1});
  const Tensor u = Tensor::zeros({1, 2, 2, 3, 1}, DType::F32);
  const Tensor v = magi2_cfg_video(c, u, Tensor(), trick, 999);
  for (int ch = 0; ch < 2; ++ch)
    for (int f = 0; f < 2; ++f)
      for (int h = 0; h < 3; ++h) EXPECT_EQ(v.f32()[(ch * 2 + f) * 3 + h], f == 0 ? 2.0f : 5.0f);

  // cfg_rescale 1: each (item, channel) of the result has the std of cond.
  Magi2Guidance resc;
  resc.cfg_rescale = 1.0f;
  const Tensor ca = make_noise({1, 6, 4}, 1, 0), ua = make_noise({1, 6, 4}, 2, 0);
  const Tensor a = magi2_cfg_audio(ca, ua, Tensor(), resc);
  for (int ch = 0; ch < 4; ++ch) {
    auto stdev = [&](const Tensor& t) {
      double m = 0, q = 0;
      for (int l = 0; l < 6; ++l) m += t.f32()[l * 4 + ch];
      m /= 6;
      for (int l = 0; l < 6; ++l) q += (t.f32()[l * 4 + ch] - m) * (t.f32()[l * 4 + ch] - m);
      return std::sqrt(q / 6);
    };
    EXPECT_NEAR(stdev(a), stdev(ca), 1e-5);
  }

  // Skimming changes nothing where the scale is <= 1 and never raises the effective scale.
  Magi2Guidance skim;
  skim.use_skimmed_cfg_linear = true;
  skim.audio_scale = 1.0f;
  const Tensor x = make_noise({1, 6, 4}, 3, 0);
  const Tensor plain = magi2_cfg_audio(ca, ua, x, Magi2Guidance{.audio_scale = 1.0f});
  const Tensor skimmed = magi2_cfg_audio(ca, ua, x, skim);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(plain.f32()[i], skimmed.f32()[i]);
}

}  // namespace
}  // namespace avdit::sample
