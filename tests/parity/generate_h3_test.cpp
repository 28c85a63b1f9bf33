// H3 generate parity: generate_h3 on h3-tiny with the fixture's text (inputs.safetensors
// text_embeds) and noise (sampler.safetensors noise_video / noise_audio), 4 steps, guidance 1, must
// reproduce the per-step velocities and latents (row layout) and final_video / final_audio within
// 1e-4 of max (the README's safe bound for a float32 implementation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "io/safetensors.h"
#include "models/h3/model.h"
#include "models/h3/packing.h"
#include "ops/context.h"
#include "pipeline/generate_h3.h"
#include "testing/compare.h"

namespace avdit::pipeline {
namespace {

const std::string kDir = std::string(AVDIT_SHARED_DIR) + "/golden/h3-tiny";

using avdit::test_util::rel_max_diff;

TEST(GenerateH3, ReproducesFixture) {
  const Checkpoint ckpt = Checkpoint::open(kDir);
  const TensorMap in = read_all(kDir + "/inputs.safetensors");
  const TensorMap f = read_all(kDir + "/sampler.safetensors");
  H3GenerateOptions o;
  o.text = {in.at("text_embeds"), "inputs:text_embeds"};
  o.run.noise_video = {f.at("noise_video"), "sampler:noise_video"};
  o.run.noise_audio = {f.at("noise_audio"), "sampler:noise_audio"};
  o.run.steps = 4;
  o.run.record_trajectory = true;
  ops::CpuContext ctx;
  const models::h3::H3Model model(ctx, ckpt);
  const GenerateResult r = generate_h3(model, o);
  EXPECT_FALSE(r.cfg);
  ASSERT_EQ(r.trajectory.steps(), 4);

  std::printf("H3 generate vs h3-tiny sampler (max |diff| / max |golden|):\n");
  for (int k = 0; k < 4; ++k) {
    const std::string p = "[" + std::to_string(k) + "] ";
    const auto& vel = r.trajectory.velocity[k];
    EXPECT_LE(rel_max_diff(models::h3::patchify_video(vel[0]), f.at("velocity_video_rows").select(k), p + "velocity video"),
              1e-4);
    EXPECT_LE(rel_max_diff(models::h3::pack_audio(vel[1]), f.at("velocity_audio_rows").select(k), p + "velocity audio"),
              1e-4);
    const auto& lat = r.trajectory.latents[k + 1];
    EXPECT_LE(rel_max_diff(models::h3::patchify_video(lat[0]), f.at("latents_video_rows").select(k + 1),
                       "latents[" + std::to_string(k + 1) + "] video"),
              1e-4);
    EXPECT_LE(rel_max_diff(models::h3::pack_audio(lat[1]), f.at("latents_audio_rows").select(k + 1),
                       "latents[" + std::to_string(k + 1) + "] audio"),
              1e-4);
  }
  EXPECT_LE(rel_max_diff(r.video, f.at("final_video"), "final_video"), 1e-4);
  EXPECT_LE(rel_max_diff(r.audio, f.at("final_audio"), "final_audio"), 1e-4);
}

}  // namespace
}  // namespace avdit::pipeline
