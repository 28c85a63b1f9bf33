// The refiner's second stage against ../shared/golden/magi2-refiner-tiny/sampler.safetensors: the
// ZeroSNR table, the trilinear upsample and re-noise, the 5-step shift-5 schedule, UniPC replayed
// on the stored guided velocities (1e-6 of max), and the whole refine() from the preview latent
// with the recorded noise, CFG video 2 / audio 5, both the shipping run (no audio tokens) and the
// audio variant (scale 0.5), every step's guided velocity and latent within the README's 2e-4.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/refiner/sampler.h"
#include "ops/context.h"
#include "sample/sampler_loop.h"
#include "sample/schedule.h"
#include "testing/golden_compare.h"

namespace avdit::models::magi2::refiner {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "magi2-refiner-tiny";

double check(const Tensor& got, const Tensor& want, const std::string& name, double bar) {
  EXPECT_EQ(got.numel(), want.numel()) << name;
  const double e = testing::golden_rel_err(got, want);
  std::printf("  %-28s %.3g of max\n", name.c_str(), e);
  EXPECT_LE(e, bar) << name;
  return e;
}

RefinerConfig tiny_config() { return parse_refiner_config(read_json(kFixture / "config.json")); }

TEST(Magi2RefinerSampler, TableScheduleAndGuidanceMatch) {
  const TensorMap f = read_all(kFixture / "sampler.safetensors");
  const std::vector<float> table = zero_snr_table();
  const Tensor& want = f.at("zero_snr_sigmas");
  ASSERT_EQ(want.numel(), 1000);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) differ += table[i] != want.f32()[i];
  std::printf("  ZeroSNR table: %d of 1000 values differ\n", differ);
  check(Tensor::from_floats(table, {1000}), want, "zero_snr_sigmas", 1e-6);  // 1 ulp at most
  const RefinerSamplerConfig s = tiny_config().sampler;
  EXPECT_EQ(table[s.noise_value], f.at("renoise_sigma").f32()[0]);
  const sample::FlowUniPCSchedule sched =
      sample::magi2_schedule(static_cast<int>(s.num_inference_steps), s.shift);
  ASSERT_EQ(static_cast<int64_t>(sched.sigmas.size()), f.at("sigmas").numel());
  for (size_t i = 0; i < sched.sigmas.size(); ++i)
    EXPECT_EQ(sched.sigmas[i], f.at("sigmas").f32()[i]) << "sigma " << i;
  for (size_t i = 0; i < sched.timesteps.size(); ++i)
    EXPECT_EQ(sched.timesteps[i], f.at("timesteps").data<int64_t>()[i]) << "timestep " << i;
  EXPECT_EQ(s.video_guidance, f.at("video_guidance_scale").f32()[0]);
  EXPECT_EQ(s.audio_guidance, f.at("audio_guidance_scale").f32()[0]);
}

TEST(Magi2RefinerSampler, UpsampleAndRenoiseMatch) {
  const TensorMap f = read_all(kFixture / "sampler.safetensors");
  const Tensor up = upsample_preview(f.at("preview_video_latent"), 8, 13);
  ASSERT_EQ(up.shape(), f.at("upsampled_video_latent").shape());
  check(up, f.at("upsampled_video_latent"), "upsampled_video_latent", 1e-6);
  const Tensor start = renoise(f.at("upsampled_video_latent"), f.at("renoise_noise"),
                               f.at("renoise_sigma").f32()[0]);
  check(start, f.at("renoised_video_latent"), "renoised_video_latent", 1e-6);
  EXPECT_THROW(upsample_preview(Tensor::zeros({1, 48, 5, 4}, DType::F32), 8, 13), BadInput);
}

TEST(Magi2RefinerSampler, UniPCReplayOnStoredVelocities) {
  const TensorMap f = read_all(kFixture / "sampler.safetensors");
  const RefinerSamplerConfig s = tiny_config().sampler;
  const sample::FlowUniPCSchedule sched =
      sample::magi2_schedule(static_cast<int>(s.num_inference_steps), s.shift);
  ops::CpuContext ctx;
  auto stepper = sample::make_unipc_stepper(ctx, sched.sigmas);
  Tensor x = f.at("renoised_video_latent");
  for (int i = 0; i < 5; ++i) {
    const std::string p = "step" + std::to_string(i) + ".";
    x = stepper->step({i, 5}, f.at(p + "cfg_video"), x);
    check(x, f.at(p + "video_latent"), p + "video_latent", 1e-6);
  }
}

// refine() end to end on the CPU with the golden's model and noise; every step recorded.
void run_end_to_end(bool audio_variant) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap f = read_all(kFixture / "sampler.safetensors");
  ops::CpuContext ctx;
  const RefinerModel model(ctx, ckpt, DType::F32);
  RefinerSamplerConfig s = model.config().sampler;
  RefineInputs in;
  in.preview_video = f.at("preview_video_latent");
  in.text = f.at("txt_feat");
  in.null_text = f.at("null_txt_feat");
  in.height = 8;
  in.width = 13;
  in.video_noise = f.at("renoise_noise");
  const std::string pre = audio_variant ? "audio." : "";
  if (audio_variant) {
    s.audio_noise_scale = f.at("audio.noise_scale").f32()[0];
    in.preview_audio = f.at("audio.preview_audio_latent");
    in.audio_noise = f.at("audio.audio_noise");
  }
  sample::Trajectory traj;
  const std::vector<std::string> modalities = audio_variant
                                                  ? std::vector<std::string>{"video", "audio"}
                                                  : std::vector<std::string>{"video"};
  sample::TrajectoryRecorder recorder(traj, modalities, /*model_out=*/true);
  Refined r;
  {
    const ProbeScope scope(ctx.observer(), &recorder);
    r = refine(model, in, s);
  }
  ASSERT_EQ(traj.steps(), 5);
  constexpr double kBar = 2e-4;  // README: full sampling (observed <= 4.6e-6, audio 2.86e-5)
  check(traj.latents[0][0], f.at("renoised_video_latent"), "initial video latent", 1e-6);
  for (int i = 0; i < 5; ++i) {
    const std::string p = "step" + std::to_string(i) + ".";
    if (!audio_variant) {
      check(traj.velocity[i][0], f.at(p + "cfg_video"), p + "cfg_video", kBar);
      check(traj.latents[i + 1][0], f.at(p + "video_latent"), p + "video_latent", kBar);
    } else {
      check(traj.model_out[i].cond[1], f.at(pre + p + "cond_audio"), pre + p + "cond_audio", kBar);
      check(traj.model_out[i].uncond[1], f.at(pre + p + "uncond_audio"), pre + p + "uncond_audio",
            kBar);
      check(traj.velocity[i][1], f.at(pre + p + "cfg_audio"), pre + p + "cfg_audio", kBar);
      check(traj.latents[i + 1][1], f.at(pre + p + "audio_latent"), pre + p + "audio_latent", kBar);
    }
  }
  if (!audio_variant) {
    check(traj.model_out[0].cond[0], f.at("step0.cond_video"), "step0.cond_video", kBar);
    check(traj.model_out[0].uncond[0], f.at("step0.uncond_video"), "step0.uncond_video", kBar);
    EXPECT_EQ(r.audio.numel(), 0);  // the shipping run has no audio tokens
  } else {
    check(traj.latents[0][1], f.at("audio.start_audio_latent"), "audio.start_audio_latent", 1e-6);
    check(traj.velocity[0][0], f.at("audio.step0.cfg_video"), "audio.step0.cfg_video", kBar);
    check(r.audio, f.at("audio.final_audio_latent"), "audio.final_audio_latent", kBar);
  }
  check(r.video, f.at(pre + "final_video_latent"), pre + "final_video_latent", kBar);
}

TEST(Magi2RefinerSampler, RefineMatchesFinalLatent) { run_end_to_end(false); }
TEST(Magi2RefinerSampler, RefineWithAudioMatchesFinalLatents) { run_end_to_end(true); }

TEST(Magi2RefinerSampler, WrongPreviewLatentIsBadInput) {
  const Checkpoint ckpt = Checkpoint::open(kFixture);
  const TensorMap f = read_all(kFixture / "sampler.safetensors");
  ops::CpuContext ctx;
  const RefinerModel model(ctx, ckpt, DType::F32);
  RefineInputs in;
  in.preview_video = Tensor::zeros({1, 16, 5, 4, 6}, DType::F32);  // 16 channels, not 48
  in.text = f.at("txt_feat");
  in.null_text = f.at("null_txt_feat");
  in.height = 8;
  in.width = 13;
  in.video_noise = f.at("renoise_noise");
  EXPECT_THROW(refine(model, in, model.config().sampler), BadInput);
  in.preview_video = f.at("preview_video_latent");
  in.video_noise = Tensor::zeros({1, 48, 9, 8, 12}, DType::F32);  // not the upsampled shape
  EXPECT_THROW(refine(model, in, model.config().sampler), BadInput);
}

}  // namespace
}  // namespace avdit::models::magi2::refiner
