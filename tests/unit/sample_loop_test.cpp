// The generic sampling loop: teacher forcing a run with its own trajectory reproduces it bit for bit
// (also through the trajectory file form), the teacher's latents really replace the run's, and bad
// model answers are refused with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "io/safetensors.h"
#include "sample/noise.h"
#include "sample/sampler_loop.h"
#include "sample/schedule.h"

namespace avdit::sample {
namespace {

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

// A deterministic nonlinear stand-in for a model with a conditional and an unconditional pass.
ModelOut fake_model(const StepInfo& s, const std::vector<Tensor>& latents, float wobble) {
  ModelOut out;
  for (const Tensor& x : latents) {
    Tensor c = Tensor::empty(x.shape(), DType::F32), u = Tensor::empty(x.shape(), DType::F32);
    for (int64_t i = 0; i < x.numel(); ++i) {
      c.f32()[i] = std::sin(x.f32()[i] * (1.0f + 0.1f * s.index) + wobble) + 0.3f * x.f32()[i];
      u.f32()[i] = std::cos(x.f32()[i]) * 0.5f;
    }
    out.cond.push_back(c);
    out.uncond.push_back(u);
  }
  return out;
}

struct RunResult {
  std::vector<Tensor> final;
  Trajectory traj;
};

RunResult run_fake(int steps, const ModelFn& model, const Trajectory* teacher = nullptr) {
  ops::CpuContext ctx;
  const FlowUniPCSchedule s = magi2_schedule(steps, 7.0);
  std::vector<std::unique_ptr<Stepper>> steppers;
  steppers.push_back(make_unipc_stepper(ctx, s.sigmas));
  steppers.push_back(make_unipc_stepper(ctx, s.sigmas));
  RunResult r;
  SamplerOptions o;
  o.modalities = {"video", "audio"};
  o.guidance = {5.0f, 7.0f};
  TrajectoryRecorder recorder(r.traj, o.modalities, /*model_out=*/true);
  const ProbeScope record(ctx.observer(), &recorder);
  std::vector<Tensor> latents = {make_noise({1, 4, 2, 3, 3}, 7, kVideoNoiseStream),
                                 make_noise({1, 5, 4}, 7, kAudioNoiseStream)};
  std::optional<TeacherForcing> forcing;
  if (teacher) {
    forcing.emplace(*teacher);
    forcing->check(steps, latents, o.modalities);
  }
  const ProbeScope teach(ctx.observer(), forcing ? &*forcing : nullptr);
  r.final = run_sampler(ctx, std::move(latents), steppers, steps, model, o);
  return r;
}

TEST(SampleLoop, TeacherForcedReplayIsBitExact) {
  const ModelFn model = [](const StepInfo& s, const std::vector<Tensor>& x) { return fake_model(s, x, 0.0f); };
  const RunResult first = run_fake(6, model);
  ASSERT_EQ(first.traj.steps(), 6);
  const RunResult second = run_fake(6, model, &first.traj);
  for (int k = 0; k <= 6; ++k)
    for (int m = 0; m < 2; ++m) EXPECT_TRUE(bit_equal(first.traj.latents[k][m], second.traj.latents[k][m])) << k;
  for (int k = 0; k < 6; ++k)
    for (int m = 0; m < 2; ++m) EXPECT_TRUE(bit_equal(first.traj.velocity[k][m], second.traj.velocity[k][m])) << k;
  for (int m = 0; m < 2; ++m) EXPECT_TRUE(bit_equal(first.final[m], second.final[m]));

  // Through the file form: write, read back, teacher-force again.
  const auto path = std::filesystem::temp_directory_path() / "avdit_sample_loop_trajectory.safetensors";
  write_safetensors(path, trajectory_to_tensors(first.traj));
  const TensorMap back = read_all(path);
  EXPECT_EQ(back.at("latents_video").shape(), (Shape{7, 1, 4, 2, 3, 3}));
  EXPECT_EQ(back.at("uncond_audio").shape(), (Shape{6, 1, 5, 4}));
  const Trajectory teacher = trajectory_from_tensors(back, {"video", "audio"});
  ASSERT_EQ(teacher.model_out.size(), 6u);
  const RunResult third = run_fake(6, model, &teacher);
  for (int m = 0; m < 2; ++m) EXPECT_TRUE(bit_equal(first.final[m], third.final[m]));
  std::filesystem::remove(path);
}

TEST(SampleLoop, TeacherLatentsReplaceTheRunsOwn) {
  const ModelFn model = [](const StepInfo& s, const std::vector<Tensor>& x) { return fake_model(s, x, 0.0f); };
  const RunResult teacher = run_fake(5, model);
  int calls = 0;
  // A different model: its own latents would drift, but every step must start from the teacher's.
  const ModelFn student = [&](const StepInfo& s, const std::vector<Tensor>& x) {
    for (int m = 0; m < 2; ++m) EXPECT_TRUE(bit_equal(x[m], teacher.traj.latents[s.index][m])) << s.index;
    ++calls;
    return fake_model(s, x, 0.05f);
  };
  const RunResult forced = run_fake(5, student, &teacher.traj);
  EXPECT_EQ(calls, 5);
  EXPECT_FALSE(bit_equal(forced.final[0], teacher.final[0]));
}

TEST(SampleLoop, ProgressAndSingleCallGuidance) {
  ops::CpuContext ctx;
  const H3Schedule s = h3_schedule(3);
  std::vector<std::unique_ptr<Stepper>> steppers;
  steppers.push_back(make_h3_euler_stepper(ctx, s.video_t, s.video_ratio));
  int ticks = 0;
  SamplerOptions o;
  o.progress = [&](int done, int total, double seconds) {
    EXPECT_EQ(done, ++ticks);
    EXPECT_EQ(total, 3);
    EXPECT_GE(seconds, 0.0);
  };
  // Velocity toward the data x0 = 2 from noise: x0 = x + sigma v with v = (2 - x) / sigma.
  const ModelFn model = [&](const StepInfo& st, const std::vector<Tensor>& x) {
    Tensor v = Tensor::empty(x[0].shape(), DType::F32);
    for (int64_t i = 0; i < v.numel(); ++i) v.f32()[i] = (2.0f - x[0].f32()[i]) / s.video_sigmas[st.index];
    return ModelOut{{v}, {}};
  };
  const auto out = run_sampler(ctx, {make_noise({8}, 1, 0)}, steppers, 3, model, o);
  EXPECT_EQ(ticks, 3);
  for (int64_t i = 0; i < 8; ++i) EXPECT_NEAR(out[0].f32()[i], 2.0f, 1e-5f);
}

// A NaN in the model's answer stops the run at that step, naming the step, the modality and what
// held it; the steps before it ran.
TEST(SampleLoop, NonFiniteGuardStopsAtTheFirstBadStep) {
  ops::CpuContext ctx;
  const FlowUniPCSchedule s = magi2_schedule(5, 7.0);
  std::vector<std::unique_ptr<Stepper>> steppers;
  steppers.push_back(make_unipc_stepper(ctx, s.sigmas));
  steppers.push_back(make_unipc_stepper(ctx, s.sigmas));
  SamplerOptions o;
  o.modalities = {"video", "audio"};
  o.guidance = {5.0f, 7.0f};
  int calls = 0;
  const ModelFn model = [&](const StepInfo& st, const std::vector<Tensor>& x) {
    ++calls;
    ModelOut out = fake_model(st, x, 0.0f);
    if (st.index == 2) out.uncond[1].f32()[3] = std::nanf("");
    return out;
  };
  NonFiniteGuard guard(o.modalities);
  const ProbeScope scope(ctx.observer(), &guard);
  try {
    run_sampler(ctx, {make_noise({1, 4, 2, 3, 3}, 7, kVideoNoiseStream), make_noise({1, 5, 4}, 7, kAudioNoiseStream)},
                steppers, 5, model, o);
    ADD_FAILURE() << "no error";
  } catch (const RuntimeFailure& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("step 2: the model's unconditional velocity of audio"), std::string::npos) << m;
    EXPECT_NE(m.find("1 non-finite values of 20 (the first at flat index 3)"), std::string::npos) << m;
  }
  EXPECT_EQ(calls, 3);
}

TEST(SampleLoop, RefusesWrongModelAnswers) {
  ops::CpuContext ctx;
  const FlowUniPCSchedule s = magi2_schedule(2, 7.0);
  std::vector<std::unique_ptr<Stepper>> steppers;
  steppers.push_back(make_unipc_stepper(ctx, s.sigmas));
  SamplerOptions o;
  o.modalities = {"video"};
  const ModelFn wrong_shape = [](const StepInfo&, const std::vector<Tensor>&) {
    return ModelOut{{Tensor::zeros({3}, DType::F32)}, {}};
  };
  EXPECT_THROW(run_sampler(ctx, {Tensor::zeros({4}, DType::F32)}, steppers, 2, wrong_shape, o), BadInput);
  const ModelFn missing = [](const StepInfo&, const std::vector<Tensor>&) { return ModelOut{}; };
  EXPECT_THROW(run_sampler(ctx, {Tensor::zeros({4}, DType::F32)}, steppers, 2, missing, o), BadInput);
}

}  // namespace
}  // namespace avdit::sample
