// Sigma schedules of the two model families, computed with the same floating-point types and
// operation order as the references so that the sigmas (and what is derived from them) match bit for bit.
#pragma once

#include <cstdint>
#include <vector>

namespace avdit::sample {

// MAGI-2: FlowUniPCMultistepScheduler.set_timesteps(steps, shift) of the reference
// (SandAI-org/MAGI-2-preview inference/pipeline/sampler.py), num_train_timesteps 1000, final sigma 0.
struct FlowUniPCSchedule {
  std::vector<float> sigmas;       // steps + 1 values: fp32(shifted sigma), then 0
  std::vector<int64_t> timesteps;  // steps values: trunc(1000 * shifted sigma) (float64 product)
  std::vector<float> model_t;      // steps values: the time fed to the model, fp32(timestep) * fp32(0.001)
};

// sigma_max = fp32(1 - 1/1000) (the first training sigma), s = linspace(sigma_max, 0, steps + 1)[:steps]
// in float64 exactly as numpy evaluates it (i * step + start), s' = shift s / (1 + (shift - 1) s) in
// float64. model_t reproduces the reference's GPU division t / 1000.0, which multiplies by the fp32
// reciprocal (a correctly rounded CPU division is 1 ulp lower for some t; see the magi2-tiny README).
// Above ~200 steps at shift 7 the first timesteps repeat after truncation; the reference's
// index_for_timestep would then start at sigma index 1 (and overrun at the end). Here the solver always
// starts at index 0 and timesteps only feed model_t.
FlowUniPCSchedule magi2_schedule(int steps, double shift);

// H3 (MiniMax-H3 reference sampler, shifted_sigma_schedule): b = torch.linspace(1, 0, points) in
// float32, sigma = shift b / (1 + (shift - 1) b) in float32, consecutive duplicates removed, a final 0
// appended if missing. `points` counts sigma values (steps + 1).
//
// torch's CPU linspace fills vectorised chunks as base + j * step (j < vector width), which differs
// from the scalar formula by 1 ulp at some points once points >= 2 * width. `torch_vector_width`
// selects which one to imitate: 0 = scalar formula (what torch does for points < 16, e.g. all the
// fixtures), 8 = AVX2 build, 16 = AVX-512 build.
std::vector<float> h3_sigmas(int points, double shift, int torch_vector_width = 0);

// The two H3 schedules of one run and what the Euler update derives from them, all float32.
struct H3Schedule {
  std::vector<float> video_sigmas, audio_sigmas;  // steps + 1 values each, last 0
  std::vector<float> video_t, audio_t;            // steps values: t = fp32(1 - sigma), fed to the model
  std::vector<float> video_ratio, audio_ratio;    // steps values: sigma[k+1] / sigma[k] (fp32 division)
  int steps() const { return static_cast<int>(video_t.size()); }
};

// Video shift 12 and audio shift 3 by default (reference-configs/h3/scheduler, audio_scheduler).
// Throws BadInput if duplicate removal leaves the two schedules with different lengths (the
// reference refuses that too).
H3Schedule h3_schedule(int steps, double video_shift = 12.0, double audio_shift = 3.0,
                       int torch_vector_width = 0);

}  // namespace avdit::sample
