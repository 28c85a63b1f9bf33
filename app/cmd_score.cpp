// `avdit score teacher|e2e`: what a knob costs. `teacher` holds the input of every step fixed (each
// candidate steps from the teacher run's latents) and reports the error of that one step against
// the size of the teacher's update, per modality; `e2e` lets candidates run free from the same
// noise and compares what comes out (latent SNR by step, frame PSNR / SSIM, log-mel distance, a
// contact sheet). The work lives in src/score/.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>

#include "commands.h"
#include "context.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "io/finite.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "pipeline/latent_shape.h"
#include "pipeline/pipeline_dir.h"
#include "pipeline/text_to_clip.h"
#include "run_checks.h"
#include "score/plot.h"
#include "score/session.h"
#if AVDIT_HAVE_MEDIA
#include "io/media/contact_sheet.h"
#endif

namespace avdit::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct ScoreArgs {
  std::string model, prompts, cache_dir, out, latent_shape, device = "cpu", precision = "fp32";
  std::vector<std::string> texts, candidates;
  bool no_cache = false, floor = false, json = false;
  std::optional<int> steps;
  uint64_t seed = 0;
  std::optional<int64_t> frames, height, width;
  std::optional<float> guidance, video_guidance, audio_guidance;
  std::optional<double> shift;
  std::string save_trajectories;
  std::string teacher_dir, teacher;  // teacher only
};

void add_common(CLI::App* cmd, ScoreArgs& a) {
  cmd->add_option("--model", a.model,
                  "A DiT folder (with --text) or a pipeline folder (with --prompts)")
      ->required();
  cmd->add_option("--text", a.texts,
                  "Text states of a prompt as `generate --text` reads them (repeat for more "
                  "prompts; MAGI-2 also reads null_txt_feat from the same file)");
  cmd->add_option("--prompts", a.prompts,
                  "With a pipeline folder: a file of prompts, one a line (# comments)");
  cmd->add_option("--cache-dir", a.cache_dir, "--prompts: the prompt-state cache (default: none)");
  cmd->add_option("--candidate", a.candidates,
                  "NAME=OPTIONS, generate options of one candidate (repeat): " +
                      score::candidate_option_list());
  cmd->add_flag("--floor", a.floor,
                "Add the built-in floor candidate (MAGI-2: the MoE combine in bf16; H3: the "
                "velocity in bf16); every table gives each candidate's ratio to it");
  cmd->add_option("--steps", a.steps, "Sampling steps (default: the family's)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--seed", a.seed, "Seed of the noise every run starts from (default 0)")
      ->check(uint64_string());
  cmd->add_option("--latent-shape", a.latent_shape,
                  "Latent size T,H,W,A (or --frames/--height/--width)");
  cmd->add_option("--frames", a.frames, "Video frames (with --height, --width in pixels)");
  cmd->add_option("--height", a.height, "Height in pixels");
  cmd->add_option("--width", a.width, "Width in pixels");
  auto* g =
      cmd->add_option("--guidance", a.guidance, "CFG scale of both modalities")->check(CLI::Number);
  cmd->add_option("--video-guidance", a.video_guidance, "Video CFG scale")
      ->excludes(g)
      ->check(CLI::Number);
  cmd->add_option("--audio-guidance", a.audio_guidance, "Audio CFG scale")
      ->excludes(g)
      ->check(CLI::Number);
  cmd->add_option("--shift", a.shift, "Schedule shift (as generate)")->check(CLI::Number);
  cmd->add_option("--device", a.device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--precision", a.precision,
                  "fp32 or bf16 activations of every run (a candidate may override)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--out", a.out,
                  "Folder for the report (markdown, CSV, JSON, PNG plots); created if missing")
      ->required();
  cmd->add_option(
      "--save-trajectories", a.save_trajectories,
      "Also write each candidate run's trajectory here (<candidate>-<prompt>.safetensors)");
  cmd->add_flag("--json", a.json, "Print the JSON report instead of the markdown table");
}

std::vector<std::string> read_prompt_lines(const fs::path& file) {
  AVDIT_REQUIRE(fs::is_regular_file(file), "--prompts {}: no such file", file.string());
  AVDIT_REQUIRE(fs::file_size(file) <= (1 << 20), "--prompts {}: larger than 1 MiB", file.string());
  std::ifstream f(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    out.push_back(line);
  }
  AVDIT_REQUIRE(!out.empty(), "--prompts {}: no prompt in it (one a line; # starts a comment)",
                file.string());
  AVDIT_REQUIRE(out.size() <= 1000, "--prompts {}: {} prompts, at most 1000", file.string(),
                out.size());
  return out;
}

score::Prompt prompt_from_states(const pipeline::NamedTensors& states, bool magi2,
                                 const std::string& where, std::string id, std::string label) {
  auto find = [&](const char* name) -> pipeline::LabeledTensor {
    for (const auto& [n, t] : states)
      if (n == name) return {t, fmt::format("{}:{}", where, n)};
    return {};
  };
  score::Prompt p;
  p.id = std::move(id);
  p.label = std::move(label);
  if (magi2) {
    p.text = find("txt_feat");
    if (!p.text.defined()) p.text = find("text_embeds");
    p.negative = find("null_txt_feat");
  } else {
    p.text = find("text_embeds");
    p.text_tags = find("text_token_tags");
  }
  AVDIT_REQUIRE(p.text.defined(),
                "{}: no {} (text states of a prompt, as `avdit encode` writes them)", where,
                magi2 ? "txt_feat or text_embeds" : "text_embeds");
  p.digest = score::states_digest(
      {{"text", p.text.tensor}, {"negative", p.negative.tensor}, {"tags", p.text_tags.tensor}});
  return p;
}

struct Setup {
  std::unique_ptr<ops::Context> ctx;
  score::Session session;
  std::optional<pipeline::PipelineComponents> pipeline;
  std::vector<fs::path> inputs;
};

// Everything checked before any sampling: the model, candidates, sizes, outputs; then the prompts
// (encoding them, in pipeline mode).
Setup setup(const ScoreArgs& a) {
  AVDIT_REQUIRE(a.texts.empty() != a.prompts.empty(),
                "give --text FILE (text states; --model a DiT folder) or --prompts FILE (--model a "
                "pipeline folder)");
  for (const auto& [value, option] :
       {std::pair{a.guidance, "--guidance"}, std::pair{a.video_guidance, "--video-guidance"},
        std::pair{a.audio_guidance, "--audio-guidance"}})
    if (value) require_finite_option(*value, option);
  if (a.shift) require_finite_option(*a.shift, "--shift");
  Setup s;
  score::Session& ss = s.session;
  if (!a.prompts.empty()) {
    s.pipeline = pipeline::find_components(a.model);
    ss.dit = s.pipeline->dit;
  } else {
    ss.dit = a.model;
  }
  const Checkpoint ckpt = Checkpoint::open(ss.dit);
  AVDIT_REQUIRE(ckpt.config(), "{}: no config.json beside the weights", ss.dit.string());
  const auto family = models::detect_family(*ckpt.config());
  AVDIT_REQUIRE(family && (*family == "magi2-preview" || *family == "h3"),
                "{}: avdit score samples MAGI-2 preview and H3 DiTs; this config is {}",
                ss.dit.string(), family.value_or("of no known family"));
  ss.family = *family;
  ss.magi2 = ss.family == "magi2-preview";
  s.inputs = checkpoint_files(ckpt);

  // Candidates: unique names, the floor among them.
  std::set<std::string> names;
  for (const std::string& spec : a.candidates) {
    score::Candidate c = score::parse_candidate(spec);
    AVDIT_REQUIRE(names.insert(c.name).second, "--candidate {}: the name is given twice", c.name);
    AVDIT_REQUIRE(ss.magi2 || !c.knobs.magi2_only(),
                  "--candidate {}: {} are MAGI-2 options; {} is an H3 model", c.name, c.options,
                  ss.dit.string());
    ss.candidates.push_back(std::move(c));
  }
  if (a.floor) {
    score::Candidate f = score::floor_candidate(ss.magi2, a.precision);
    AVDIT_REQUIRE(names.insert(f.name).second,
                  "--floor adds a candidate named floor; another has that name");
    ss.floor = 0;
    ss.candidates.insert(ss.candidates.begin(), std::move(f));
  }
  AVDIT_REQUIRE(!ss.candidates.empty(),
                "no candidate: give --candidate NAME=OPTIONS (and/or --floor)");

  score::Sampling& sm = ss.sampling;
  sm.steps = a.steps.value_or(score::default_steps(ss.magi2, *ckpt.config()));
  sm.seed = a.seed;
  pipeline::LatentShapes shapes;
  if (!a.latent_shape.empty()) {
    AVDIT_REQUIRE(!a.frames && !a.height && !a.width,
                  "--latent-shape and --frames/--height/--width: give one");
    shapes = pipeline::latent_shapes_from_string(ss.family, *ckpt.config(), a.latent_shape);
  } else {
    AVDIT_REQUIRE(a.frames && a.height && a.width,
                  "give the size: --latent-shape T,H,W,A or --frames/--height/--width");
    shapes = ss.magi2
                 ? pipeline::magi2_latent_shapes(*ckpt.config(), *a.frames, *a.height, *a.width)
                 : pipeline::h3_latent_shapes(*ckpt.config(), *a.frames, *a.height, *a.width);
  }
  sm.video_shape = shapes.video;
  sm.audio_shape = shapes.audio;
  sm.video_guidance = a.guidance ? a.guidance : a.video_guidance;
  sm.audio_guidance = a.guidance ? a.guidance : a.audio_guidance;
  sm.shift = a.shift;
  sm.device = a.device;
  sm.precision = a.precision;

  // Outputs: the report folder (and the trajectories' and teachers'), never a file the run reads.
  for (const auto& [dir, option] :
       {std::pair{a.out, "--out"}, std::pair{a.save_trajectories, "--save-trajectories"},
        std::pair{a.teacher_dir, "--teacher-dir"}}) {
    if (dir.empty()) continue;
    std::error_code ec;
    fs::create_directories(dir, ec);
    AVDIT_REQUIRE(fs::is_directory(dir), "{} {}: not a folder and cannot be made one", option, dir);
    check_output_path(fs::path(dir) / ".avdit-score-check", option, s.inputs);
  }
  ss.save_trajectories = a.save_trajectories;

  s.ctx = make_context(a.device);
  ss.ctx = s.ctx.get();
  // Prompts.
  if (s.pipeline) {
    const std::vector<std::string> lines = read_prompt_lines(a.prompts);
    for (size_t i = 0; i < lines.size(); ++i) {
      pipeline::ClipRequest r;
      r.prompt = lines[i];
      r.seed = a.seed;
      r.act = activation_dtype(a.precision);
      if (!a.cache_dir.empty()) r.cache_dir = fs::path(a.cache_dir);
      pipeline::Clip clip;
      pipeline::encode_prompt(*s.pipeline, r, *s.ctx, clip);
      ss.prompts.push_back(prompt_from_states(clip.text_states, ss.magi2,
                                              fmt::format("{} line {}", a.prompts, i + 1),
                                              fmt::format("p{}", i + 1), lines[i]));
    }
  } else {
    for (size_t i = 0; i < a.texts.size(); ++i) {
      AVDIT_REQUIRE(fs::is_regular_file(a.texts[i]), "--text {}: no such file", a.texts[i]);
      const TensorMap t = read_all(a.texts[i]);
      require_finite(t, a.texts[i]);
      pipeline::NamedTensors states(t.begin(), t.end());
      ss.prompts.push_back(
          prompt_from_states(states, ss.magi2, a.texts[i], fmt::format("p{}", i + 1), a.texts[i]));
    }
  }
  return s;
}

void write_text(const fs::path& path, const std::string& text) { write_file_atomic(path, text); }

void print_and_list(const ScoreArgs& a, const std::string& markdown, const json& j,
                    const std::vector<fs::path>& written) {
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << markdown;
  for (const fs::path& p : written) std::cout << "wrote " << p.string() << "\n";
}

json context_json(const score::Session& s) {
  json prompts = json::array();
  for (const score::Prompt& p : s.prompts)
    prompts.push_back({{"id", p.id}, {"label", p.label}, {"digest", p.digest}});
  return {{"family", s.family},
          {"dit", s.dit.string()},
          {"steps", s.sampling.steps},
          {"seed", s.sampling.seed},
          {"device", s.sampling.device},
          {"precision", s.sampling.precision},
          {"video_shape", s.sampling.video_shape},
          {"audio_shape", s.sampling.audio_shape},
          {"prompts", prompts}};
}

int run_teacher(const ScoreArgs& a) {
  Setup st = setup(a);
  score::Session& s = st.session;
  std::optional<Progress> bar;
  const int64_t total = score::teacher_steps_to_run(s, a.teacher_dir, a.teacher);
  if (log::level() <= log::Level::Info && total > 0) bar.emplace(total, "score");
  s.tick = [&bar] {
    if (bar) bar->tick();
  };
  const std::vector<score::TeacherScores> scores =
      score::score_teacher(s, a.teacher_dir, a.teacher);
  if (bar) bar->finish();
  const auto rows = score::summarize(scores, s.floor);
  const auto quad = score::quadrature(rows, score::find_combinations(s.candidates));
  const std::string md = score::teacher_markdown(rows, quad);
  json j = score::teacher_json(rows, scores, quad);
  j["run"] = context_json(s);
  const fs::path out(a.out);
  std::vector<fs::path> written = {out / "score.md", out / "score.csv", out / "score.json"};
  write_text(written[0], fmt::format("# avdit score teacher: {} ({} steps, {} prompts)\n\n{}",
                                     s.dit.string(), s.sampling.steps, s.prompts.size(), md));
  write_text(written[1], score::teacher_csv(rows));
  write_text(written[2], j.dump(2) + "\n");
  if (score::can_write_png()) {
    std::vector<score::Panel> panels(2);
    for (size_t m = 0; m < 2; ++m) {
      panels[m].title =
          fmt::format("{} error / update (teacher-forced, log scale)", score::kModalities[m]);
      panels[m].log_y = true;
      for (const auto& sc : scores)
        panels[m].series.push_back({sc.candidate.name, score::mean_error_by_step(sc)[m]});
    }
    written.push_back(out / "error_by_step.png");
    score::write_png_file(written.back().string(), score::draw_line_plot(panels),
                          "teacher-forced error per update by step, mean over prompts");
  } else {
    log::warn("this build has no PNG writer: error_by_step.png not written");
  }
  print_and_list(a, md, j, written);
  return 0;
}

int run_e2e(const ScoreArgs& a) {
  Setup st = setup(a);
  score::Session& s = st.session;
  std::optional<Progress> bar;
  const int64_t total =
      static_cast<int64_t>((s.candidates.size() + 1) * s.prompts.size()) * s.sampling.steps;
  if (log::level() <= log::Level::Info) bar.emplace(total, "score");
  s.tick = [&bar] {
    if (bar) bar->tick();
  };
  const score::E2eOutcome o = score::score_e2e(s, st.pipeline, s.ctx);
  if (bar) bar->finish();
  const auto rows = score::summarize(o.scores, s.floor);
  const bool decoded = st.pipeline.has_value();
  std::string md = score::e2e_markdown(rows, decoded);
  if (!decoded)
    md += "\n(latents only: frame PSNR, SSIM and log-mel need a pipeline folder and --prompts)\n";
  json j = score::e2e_json(rows, o.scores);
  j["run"] = context_json(s);
  const fs::path out(a.out);
  std::vector<fs::path> written = {out / "e2e.md", out / "e2e.csv", out / "e2e.json"};
  write_text(written[0], fmt::format("# avdit score e2e: {} ({} steps, {} prompts)\n\n{}",
                                     s.dit.string(), s.sampling.steps, s.prompts.size(), md));
  write_text(written[1], score::e2e_csv(rows));
  write_text(written[2], j.dump(2) + "\n");
  if (score::can_write_png()) {
    std::vector<score::Panel> panels(2);
    for (size_t m = 0; m < 2; ++m) {
      panels[m].title =
          fmt::format("{} latent SNR dB vs the reference (free-running)", score::kModalities[m]);
      for (const auto& sc : o.scores) {
        std::vector<double> mean(sc.prompts.empty() ? 0 : sc.prompts[0].snr_by_step[m].size(), 0.0);
        for (const auto& p : sc.prompts)
          for (size_t k = 0; k < mean.size(); ++k)
            mean[k] += p.snr_by_step[m][k] / double(sc.prompts.size());
        panels[m].series.push_back({sc.candidate.name, mean});
      }
    }
    written.push_back(out / "snr_by_step.png");
    score::write_png_file(written.back().string(), score::draw_line_plot(panels),
                          "free-running latent SNR by step against the reference run");
  }
#if AVDIT_HAVE_MEDIA
  if (decoded) {
    std::vector<std::string> labels = {"reference"};
    for (const auto& c : s.candidates) labels.push_back(c.name);
    for (size_t i = 0; i < s.prompts.size(); ++i) {
      written.push_back(out / fmt::format("contact_sheet-{}.png", s.prompts[i].id));
      media::write_contact_sheet(written.back(), o.frames[i], labels);
    }
  }
#endif
  print_and_list(a, md, j, written);
  return 0;
}

}  // namespace

Run add_score(CLI::App& app) {
  auto* cmd = app.add_subcommand("score",
                                 "What a knob costs. teacher: each candidate steps from the "
                                 "teacher run's latents; the error of that one\n"
                                 "step, |c[k] - t[k]| / |t[k] - t[k-1]| per modality, and the "
                                 "post-step latent SNR. e2e: candidates run\n"
                                 "free from the same noise against the reference: latent SNR by "
                                 "step, frame PSNR, SSIM, log-mel L1, contact sheet.\n"
                                 "Example: avdit score teacher --model ../shared/golden/magi2-tiny "
                                 "--text T.safetensors --latent-shape 2,4,6,10 \\\n"
                                 "           --steps 8 --teacher-dir teachers --floor --candidate "
                                 "fp4=--nvfp4-experts --out report");
  cmd->require_subcommand(1);
  auto a = std::make_shared<ScoreArgs>();
  auto mode = std::make_shared<std::string>();
  auto* teacher = cmd->add_subcommand("teacher", "Teacher-forced one-step error of each candidate");
  add_common(teacher, *a);
  teacher
      ->add_option("--teacher-dir", a->teacher_dir,
                   "Where teacher trajectories are kept and reused (keyed by "
                   "model, prompt, seed, steps, size, guidance, shift, device, precision)")
      ->required();
  teacher->add_option("--teacher", a->teacher,
                      "A teacher trajectory file of avdit score to use instead (one prompt; "
                      "refused when it belongs to another model or run)");
  teacher->callback([mode] { *mode = "teacher"; });
  auto* e2e = cmd->add_subcommand(
      "e2e", "End-to-end metrics of free-running candidates against the reference");
  add_common(e2e, *a);
  e2e->callback([mode] { *mode = "e2e"; });
  return [a, mode] { return *mode == "teacher" ? run_teacher(*a) : run_e2e(*a); };
}

}  // namespace avdit::app
