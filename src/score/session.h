// The two scorings of `avdit score` over prompts and candidates on one DiT:
//  teacher: each prompt's teacher trajectory (from --teacher-dir when it holds this run's, else
//    sampled and stored there), then every candidate teacher-forced against it;
//  e2e: the reference (the run's own settings) and every candidate free-running from the same
//    seeded noise; with a pipeline folder each run is also decoded to frames and waveform.
// One model is loaded at a time (the teacher's, then each candidate's) and freed after its prompts.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "pipeline/pipeline_dir.h"
#include "score/report.h"
#include "score/run.h"

namespace avdit::score {

struct Session {
  ops::Context* ctx = nullptr;  // where the DiT runs
  std::filesystem::path dit;    // the DiT folder
  bool magi2 = false;
  std::string family;  // "magi2-preview" or "h3"
  std::vector<Prompt> prompts;
  Sampling sampling;
  std::vector<Candidate> candidates;  // the floor (when asked) among them
  std::optional<size_t> floor;
  // Where each candidate's run is written (DIR/<candidate>-<prompt>.safetensors), for independent
  // checks of the numbers; empty: not written.
  std::filesystem::path save_trajectories;
  // Called after every sampling step of every run.
  std::function<void()> tick;
};

// Steps of sampling the teacher scoring will run (teachers not found in the folder, candidates).
int64_t teacher_steps_to_run(const Session& s, const std::filesystem::path& teacher_dir,
                             const std::filesystem::path& teacher_file);

// teacher_file (optional, one prompt): a given trajectory instead of the folder's.
std::vector<TeacherScores> score_teacher(const Session& s, const std::filesystem::path& teacher_dir,
                                         const std::filesystem::path& teacher_file);

struct E2eOutcome {
  std::vector<E2eScores> scores;
  // Decoded frames per prompt: the reference's then each candidate's (for the contact sheets).
  std::vector<std::vector<Tensor>> frames;
};

// decode: the pipeline folder's decoders on vae_ctx, or nullopt (latents only).
E2eOutcome score_e2e(const Session& s, const std::optional<pipeline::PipelineComponents>& decode,
                     ops::Context* vae_ctx);

}  // namespace avdit::score
