// `avdit generate`: sample final video and audio latents from text states with either model family
// (detected from the model's config), print their SHA-256, and optionally save the trajectory or
// run teacher-forced against a saved one. The sampling itself lives in src/pipeline/.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "commands.h"
#include "context.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "io/finite.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "models/fp16_recipe.h"
#include "models/h3/model.h"
#include "models/magi2/model.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "pipeline/h3_canvas.h"
#include "pipeline/latent_shape.h"
#include "generate_clip.h"
#include "route_options.h"
#include "ops/linear_fp8.h"
#include "step_cache_options.h"
#include "range_report_options.h"
#include "run_checks.h"

namespace avdit::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct GenerateArgs {
  std::string model, text, negative, noise, out, save_trajectory, teacher, latent_shape, time_freqs;
  std::optional<int> steps;
  uint64_t seed = 0;
  std::optional<float> guidance, video_guidance, audio_guidance;
  std::optional<double> shift;
  std::optional<int64_t> frames, height, width;
  bool save_model_out = false, json = false;
  std::string device = "cpu", precision = "fp32";
  std::string fp16_fix = "all";  // --fp16-fix (H3, --precision fp16)
  bool nvfp4_experts = false;
  std::string moe_combine;  // "", "bf16" or "fp32" (ops::CombineSum)
  bool nvfp4_expert_inputs = false;
  std::string fp8_gemm;  // --fp8-gemm tensor|row (H3, latent mode)
  bool fp8_attention = false;  // --fp8-attention (H3, latent mode)
  RouteCli routes;  // MAGI-2's router statistics and expert mask (both modes)
  std::string step_cache;  // --step-cache (both modes)
  std::string range_report;  // --range-report (H3, both modes)
  ClipArgs clip;    // pipeline mode (--prompt)
};

// Noise tensors from --noise (both modalities required when the file is given).
void read_noise(const GenerateArgs& a, bool magi2, pipeline::RunOptions& run) {
  if (a.noise.empty()) return;
  const std::vector<std::string> video_names =
      magi2 ? std::vector<std::string>{"noise_video", "init_video_latent"} : std::vector<std::string>{"noise_video"};
  const std::vector<std::string> audio_names =
      magi2 ? std::vector<std::string>{"noise_audio", "init_audio_latent"} : std::vector<std::string>{"noise_audio"};
  run.noise_video = pipeline::read_one_of(a.noise, video_names, "initial video noise, unpacked latent layout");
  run.noise_audio = pipeline::read_one_of(a.noise, audio_names, "initial audio noise, unpacked latent layout");
}

void resolve_shapes(const GenerateArgs& a, const std::string& family, const json& config, pipeline::RunOptions& run) {
  pipeline::LatentShapes s;
  if (!a.latent_shape.empty()) {
    s = pipeline::latent_shapes_from_string(family, config, a.latent_shape);
  } else if (a.frames || a.height || a.width) {
    AVDIT_REQUIRE(a.frames && a.height && a.width, "--frames, --height and --width go together (pixels)");
    s = family == "h3" ? pipeline::h3_latent_shapes(config, *a.frames, *a.height, *a.width)
                       : pipeline::magi2_latent_shapes(config, *a.frames, *a.height, *a.width);
    if (family == "h3") pipeline::warn_unsupported_h3_canvas(*a.frames, *a.height, *a.width);
  } else if (a.noise.empty()) {
    throw BadInput("no size given: pass --noise FILE, --latent-shape T,H,W,A or --frames/--height/--width");
  }
  run.video_shape = s.video;
  run.audio_shape = s.audio;
}

// Teacher forcing's point: the error of each step alone, max |x_k - teacher x_k| / max |teacher x_k|
// over the latents after step k (both runs started step k from the teacher's latents).
std::vector<std::vector<double>> teacher_step_errors(const sample::Trajectory& run, const sample::Trajectory& teacher) {
  std::vector<std::vector<double>> err(2);
  for (int k = 1; k <= run.steps() && k <= teacher.steps(); ++k)
    for (size_t m = 0; m < 2; ++m) {
      const Tensor x = run.latents[k][m].to_f32(), y = teacher.latents[k][m].to_f32();
      double diff = 0, ref = 0;
      for (int64_t i = 0; i < y.numel(); ++i) {
        diff = std::max(diff, std::fabs(static_cast<double>(x.f32()[i]) - y.f32()[i]));
        ref = std::max(ref, std::fabs(static_cast<double>(y.f32()[i])));
      }
      err[m].push_back(ref > 0 ? diff / ref : diff);
    }
  return err;
}

json summary(const GenerateArgs& a, const std::string& family, const pipeline::GenerateResult& r, double seconds,
             const std::string& sha_video, const std::string& sha_audio) {
  return json{{"family", family},
              {"model", a.model},
              {"steps", r.steps},
              {"device", a.device},
              {"precision", a.precision},
              {"seed", a.seed},
              {"noise", a.noise.empty() ? "seeded" : a.noise},
              {"shift", r.shift},
              {"guidance", {{"video", r.video_guidance}, {"audio", r.audio_guidance}}},
              {"cfg", r.cfg},
              {"seconds", seconds},
              {"step_seconds", r.step_seconds},
              {"final_video", {{"shape", r.video.shape()}, {"sha256", sha_video}}},
              {"final_audio", {{"shape", r.audio.shape()}, {"sha256", sha_audio}}},
              {"out", a.out.empty() ? json(nullptr) : json(a.out)},
              {"trajectory", a.save_trajectory.empty() ? json(nullptr) : json(a.save_trajectory)},
              {"teacher", a.teacher.empty() ? json(nullptr) : json(a.teacher)}};
}

// The size of the run for the memory check, once the text states are read.
void check_memory(const GenerateArgs& a, const std::string& family, const json& config,
                  const pipeline::RunOptions& run, const pipeline::LabeledTensor& text, int steps) {
  GenerateSize s;
  s.video = run.noise_video.defined() ? run.noise_video.tensor.shape() : run.video_shape;
  s.audio = run.noise_audio.defined() ? run.noise_audio.tensor.shape() : run.audio_shape;
  const Shape& ts = text.tensor.shape();
  s.text_tokens = ts.empty() || ts.back() == 0 ? 0 : text.tensor.numel() / ts.back();
  s.steps = steps;
  s.trajectory = run.record_trajectory;
  s.model_out = run.record_model_out;
  s.cpu_forward = a.device == "cpu";
  check_generate_memory(family, config, s);
}

int run_generate(const GenerateArgs& a) {
  if (!a.clip.prompt.empty()) {
    AVDIT_REQUIRE(a.text.empty() && a.negative.empty() && a.noise.empty() && a.teacher.empty() &&
                      a.save_trajectory.empty() && a.time_freqs.empty() && a.moe_combine.empty() &&
                      !a.nvfp4_expert_inputs && a.fp8_gemm.empty() && !a.fp8_attention,
                  "--prompt runs the whole pipeline of a release folder; --text, --negative, --noise, "
                  "--teacher, --save-trajectory, --time-embedding-freqs, --moe-combine, --nvfp4-expert-inputs, "
                  "--fp8-gemm and --fp8-attention belong to the latent mode");
    for (const auto& [value, option] :
         {std::pair{a.guidance, "--guidance"}, std::pair{a.video_guidance, "--video-guidance"},
          std::pair{a.audio_guidance, "--audio-guidance"}})
      if (value) require_finite_option(*value, option);
    AVDIT_REQUIRE(a.precision != "fp16",
                  "--precision fp16 runs the H3 DiT in latent mode (--text FILE); the whole pipeline (--prompt) in "
                  "fp16 is not wired: its text encoder and decoders have no fp16 path");
    ClipCommon m;
    m.model = a.model;
    m.out = a.out;
    m.device = a.device;
    m.precision = a.precision;
    m.latent_shape = a.latent_shape;
    m.steps = a.steps;
    m.seed = a.seed;
    m.video_guidance = a.guidance ? a.guidance : a.video_guidance;
    m.audio_guidance = a.guidance ? a.guidance : a.audio_guidance;
    m.frames = a.frames;
    m.height = a.height;
    m.width = a.width;
    m.nvfp4_experts = a.nvfp4_experts;
    m.json = a.json;
    m.routes = a.routes;
    m.step_cache = a.step_cache;
    m.range_report = a.range_report;
    return run_generate_clip(m, a.clip);
  }
  StepCacheRun step_cache(a.step_cache);
  AVDIT_REQUIRE(!a.clip.random_weights,
                "--random-weights runs the whole pipeline of a folder's configs (--prompt)");
  AVDIT_REQUIRE(!a.text.empty(),
                "generate: give --prompt TEXT (a pipeline folder: the whole pipeline to an mp4) or "
                "--text FILE (a DiT folder: text states to latents)");
  for (const auto& [value, option] :
       {std::pair{a.guidance, "--guidance"}, std::pair{a.video_guidance, "--video-guidance"},
        std::pair{a.audio_guidance, "--audio-guidance"}})
    if (value) require_finite_option(*value, option);
  if (a.shift) require_finite_option(*a.shift, "--shift");
  // A bound before any work: 10^9 steps would run for years without a trajectory to fill memory.
  AVDIT_REQUIRE(!a.steps || (*a.steps >= 1 && *a.steps <= 10000), "--steps {}: expected 1 to 10000",
                a.steps.value_or(0));
  const std::unique_ptr<ops::Context> ctx = make_context(a.device);
  const DType act = activation_dtype(a.precision);
  AVDIT_REQUIRE(a.fp16_fix == "all" || act == DType::F16, "--fp16-fix {} needs --precision fp16", a.fp16_fix);
  const models::Fp16Fixes fixes = models::parse_fp16_fixes(a.fp16_fix);
  const Checkpoint ckpt = Checkpoint::open(a.model);
  AVDIT_REQUIRE(ckpt.config(), "{}: no config.json beside the weights; avdit generate needs the model's config",
                a.model);
  const auto family = models::detect_family(*ckpt.config());
  AVDIT_REQUIRE(family, "{}/config.json: not a config of a family avdit knows (magi2-preview, h3)", a.model);
  AVDIT_REQUIRE(*family == "magi2-preview" || *family == "h3",
                "{}: avdit generate does not sample the {} family yet (magi2-preview, h3)", a.model, *family);
  const bool magi2 = *family == "magi2-preview";
  AVDIT_REQUIRE(!a.nvfp4_experts || magi2, "--nvfp4-experts packs MAGI-2's routed experts; {} is a {} model", a.model,
                *family);
  AVDIT_REQUIRE(a.moe_combine.empty() || magi2, "--moe-combine sets MAGI-2's MoE combine; {} is a {} model", a.model,
                *family);
  AVDIT_REQUIRE(a.fp8_gemm.empty() || act != DType::F16, "--fp8-gemm replaces the block GEMMs; it does not combine with "
                "--precision fp16");
  AVDIT_REQUIRE(!a.nvfp4_expert_inputs || magi2, "--nvfp4-expert-inputs quantises MAGI-2's expert inputs; {} is a {} "
                "model", a.model, *family);
  AVDIT_REQUIRE(!a.save_model_out || !a.save_trajectory.empty(), "--save-model-out needs --save-trajectory FILE");
  // Outputs are checked before the work: writable folders, two distinct files, no input replaced.
  std::vector<fs::path> inputs = checkpoint_files(ckpt);
  for (const std::string& f : {a.text, a.negative, a.noise, a.teacher, a.time_freqs})
    if (!f.empty()) inputs.push_back(f);
  if (!a.out.empty()) check_output_path(a.out, "--out", inputs);
  if (!a.save_trajectory.empty()) check_output_path(a.save_trajectory, "--save-trajectory", inputs);
  if (!a.out.empty() && !a.save_trajectory.empty())
    check_distinct_outputs(a.out, "--out", a.save_trajectory, "--save-trajectory");
  RouteRun routes(a.routes, magi2, a.model, *ckpt.config(), inputs,
                  {{a.out, "--out"}, {a.save_trajectory, "--save-trajectory"}});
  RangeReportRun ranges(a.range_report, *family, *ckpt.config(), inputs,
                        {{a.out, "--out"}, {a.save_trajectory, "--save-trajectory"}});

  pipeline::RunOptions run;
  run.steps = a.steps;
  run.shift = a.shift;
  run.seed = a.seed;
  read_noise(a, magi2, run);
  resolve_shapes(a, *family, *ckpt.config(), run);
  run.record_trajectory = !a.save_trajectory.empty() || !a.teacher.empty();
  run.record_model_out = a.save_model_out;
  sample::Trajectory teacher;
  if (!a.teacher.empty()) {
    AVDIT_REQUIRE(fs::exists(a.teacher), "{}: no such file (--teacher expects a trajectory from --save-trajectory)",
                  a.teacher);
    const TensorMap teacher_tensors = read_all(a.teacher);
    require_finite(teacher_tensors, a.teacher);
    teacher = sample::trajectory_from_tensors(teacher_tensors, {"video", "audio"});
    run.teacher = &teacher;
  }
  // The bar starts before the model loads, so its s/it includes the one-off setup (small next to a step).
  const int total = a.steps.value_or(
      magi2 ? pipeline::magi2_sampler_defaults(models::magi2::parse_magi2_config(*ckpt.config())).steps
            : pipeline::kH3DefaultSteps);
  Progress bar(total, "generate");
  if (log::level() <= log::Level::Info)  // -q: errors only, no bar
    run.progress = [&bar](int done, int total_steps, double) {
      bar.tick();
      if (done == total_steps) bar.finish();
    };
  const std::optional<float> gv = a.guidance ? a.guidance : a.video_guidance;
  const std::optional<float> ga = a.guidance ? a.guidance : a.audio_guidance;

  const auto step_cache_attached = step_cache.attach(*ctx);
  const auto ranges_attached = ranges.attach(*ctx);
  const std::unique_ptr<StepActivity> activity = step_activity(*ctx);
  activity->wrap(run.progress);
  std::string memory;
  const auto t0 = std::chrono::steady_clock::now();
  pipeline::GenerateResult r;
  if (magi2) {
    pipeline::Magi2GenerateOptions o;
    o.run = run;
    o.text = pipeline::read_one_of(a.text, {"text_embeds", "txt_feat"}, "text features [1, L, C] or [L, C]");
    if (!a.negative.empty())
      o.negative = pipeline::read_one_of(a.negative, {"null_txt_feat", "text_embeds", "txt_feat"},
                                         "negative text features for the unconditional pass");
    if (!a.time_freqs.empty())
      o.time_embedding_freqs = pipeline::read_one_of(a.time_freqs, {"time_embedding_freqs"},
                                                     "time-embedding frequency table [time_channel_dim / 2]");
    o.video_guidance = gv;
    o.audio_guidance = ga;
    check_memory(a, *family, *ckpt.config(), run, o.text, total);
    models::magi2::LoadOptions load;
    load.nvfp4_experts = a.nvfp4_experts;
    if (!a.moe_combine.empty())
      load.moe_combine = a.moe_combine == "bf16" ? ops::CombineSum::Bf16 : ops::CombineSum::F32;
    load.nvfp4_expert_inputs = a.nvfp4_expert_inputs;
    load.router_bias_add = routes.router_bias_add();
    if (!a.fp8_gemm.empty()) load.fp8_gemm = ops::parse_fp8_scaling(a.fp8_gemm, "--fp8-gemm");
    load.fp8_attention = a.fp8_attention;
    o.route_recorder = routes.recorder();
    const models::magi2::Magi2Model model(*ctx, ckpt, act, load);
    r = pipeline::generate_magi2(model, o);
    memory = memory_summary(*ctx, model.weight_bytes());
  } else {
    AVDIT_REQUIRE(a.time_freqs.empty(), "--time-embedding-freqs applies to MAGI-2 only");
    pipeline::H3GenerateOptions o;
    o.run = run;
    o.text = pipeline::read_one_of(a.text, {"text_embeds"}, "text states [L, text_dim]");
    o.text_token_tags = pipeline::find_one_of(read_all(a.text), a.text, {"text_token_tags"});  // optional
    if (!a.negative.empty()) {
      o.negative = pipeline::read_one_of(a.negative, {"text_embeds"}, "negative text states [L, text_dim]");
      o.negative_token_tags = pipeline::find_one_of(read_all(a.negative), a.negative, {"text_token_tags"});
    }
    o.video_guidance = gv;
    o.audio_guidance = ga;
    check_memory(a, *family, *ckpt.config(), run, o.text, total);
    models::h3::H3Model model(*ctx, ckpt, act);
    model.set_fp16_fixes(fixes);
    if (!a.fp8_gemm.empty()) model.set_fp8_gemm(ops::parse_fp8_scaling(a.fp8_gemm, "--fp8-gemm"));
    model.set_fp8_attention(a.fp8_attention);
    r = pipeline::generate_h3(model, o);
    memory = memory_summary(*ctx, model.weight_bytes());
  }
  if (ctx->is_cuda()) log::info("{}{}", memory, activity->line());
  ranges.finish(*ctx);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const std::string sha_video = sha256_hex(r.video), sha_audio = sha256_hex(r.audio);
  const std::map<std::string, std::string> meta = {{"family", *family},
                                                   {"steps", std::to_string(r.steps)},
                                                   {"seed", std::to_string(a.seed)},
                                                   {"noise", a.noise.empty() ? "seeded" : a.noise}};
  // Both files are written to temporary files first and renamed together (publish_together), so a
  // kill never leaves a new output beside an old trajectory or the other way round.
  std::optional<OutputFile> out_file, trajectory_file;
  if (!a.out.empty()) {
    out_file.emplace(a.out);
    write_safetensors(*out_file, {{"final_video", r.video}, {"final_audio", r.audio}}, meta);
  }
  if (!a.save_trajectory.empty()) {
    trajectory_file.emplace(a.save_trajectory);
    const TensorMap t = sample::trajectory_to_tensors(r.trajectory);
    write_safetensors(*trajectory_file,
                      std::vector<std::pair<std::string, Tensor>>(t.begin(), t.end()), meta);
  }
  std::vector<OutputFile*> outputs;
  for (auto* f : {&out_file, &trajectory_file})
    if (*f) outputs.push_back(&**f);
  if (OutputFile* f = routes.write(*ctx)) outputs.push_back(f);
  publish_together(outputs);

  std::vector<std::vector<double>> step_err;
  if (run.teacher) step_err = teacher_step_errors(r.trajectory, teacher);
  if (a.json) {
    json j = summary(a, *family, r, seconds, sha_video, sha_audio);
    if (run.teacher) j["teacher_step_error"] = {{"video", step_err[0]}, {"audio", step_err[1]}};
    j.update(routes.json());
    if (step_cache.active()) j["step_cache"] = step_cache.json(r.step_seconds);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: {} steps in {:.2f} s ({:.3f} s/step){}\n", *family, r.steps, seconds,
                           r.steps > 0 ? seconds / r.steps : 0.0, r.cfg ? ", with CFG" : "");
  if (r.step_seconds.size() >= 2) {
    // The total above includes the model's setup and the first step's one-off work (weight upload, kernel
    // loading, cuDNN graph builds); the steady state is the later steps.
    std::vector<double> rest(r.step_seconds.begin() + 1, r.step_seconds.end());
    std::sort(rest.begin(), rest.end());
    std::cout << fmt::format("step time: first {:.1f} ms, then median {:.2f} ms (min {:.2f}, max {:.2f}) over {} steps\n",
                             r.step_seconds.front() * 1e3, rest[rest.size() / 2] * 1e3, rest.front() * 1e3,
                             rest.back() * 1e3, rest.size());
  }
  if (step_cache.active()) std::cout << step_cache.summary(r.step_seconds) << "\n";
  std::cout << fmt::format("final_video {}  sha256 {}\n", r.video.shape_str(), sha_video);
  std::cout << fmt::format("final_audio {}  sha256 {}\n", r.audio.shape_str(), sha_audio);
  for (size_t k = 0; run.teacher && k < step_err[0].size(); ++k)
    std::cout << fmt::format("step {} vs teacher: video {:.3e}  audio {:.3e}  (max |diff| / max |teacher|)\n", k + 1,
                             step_err[0][k], step_err[1][k]);
  if (!a.out.empty()) std::cout << "wrote " << a.out << "\n";
  if (!a.save_trajectory.empty()) std::cout << "wrote trajectory " << a.save_trajectory << "\n";
  if (!a.routes.stats.empty())
    std::cout << routes.summary() << "\nwrote route statistics " << a.routes.stats << "\n";
  return 0;
}

}  // namespace

Run add_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "generate",
      "From a prompt to an mp4 with sound through a whole release folder (--prompt), or final video\n"
      "and audio latents from text states (--text) with a DiT folder (MAGI-2 preview or MiniMax-H3,\n"
      "from the config); SHA-256 of everything printed.\n"
      "Example: avdit generate --model /tmp/tiny-h3 --prompt \"a red fox in the snow\" --frames 22 \\\n"
      "           --height 64 --width 96 --steps 4 --out fox.mp4\n"
      "Example: avdit generate --model ../shared/golden/h3-tiny --text ../shared/golden/h3-tiny/inputs.safetensors \\\n"
      "           --noise ../shared/golden/h3-tiny/sampler.safetensors --steps 4 --out x.safetensors");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("--model", a->model,
                  "A DiT folder (config.json + safetensors) with --text, or a pipeline folder with --prompt")
      ->required();
  cmd->add_option("--text", a->text, "Text states: text_embeds (MAGI-2 also txt_feat) [L, C] or [1, L, C]; H3 "
                  "also reads text_token_tags");
  cmd->add_option("--negative", a->negative, "Text states of the unconditional pass (null_txt_feat, text_embeds or "
                  "txt_feat). MAGI-2 default: no tokens, as the reference; H3 needs it for guidance != 1");
  cmd->add_option("--steps", a->steps, "Sampling steps (default: MAGI-2 evaluation_config, 100; H3 49)");
  cmd->add_option("--seed", a->seed,
                  "Seed of the counter-based noise (default 0); ignored with --noise")
      ->check(uint64_string());
  auto* noise = cmd->add_option("--noise", a->noise, "Initial noise: noise_video, noise_audio (MAGI-2 also "
                                "init_video_latent, init_audio_latent), unpacked latent layout");
  // CLI::Number refuses an empty value (which CLI11 would take as "not given"); NaN and Inf pass it
  // and are refused with the option named in run_generate.
  auto* g = cmd->add_option("--guidance", a->guidance, "CFG scale of both modalities")
                ->check(CLI::Number);
  cmd->add_option("--video-guidance", a->video_guidance,
                  "Video CFG scale (default: MAGI-2 5, H3 1)")
      ->excludes(g)
      ->check(CLI::Number);
  cmd->add_option("--audio-guidance", a->audio_guidance,
                  "Audio CFG scale (default: MAGI-2 7, H3 1)")
      ->excludes(g)
      ->check(CLI::Number);
  cmd->add_option("--shift", a->shift,
                  "Schedule shift (default: MAGI-2 evaluation_config, 7; H3 video 12, audio "
                  "stays 3)")
      ->check(CLI::Number);
  auto* frames = cmd->add_option("--frames", a->frames, "Video frames (with --height, --width in pixels)");
  // Pipeline mode takes --height/--width with --seconds too; latent mode checks all three go together.
  cmd->add_option("--height", a->height, "Height in pixels (pipeline default: H3 768, MAGI-2 256)");
  cmd->add_option("--width", a->width, "Width in pixels (pipeline default: H3 1344, MAGI-2 448)");
  frames->excludes(noise);
  cmd->add_option("--latent-shape", a->latent_shape, "Latent size T,H,W,A: video latent frames, height, width; "
                  "audio latent length")->excludes(frames)->excludes(noise);
  cmd->add_option("--out", a->out,
                  "Latent mode: final_video and final_audio (.safetensors); pipeline mode: the clip (.mp4)");
  auto* traj = cmd->add_option("--save-trajectory", a->save_trajectory,
                               "Write latents_<m> [steps + 1, ...] and velocity_<m> of every step here");
  cmd->add_flag("--save-model-out", a->save_model_out, "Also save the raw model outputs cond_<m>, uncond_<m>")
      ->needs(traj);
  cmd->add_option("--teacher", a->teacher, "Teacher forcing: before each step take this trajectory's latents; "
                  "prints each step's error against it");
  cmd->add_option("--time-embedding-freqs", a->time_freqs, "MAGI-2: use this file's time_embedding_freqs instead of "
                  "avdit's float32 table (for fixture-exact runs)");
  cmd->add_flag("--json", a->json, "Print a JSON summary instead of text");
  cmd->add_flag("--nvfp4-experts", a->nvfp4_experts,
                "MAGI-2: pack the routed experts to NVFP4 at load time (kept packed on the GPU: 4.5 bits per weight)");
  cmd->add_option("--moe-combine", a->moe_combine,
                  "MAGI-2, latent mode: sum the K expert rows with a bf16 running sum or in fp32 rounded once "
                  "(default: as the activations; a precision knob for avdit score)")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  cmd->add_flag("--nvfp4-expert-inputs", a->nvfp4_expert_inputs,
                "MAGI-2, latent mode, CPU: fake NVFP4 on both expert GEMM inputs (dynamic per-tensor scale), "
                "to measure what NVFP4 activations cost");
  cmd->add_option("--fp8-gemm", a->fp8_gemm,
                  "Latent mode: the dense GEMMs in FP8 e4m3 (H3: every block GEMM; MAGI-2: linear_qkv, linear_proj, "
                  "the dense MLPs, the MoE's split linear and shared experts) with tensor (one scale per matrix) "
                  "or row (per token and per output channel) scales (CPU: the definition; GPU: cuBLASLt's FP8 GEMM)")
      ->check(CLI::IsMember({"tensor", "row"}));
  cmd->add_flag("--fp8-attention", a->fp8_attention,
                "Latent mode: every attention core in FP8 e4m3, per-tensor scales (MAGI-2: its sinks applied after "
                "the FP8 output; GPU: cuDNN's FP8 SDPA, sm_90+; CPU: its emulation from the same codes)");
  cmd->add_option("--device", a->device, "cpu (the float32 oracle) or cuda (model, solver and CFG on the GPU)")
      ->capture_default_str();
  cmd->add_option("--precision", a->precision,
                  "fp32 (parity), bf16 (production precision) or fp16 (H3, latent mode: the fp16 recipe for GPUs "
                  "without bf16; emulated on the CPU)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  cmd->add_option("--fp16-fix", a->fp16_fix,
                  "With --precision fp16: the recipe's fixes, all (default), none (the naive cast) or a list of "
                  "residual, rowscale, gating, reduction, gate")
      ->capture_default_str();
  add_route_options(cmd, a->routes);
  cmd->add_option("--step-cache", a->step_cache, kStepCacheHelp);
  cmd->add_option("--range-report", a->range_report, kRangeReportHelp);
  add_clip_options(cmd, a->clip);
  return [a] { return run_generate(*a); };
}

}  // namespace avdit::app
