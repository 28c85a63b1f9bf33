// What the two generate pipelines share: sampling-length and noise options, observers, and the
// result (final latents in the family's unpacked layout, the trajectory, per-step seconds).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "pipeline/inputs.h"
#include "sample/sampler_loop.h"

namespace avdit::pipeline {

struct RunOptions {
  std::optional<int> steps;     // default: the family's (from the checkpoint config)
  std::optional<double> shift;  // MAGI-2: both modalities; H3: the video schedule (audio keeps 3)
  uint64_t seed = 0;            // for make_noise when no noise is given
  LabeledTensor noise_video;    // given initial noise, unpacked latent layout; else seeded noise
  LabeledTensor noise_audio;
  Shape video_shape, audio_shape;  // latent shapes for seeded noise (ignored when noise is given)
  const sample::Trajectory* teacher = nullptr;  // teacher forcing (sampler_loop.h)
  bool record_trajectory = false;
  bool record_model_out = false;  // with record_trajectory: also the raw cond/uncond outputs
  std::function<void(int done, int total, double seconds)> progress;
};

struct GenerateResult {
  Tensor video, audio;            // final latents, unpacked (MAGI-2 [1, C, T, H, W] / [1, L_a, C_a];
                                  // H3 [1, 24, T, H, W] / [2, 32, T_a])
  sample::Trajectory trajectory;  // when RunOptions::record_trajectory
  std::vector<double> step_seconds;
  // The settings the run actually used (defaults resolved), for summaries.
  int steps = 0;
  double shift = 0;
  float video_guidance = 1, audio_guidance = 1;
  bool cfg = false;  // an unconditional pass was made
};

// The initial latent of one modality: the given noise (checked against `expected`, whose -1 entries
// are free) or make_noise(shape, seed, stream). `what` names the modality in messages.
Tensor initial_latent(const LabeledTensor& given, const Shape& shape, const Shape& expected, uint64_t seed,
                      uint64_t stream, const std::string& what);

// A shape with -1 as "any" in messages: [1, 48, T, H, W] style.
bool shape_matches(const Shape& shape, const Shape& pattern);

// The probes of a run that both families share, attached to the context's observer for the run's
// lifetime: the non-finite guard (always), trajectory recording (into result.trajectory) and teacher
// forcing; plus the per-step seconds collected into `result` (then passed on to run.progress).
class RunProbes {
 public:
  RunProbes(ops::Context& ctx, const RunOptions& run, GenerateResult& result, sample::SamplerOptions& so,
            const std::vector<Tensor>& initial, int steps);

 private:
  sample::NonFiniteGuard guard_;
  ProbeScope guard_scope_;
  std::optional<sample::TrajectoryRecorder> recorder_;
  std::optional<sample::TeacherForcing> teacher_;
  std::optional<ProbeScope> record_scope_, teacher_scope_;
};
std::string pattern_str(const Shape& pattern);

}  // namespace avdit::pipeline
