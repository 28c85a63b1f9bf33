// The generic sampling loop shared by the model families, on any execution context: model callback ->
// per-modality guidance -> per-modality solver step. Its named points (below) are where trajectory
// recording, teacher forcing and run checks attach.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/context.h"

namespace avdit::sample {

// Where the loop is; handed to every callback.
struct StepInfo {
  int index = 0;  // 0-based step
  int total = 0;  // number of steps of the run
};

// The model's answer at one step, one entry per modality, in the order of the latents.
//  cond[m]:   velocity of the conditional (or only) pass, the shape of latents[m].
//  uncond[m]: velocity of the unconditional pass; leave `uncond` empty (or an entry undefined) for a
//             single pass (guidance off, e.g. H3's CFG-distilled weights) - then cond[m] is used as is.
struct ModelOut {
  std::vector<Tensor> cond;
  std::vector<Tensor> uncond;
};

// The model family's forward pass(es) for one step: given the current latents (unpacked, one per
// modality) return their velocities. It must not keep references into `latents` across calls.
using ModelFn = std::function<ModelOut(const StepInfo& step, const std::vector<Tensor>& latents)>;

// Guidance for modality m when an uncond pass exists. The default (no GuideFn) is plain CFG
// u + scale[m] (c - u); MAGI-2 with its optional tricks passes magi2_cfg_video / magi2_cfg_audio.
using GuideFn = std::function<Tensor(int modality, const StepInfo& step, const Tensor& cond,
                                     const Tensor& uncond, const Tensor& latent)>;

// One modality's solver. step() is called once per step with increasing `index` and returns the
// latent after the step (it may keep history, e.g. UniPC).
class Stepper {
 public:
  virtual ~Stepper() = default;
  virtual Tensor step(const StepInfo& step, const Tensor& velocity, const Tensor& latent) = 0;
};

// FlowUniPC (MAGI-2) on the given sigmas (FlowUniPCSchedule::sigmas); its history lives on ctx.
std::unique_ptr<Stepper> make_unipc_stepper(ops::Context& ctx, std::vector<float> sigmas);
// H3 Euler on one modality's t and ratio lists (H3Schedule::video_t / video_ratio, or audio_*).
std::unique_ptr<Stepper> make_h3_euler_stepper(ops::Context& ctx, std::vector<float> t, std::vector<float> ratio);

// What an observed run recorded. latents[k][m]: k = 0 the initial latents, k >= 1 after step k.
// velocity[k][m]: the guided velocity the solver used at step k. model_out[k]: the raw model answer
// at step k (only when the recorder keeps model outputs).
struct Trajectory {
  std::vector<std::string> modalities;
  std::vector<std::vector<Tensor>> latents;
  std::vector<std::vector<Tensor>> velocity;
  std::vector<ModelOut> model_out;
  int steps() const { return static_cast<int>(latents.size()) - 1; }
};

// File form of a trajectory (safetensors), one stacked tensor per modality m:
//   latents_<m> [steps + 1, ...latent shape], velocity_<m> [steps, ...] (guided),
//   and with model outputs: cond_<m> [steps, ...], uncond_<m> [steps, ...] (if there was an uncond pass).
TensorMap trajectory_to_tensors(const Trajectory& t);
// Reads latents_<m> (required) and velocity_/cond_/uncond_<m> (when present) for the given modalities;
// BadInput names the missing tensor and the shapes expected.
Trajectory trajectory_from_tensors(const TensorMap& tensors, const std::vector<std::string>& modalities);

struct SamplerOptions {
  std::vector<std::string> modalities;  // names, e.g. {"video", "audio"}; used in messages and files
  std::vector<float> guidance;          // per modality, for the default CFG (ignored without uncond)
  GuideFn guide;                        // replaces the default CFG when set
  // Called after every step with the steps done, the total and the seconds that step took.
  std::function<void(int done, int total, double seconds)> progress;
};

// The loop's named points (Point::part = the modality):
//   "sample.initial"   the initial latents, before step 0
//   "step.input"       mutable: the latents entering step `index` (teacher forcing replaces them)
//   "step.cond", "step.uncond"  the model's answer at step `index` (uncond only with an uncond pass)
//   "step.velocity"    the guided velocity the solver uses at step `index`
//   "step.output"      the latents after step `index`
inline constexpr const char* kInitialPoint = "sample.initial";
inline constexpr const char* kInputPoint = "step.input";
inline constexpr const char* kCondPoint = "step.cond";
inline constexpr const char* kUncondPoint = "step.uncond";
inline constexpr const char* kVelocityPoint = "step.velocity";
inline constexpr const char* kOutputPoint = "step.output";

// Records a run into a Trajectory (host float32): the initial latents, each step's output and guided
// velocity, and with model_out the raw cond / uncond answers.
class TrajectoryRecorder final : public Probe {
 public:
  TrajectoryRecorder(Trajectory& out, std::vector<std::string> modalities, bool model_out);
  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;

 private:
  Trajectory& t_;
  bool model_out_;
};

// Teacher forcing: before step k the latents are replaced by teacher.latents[k] (k = 0: its initial
// latents; k >= 1: its latents after step k - 1), so each step's error is measured alone. Solver
// history (UniPC) still comes from this run's own model outputs. check() names what does not fit.
class TeacherForcing final : public Probe {
 public:
  explicit TeacherForcing(const Trajectory& teacher) : teacher_(teacher) {}
  void check(int steps, const std::vector<Tensor>& latents, const std::vector<std::string>& modalities) const;
  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;

 private:
  const Trajectory& teacher_;
};

// Stops a run at the first step whose model answer or latents hold a non-finite value (NaN, Inf):
// RuntimeFailure naming the step, the modality, what held it (the conditional or unconditional
// velocity, or the latents after the solver step), how many values and the first one's index. One
// reduction per checked tensor (the latents only: small beside a model call).
class NonFiniteGuard final : public Probe {
 public:
  explicit NonFiniteGuard(std::vector<std::string> modalities) : modalities_(std::move(modalities)) {}
  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;

 private:
  std::vector<std::string> modalities_;
};

// Runs `steps` steps from `latents` (one F32 tensor per modality on ctx) and returns the final latents.
// steppers[m] advances modality m. Throws BadInput if the model answers with the wrong number or shape
// of tensors.
std::vector<Tensor> run_sampler(ops::Context& ctx, std::vector<Tensor> latents,
                                std::vector<std::unique_ptr<Stepper>>& steppers, int steps, const ModelFn& model,
                                const SamplerOptions& options);

}  // namespace avdit::sample
