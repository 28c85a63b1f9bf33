// The runs `avdit score` compares: one DiT loaded with a candidate's knobs, sampling each prompt
// from the same seeded noise, free-running or teacher-forced, always recording the trajectory.
// The knobs that are not load options (the planted perturbation, the velocity in bf16) are probes
// on the sampler loop's points, so they run on any context.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "pipeline/generate_common.h"
#include "score/candidate.h"

namespace avdit::score {

// One prompt's text states in the layout `generate --text` reads.
struct Prompt {
  std::string id;      // p1, p2, ... (table rows, file names)
  std::string label;   // where it came from: the states file, or the prompt text
  std::string digest;  // SHA-256 over the states' names, dtypes, shapes and bytes
  pipeline::LabeledTensor text, negative, text_tags, negative_tags;
};

// The digest of a prompt's states (Prompt::digest).
std::string states_digest(const std::vector<std::pair<std::string, Tensor>>& states);

// What the teacher and every candidate share.
struct Sampling {
  int steps = 0;  // resolved (the family's default when not given)
  uint64_t seed = 0;
  Shape video_shape, audio_shape;
  std::optional<float> video_guidance, audio_guidance;
  std::optional<double> shift;
  std::string device = "cpu", precision = "fp32";
};

// The family's default step count from the DiT's config.
int default_steps(bool magi2, const nlohmann::json& config);

class CandidateRunner {
 public:
  // Loads the DiT of `ckpt` on ctx with the knobs' load options and activation precision (the
  // knob's --precision, else `precision`). BadInput for a MAGI-2 knob on an H3 model.
  CandidateRunner(ops::Context& ctx, const Checkpoint& ckpt, bool magi2, const Knobs& knobs,
                  const std::string& precision);
  ~CandidateRunner();
  CandidateRunner(const CandidateRunner&) = delete;
  CandidateRunner& operator=(const CandidateRunner&) = delete;

  // Samples `prompt`; with `teacher` its latents replace the run's before every step. The result
  // carries the recorded trajectory (host float32).
  pipeline::GenerateResult run(const Prompt& prompt, const Sampling& s,
                               const sample::Trajectory* teacher,
                               const std::function<void(int, int, double)>& progress = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace avdit::score
