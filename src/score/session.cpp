// Teacher-forced and end-to-end scoring (see session.h).
#include "score/session.h"

#include <limits>

#include "core/error.h"
#include "core/log.h"
#include "pipeline/text_to_clip.h"
#include "score/media_metrics.h"
#include "score/teacher_cache.h"

namespace avdit::score {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void save_trajectory(const Session& s, const Candidate& c, const Prompt& p,
                     const sample::Trajectory& t) {
  if (s.save_trajectories.empty()) return;
  write_safetensors(s.save_trajectories / fmt::format("{}-{}.safetensors", c.name, p.id),
                    sample::trajectory_to_tensors(t),
                    {{"candidate", c.name}, {"options", c.options}, {"prompt", p.id}});
}

std::function<void(int, int, double)> ticker(const Session& s) {
  return [&s](int, int, double) {
    if (s.tick) s.tick();
  };
}

}  // namespace

int64_t teacher_steps_to_run(const Session& s, const fs::path& dir, const fs::path& file) {
  int64_t runs = static_cast<int64_t>(s.candidates.size() * s.prompts.size());
  if (file.empty()) {
    const Checkpoint ckpt = Checkpoint::open(s.dit);
    const std::string fp = model_fingerprint(ckpt);
    for (const Prompt& p : s.prompts)
      runs += !fs::exists(teacher_path(dir, teacher_key(fp, s.family, p, s.sampling)));
  }
  return runs * s.sampling.steps;
}

std::vector<TeacherScores> score_teacher(const Session& s, const fs::path& dir,
                                         const fs::path& file) {
  AVDIT_REQUIRE(file.empty() || s.prompts.size() == 1,
                "--teacher FILE scores one prompt; {} were given", s.prompts.size());
  const Checkpoint ckpt = Checkpoint::open(s.dit);
  const std::string fp = model_fingerprint(ckpt);
  // Every teacher first: a mismatching given or stored trajectory is refused before any candidate
  // runs.
  std::vector<sample::Trajectory> teachers;
  std::optional<CandidateRunner> teacher_model;
  for (const Prompt& p : s.prompts) {
    const nlohmann::json key = teacher_key(fp, s.family, p, s.sampling);
    const fs::path path = file.empty() ? teacher_path(dir, key) : file;
    if (!file.empty() || fs::exists(path)) {
      teachers.push_back(read_teacher(path, key));
      log::info("teacher of {}: {}", p.id, path.string());
      continue;
    }
    if (!teacher_model) teacher_model.emplace(*s.ctx, ckpt, s.magi2, Knobs{}, s.sampling.precision);
    pipeline::GenerateResult r = teacher_model->run(p, s.sampling, nullptr, ticker(s));
    write_teacher(path, key, r.trajectory);
    log::info("teacher of {}: sampled, stored in {}", p.id, path.string());
    teachers.push_back(std::move(r.trajectory));
  }
  teacher_model.reset();

  std::vector<TeacherScores> out;
  for (const Candidate& c : s.candidates) {
    TeacherScores sc{c, {}};
    const CandidateRunner runner(*s.ctx, ckpt, s.magi2, c.knobs, s.sampling.precision);
    for (size_t i = 0; i < s.prompts.size(); ++i) {
      const pipeline::GenerateResult r =
          runner.run(s.prompts[i], s.sampling, &teachers[i], ticker(s));
      save_trajectory(s, c, s.prompts[i], r.trajectory);
      sc.prompts.push_back(step_series(r.trajectory, teachers[i]));
    }
    out.push_back(std::move(sc));
  }
  return out;
}

E2eOutcome score_e2e(const Session& s, const std::optional<pipeline::PipelineComponents>& decode,
                     ops::Context* vae) {
  const Checkpoint ckpt = Checkpoint::open(s.dit);
  struct Run {
    sample::Trajectory trajectory;
    pipeline::Clip clip;  // latents and, when decoded, frames and waveform
  };
  auto sample_all = [&](const Knobs& knobs, const Candidate* c) {
    std::vector<Run> runs;
    const CandidateRunner runner(*s.ctx, ckpt, s.magi2, knobs, s.sampling.precision);
    for (const Prompt& p : s.prompts) {
      pipeline::GenerateResult r = runner.run(p, s.sampling, nullptr, ticker(s));
      if (c) save_trajectory(s, *c, p, r.trajectory);
      Run run{std::move(r.trajectory), {}};
      run.clip.video_latent = r.video;
      run.clip.audio_latent = r.audio;
      runs.push_back(std::move(run));
    }
    return runs;
  };
  auto decode_all = [&](std::vector<Run>& runs) {
    if (!decode) return;
    for (Run& r : runs) pipeline::decode_latents(*decode, *vae, r.clip);
  };
  std::vector<Run> ref = sample_all(Knobs{}, nullptr);
  decode_all(ref);
  E2eOutcome out;
  out.frames.resize(s.prompts.size());
  for (size_t i = 0; i < ref.size(); ++i)
    if (decode) out.frames[i].push_back(ref[i].clip.frames);
  for (const Candidate& c : s.candidates) {
    std::vector<Run> runs = sample_all(c.knobs, &c);
    decode_all(runs);
    E2eScores sc{c, {}};
    for (size_t i = 0; i < runs.size(); ++i) {
      E2ePrompt e;
      const StepSeries series = step_series(runs[i].trajectory, ref[i].trajectory);
      e.snr_by_step = series.snr;
      e.final_snr[0] = snr_db(runs[i].clip.video_latent, ref[i].clip.video_latent);
      e.final_snr[1] = snr_db(runs[i].clip.audio_latent, ref[i].clip.audio_latent);
      e.psnr = e.ssim = e.mel_l1 = kNaN;
      if (decode) {
        e.psnr = frame_psnr_db(runs[i].clip.frames, ref[i].clip.frames);
        e.ssim = ssim_luma(runs[i].clip.frames, ref[i].clip.frames);
        e.mel_l1 =
            multiscale_log_mel_l1(runs[i].clip.audio, ref[i].clip.audio, ref[i].clip.sample_rate);
        out.frames[i].push_back(runs[i].clip.frames);
      }
      sc.prompts.push_back(std::move(e));
    }
    out.scores.push_back(std::move(sc));
  }
  return out;
}

}  // namespace avdit::score
