#include "generate_clip.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "bench/report.h"
#include "context.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "io/finite.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "pipeline/enhance/enhancer.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "pipeline/h3_canvas.h"
#include "pipeline/pipeline_dir.h"
#include "pipeline/prompt_cache.h"
#include "pipeline/text_to_clip.h"
#include "run_checks.h"
#include "step_cache_options.h"
#include "range_report_options.h"
#if AVDIT_HAVE_MEDIA
#include "io/media/frame_rate.h"
#include "io/media/mp4_writer.h"
#endif

namespace avdit::app {

namespace fs = std::filesystem;
using nlohmann::json;

void add_clip_options(CLI::App* cmd, ClipArgs& a) {
  cmd->add_option("--prompt", a.prompt,
                  "Pipeline mode: the prompt (with --model a pipeline folder and --out CLIP.mp4)");
  cmd->add_option("--negative-prompt", a.negative_prompt,
                  "MAGI-2: the unconditional prompt (default: the reference's negative prompt when "
                  "the config's use_negative_prompt is true)");
  cmd->add_flag("--no-negative-prompt", a.no_negative,
                "MAGI-2: an empty unconditional text instead of the negative prompt");
  cmd->add_option("--seconds", a.seconds,
                  "Pipeline mode: clip length (default: H3 5 s on its 17n+5 frame grid at 24 fps; "
                  "MAGI-2 10 s)")
      ->check(CLI::Number);
  cmd->add_option("--dit", a.dit, "Pipeline mode: the DiT folder instead of the layout's");
  cmd->add_option("--text-encoder", a.text_encoder, "Pipeline mode: the text encoder folder");
  cmd->add_option("--tokenizer", a.tokenizer, "Pipeline mode: the tokenizer folder");
  cmd->add_option("--video-vae", a.video_vae, "Pipeline mode: the video decoder folder");
  cmd->add_option("--audio-vae", a.audio_vae, "Pipeline mode: the audio decoder folder");
  cmd->add_option("--text-encoder-device", a.text_device,
                  "Pipeline mode: cpu or cuda for the text encoder (default: --device)");
  cmd->add_option("--cache-dir", a.cache_dir,
                  "Pipeline mode: the prompt-state cache (default $XDG_CACHE_HOME/avdit or "
                  "~/.cache/avdit)");
  cmd->add_flag("--no-cache", a.no_cache,
                "Pipeline mode: no prompt-state or adaLN-table cache (compute both)");
  cmd->add_flag("--no-adaln-table", a.no_adaln_table,
                "H3: compute the modulation from the adaLN projections at every step (on the device) "
                "instead of a table of the run's timesteps");
  cmd->add_flag("--random-weights", a.random_weights,
                "Pipeline mode: random weights of the folder's configs, drawn from --seed, instead "
                "of its weight files (memory and speed runs at full size without the checkpoints; "
                "the folder needs its configs and tokenizer only: `avdit init --pipeline h3|magi2 "
                "--size full --configs-only`)");
  cmd->add_option("--keep-latents", a.keep_latents,
                  "Pipeline mode: also write the final latents and text states (.safetensors)");
  cmd->add_option("--crf", a.crf, "Pipeline mode: x264 quality, 0 (lossless) .. 51")
      ->check(CLI::Range(0, 51))
      ->capture_default_str();
  cmd->add_option("--enhance", a.enhance_url,
                  "Pipeline mode: enhance the prompt first through this OpenAI-compatible endpoint");
  cmd->add_option("--enhance-model", a.enhance_model, "The enhancer's model name");
  add_enhance_options(cmd, a.enhance);
  cmd->add_option("--refiner", a.refiner,
                  "MAGI-2: the refiner folder instead of the layout's refiner/");
  auto* on = cmd->add_flag("--refine", a.refine,
                           "MAGI-2: run the 1080p refiner after the preview (the default when the "
                           "pipeline folder has refiner/)");
  cmd->add_flag("--no-refine", a.no_refine, "MAGI-2: the preview's clip only, no refiner stage")
      ->excludes(on);
  cmd->add_option(
      "--refine-steps", a.refine_steps,
      "MAGI-2 refiner: UniPC steps (default: its magi2_refiner_num_inference_steps, 5)");
  cmd->add_option("--refine-shift", a.refine_shift,
                  "MAGI-2 refiner: schedule shift (default: magi2_refiner_shift, 5)")
      ->check(CLI::Number);
  cmd->add_option("--refine-video-guidance", a.refine_video_guidance,
                  "MAGI-2 refiner: video CFG scale (default: its config, 2)")
      ->check(CLI::Number);
  cmd->add_option("--refine-audio-guidance", a.refine_audio_guidance,
                  "MAGI-2 refiner: audio CFG scale (default: its config, 5; used only when the "
                  "refiner steps audio)")
      ->check(CLI::Number);
  cmd->add_option("--refine-height", a.refine_height,
                  "MAGI-2 refiner: height in pixels, a multiple of 16 (default: the reference's "
                  "1080p tier, 1088, over its 512x896 preview; twice --height when that is given)");
  cmd->add_option("--refine-width", a.refine_width,
                  "MAGI-2 refiner: width in pixels (default 1920, or twice --width)");
}

namespace {

// H3 frames on the 17n + 5 grid nearest to `seconds` at 24 fps; MAGI-2 as its engine sizes a run:
// round(seconds * fps * 2) frames.
int64_t frames_for_seconds(const pipeline::PipelineComponents& c, const json& dit_config,
                           double seconds) {
  AVDIT_REQUIRE(std::isfinite(seconds) && seconds > 0 && seconds <= 600,
                "--seconds {}: expected a length above 0 and at most 600", seconds);
  if (c.family == pipeline::PipelineFamily::H3) {
    const double n = std::max(0.0, std::round((seconds * 24.0 - 5.0) / 17.0));
    return 17 * static_cast<int64_t>(n) + 5;
  }
  return std::max<int64_t>(1, std::llround(seconds * pipeline::output_fps(c.family, dit_config) * 2.0));
}

std::string file_sha256(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0)
    h.update(std::string_view(buf.data(), static_cast<size_t>(f.gcount())));
  return h.hex_digest();
}

bool has_safetensors(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json")) return true;
  }
  return false;
}

}  // namespace

int run_generate_clip(const ClipCommon& m, const ClipArgs& a) {
  StepCacheRun step_cache(m.step_cache);
  AVDIT_REQUIRE(!m.out.empty(), "pipeline mode (--prompt) needs --out CLIP.mp4");
  // .safetensors: the decoded clip itself (frames [T, 3, H, W] and waveform, float32), for numeric
  // comparisons and builds without FFmpeg.
  const bool raw = m.out.ends_with(".safetensors");
  AVDIT_REQUIRE(m.out.ends_with(".mp4") || raw,
                "--out {}: pipeline mode writes an .mp4 (or the decoded clip as .safetensors)", m.out);
  AVDIT_REQUIRE(a.keep_latents.empty() || a.keep_latents.ends_with(".safetensors"),
                "--keep-latents {}: expected a .safetensors file", a.keep_latents);
#if !AVDIT_HAVE_MEDIA
  AVDIT_REQUIRE(raw, "--out {}: this build has no media writers (FFmpeg); write the decoded clip as .safetensors",
                m.out);
#endif
  AVDIT_REQUIRE(!m.steps || (*m.steps >= 1 && *m.steps <= 10000), "--steps {}: expected 1 to 10000",
                m.steps.value_or(0));
  pipeline::ComponentOverrides o{a.dit,       a.text_encoder, a.tokenizer,
                                 a.video_vae, a.audio_vae,    a.refiner};
  const pipeline::PipelineComponents c = pipeline::find_components(m.model, o);
  const bool magi2 = c.family == pipeline::PipelineFamily::Magi2;
  AVDIT_REQUIRE(!m.nvfp4_experts || magi2, "--nvfp4-experts packs MAGI-2's routed experts; {} is an H3 pipeline",
                m.model);
  AVDIT_REQUIRE(magi2 || (a.negative_prompt.empty() && !a.no_negative),
                "--negative-prompt applies to MAGI-2; MiniMax-H3 is CFG-distilled and encodes no negative prompt");
  const json dit_config = read_json(c.dit / "config.json");
  const std::string family = magi2 ? "magi2-preview" : "h3";
  // The refiner runs when the folder (or --refiner) has one, unless --no-refine.
  const bool refine_options = a.refine_steps || a.refine_shift || a.refine_video_guidance ||
                              a.refine_audio_guidance || a.refine_height || a.refine_width;
  AVDIT_REQUIRE(
      !a.refine || !c.refiner.empty(),
      "--refine: {} has no refiner/ folder (the MAGI-2 1080p refiner); pass --refiner DIR",
      m.model);
  const bool refine = magi2 && !c.refiner.empty() && !a.no_refine;
  AVDIT_REQUIRE(
      !refine_options || refine,
      "--refine-* options set the MAGI-2 refiner stage, which this run does not have ({})",
      a.no_refine ? "--no-refine" : fmt::format("{} has no refiner/ folder", m.model));
  for (const auto& [value, option] :
       {std::pair{a.refine_video_guidance, "--refine-video-guidance"},
        std::pair{a.refine_audio_guidance, "--refine-audio-guidance"}})
    if (value) require_finite_option(*value, option);
  if (a.refine_shift) require_finite_option(*a.refine_shift, "--refine-shift");

  // The size: --latent-shape, --frames/--height/--width, or --seconds and the release's default
  // resolution (H3 768p at 16:9, 768x1344; MAGI-2 its 272p preview, 256x448).
  pipeline::ClipRequest r;
  if (!m.latent_shape.empty()) {
    AVDIT_REQUIRE(!a.seconds, "--seconds and --latent-shape both set the length: give one");
    r.shapes = pipeline::latent_shapes_from_string(family, dit_config, m.latent_shape);
  } else {
    AVDIT_REQUIRE(!(a.seconds && m.frames), "--seconds and --frames both set the length: give one");
    const int64_t frames = m.frames ? *m.frames : frames_for_seconds(c, dit_config, a.seconds.value_or(magi2 ? 10.0 : 5.0));
    // MAGI-2 with its refiner: the reference's 1080p preset (a 512x896 preview refined to
    // 1088x1920); alone, its 272p preview.
    const int64_t height = m.height.value_or(magi2 ? (refine ? 512 : 256) : 768),
                  width = m.width.value_or(magi2 ? (refine ? 896 : 448) : 1344);
    r.shapes = magi2 ? pipeline::magi2_latent_shapes(dit_config, frames, height, width)
                     : pipeline::h3_latent_shapes(dit_config, frames, height, width);
    if (!magi2) pipeline::warn_unsupported_h3_canvas(frames, height, width);
  }
  if (refine) {
    // The reference's tier over its own preview size; over any other preview, twice its pixels
    // (the tier's ratio, 2.1, kept on the 16-pixel grid).
    const int64_t ph = r.shapes.video[3] * 16, pw = r.shapes.video[4] * 16;
    const bool tier = ph == 512 && pw == 896;
    r.refine.enabled = true;
    r.refine.height = a.refine_height.value_or(tier ? 1088 : 2 * ph);
    r.refine.width = a.refine_width.value_or(tier ? 1920 : 2 * pw);
    r.refine.steps = a.refine_steps;
    r.refine.shift = a.refine_shift;
    r.refine.video_guidance = a.refine_video_guidance;
    r.refine.audio_guidance = a.refine_audio_guidance;
    // Every refiner setting is checked before the preview's long sampling.
    pipeline::check_refine_request(c, dit_config, r.shapes, r.refine);
  }
  // The DiTs always read their weights: a folder of configs alone fails here, before the text
  // encoder runs, naming what is missing (the text encoder's and decoders' files are named when
  // they are opened).
  if (!a.random_weights)
    for (const fs::path& dir : {c.dit, refine ? c.refiner : fs::path()})
      AVDIT_REQUIRE(dir.empty() || has_safetensors(dir),
                    "{}: no weights (.safetensors or a shard index) beside its config.json; a "
                    "pipeline folder of configs alone runs with --random-weights",
                    dir.string());
  // Outputs are checked before any work: writable, distinct, not a file the run reads.
  std::vector<fs::path> inputs;
  std::error_code ec;
  for (const fs::path& dir :
       {c.dit, c.text_encoder, c.tokenizer, c.video_vae, c.audio_vae, c.refiner})
    if (!dir.empty())
      for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.is_regular_file(ec)) inputs.push_back(e.path());
  check_output_path(m.out, "--out", inputs);
  if (!a.keep_latents.empty()) {
    check_output_path(a.keep_latents, "--keep-latents", inputs);
    check_distinct_outputs(m.out, "--out", a.keep_latents, "--keep-latents");
  }
  RouteRun routes(m.routes, magi2, c.dit.string(), dit_config, inputs,
                  {{m.out, "--out"}, {a.keep_latents, "--keep-latents"}});
  RangeReportRun ranges(m.range_report, family, dit_config, inputs,
                        {{m.out, "--out"}, {a.keep_latents, "--keep-latents"}});

  // Enhancement (optional), before anything loads: its failures are the cheapest to report.
  std::string prompt = a.prompt;
  double enhance_seconds = -1;
  if (!a.enhance_url.empty()) {
    AVDIT_REQUIRE(!a.enhance_model.empty(), "--enhance needs --enhance-model NAME (the server's model)");
    const auto t0 = std::chrono::steady_clock::now();
    pipeline::enhance::EnhanceOptions e = enhance_options(a.enhance);
    e.url = a.enhance_url;
    e.model = a.enhance_model;
    pipeline::enhance::EnhanceRequest rq;
    rq.prompt = a.prompt;
    rq.seed = m.seed & ((uint64_t{1} << 63) - 1);
    const auto res = pipeline::enhance::enhance(rq, e);
    prompt = res.caption;
    enhance_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log::info("enhance: {}{}", res.enhanced ? "caption" : "raw prompt (enhancer failed)",
              res.from_cache ? " from the caption cache" : "");
  }

  r.prompt = prompt;
  r.negative = a.negative_prompt;
  r.no_negative = a.no_negative;
  r.seed = m.seed;
  r.steps = m.steps;
  r.video_guidance = m.video_guidance;
  r.audio_guidance = m.audio_guidance;
  r.act = activation_dtype(m.precision);
  r.nvfp4_experts = m.nvfp4_experts;
  r.route_recorder = routes.recorder();
  r.router_bias_add = routes.router_bias_add();
  r.cache_dir = pipeline::cache_root(a.cache_dir, a.no_cache);
  r.adaln_table = !a.no_adaln_table;
  if (a.random_weights) {
    r.random = pipeline::RandomWeights{m.seed};
    log::info(
        "--random-weights: every component's weights drawn from seed {}; no weight file is read",
        m.seed);
  }
  AVDIT_REQUIRE(!a.no_adaln_table || !magi2, "--no-adaln-table applies to MiniMax-H3");
  const int total = m.steps.value_or(
      magi2 ? pipeline::magi2_sampler_defaults(models::magi2::parse_magi2_config(dit_config)).steps
            : pipeline::kH3DefaultSteps);
  std::optional<Progress> bar;
  std::vector<double> step_seconds;
  const bool show_bar = log::level() <= log::Level::Info;
  r.step_progress = [&bar, &step_seconds, total, show_bar](int done, int total_steps, double s) {
    step_seconds.push_back(s);
    if (!show_bar) return;
    if (!bar) bar.emplace(total, "sample");
    bar->tick();
    if (done == total_steps) bar->finish();
  };
  std::optional<Progress> refine_bar;
  r.refine_progress = [&refine_bar, show_bar](int done, int total_steps, double) {
    if (!show_bar) return;
    if (!refine_bar) refine_bar.emplace(total_steps, "refine");
    refine_bar->tick();
    if (done == total_steps) refine_bar->finish();
  };

  const std::unique_ptr<ops::Context> main_ctx = make_context(m.device);
  const std::string text_device = a.text_device.empty() ? m.device : a.text_device;
  std::unique_ptr<ops::Context> text_ctx;
  if (text_device != m.device) text_ctx = make_context(text_device);
  pipeline::StageContexts ctx{text_ctx ? text_ctx.get() : main_ctx.get(), main_ctx.get(), main_ctx.get()};

  const auto step_cache_attached = step_cache.attach(*ctx.dit);
  const auto ranges_attached = ranges.attach(*ctx.dit);
  const auto t_all = std::chrono::steady_clock::now();
  pipeline::Clip clip = pipeline::text_to_clip(c, r, ctx);
  if (OutputFile* f = routes.write(*ctx.dit)) f->publish();
  ranges.finish(*ctx.dit);

  // Outputs: the latents (optional), then the mp4, each written to a temporary name and renamed.
  const std::string sha_video = sha256_hex(clip.video_latent), sha_audio = sha256_hex(clip.audio_latent);
  const std::string sha_frames = sha256_hex(clip.frames), sha_wave = sha256_hex(clip.audio);
  if (!a.keep_latents.empty()) {
    std::vector<std::pair<std::string, Tensor>> t = {{"final_video", clip.video_latent},
                                                     {"final_audio", clip.audio_latent}};
    if (clip.refined) t.emplace_back("preview_video", clip.preview_latent);
    for (const auto& s : clip.text_states) t.push_back(s);
    write_safetensors(a.keep_latents, t, {{"family", family}, {"seed", std::to_string(m.seed)}});
  }
  {
    const auto t0 = std::chrono::steady_clock::now();
    reset_host_rss_peak();
    pipeline::StageRecord s;
    if (raw) {
      const std::vector<std::pair<std::string, Tensor>> tensors = {{"frames", clip.frames},
                                                                   {"waveform", clip.audio}};
      const std::map<std::string, std::string> meta = {{"fps", fmt::format("{}", clip.fps)},
                                                       {"sample_rate", std::to_string(clip.sample_rate)}};
      write_safetensors(m.out, tensors, meta);
      s.name = "write";
      s.detail = "frames and waveform, float32";
    } else {
#if AVDIT_HAVE_MEDIA
      const media::FrameRate fps = media::parse_frame_rate(fmt::format("{}", clip.fps), "the release's frame rate");
      media::write_mp4(m.out, clip.frames, fps, clip.audio, clip.sample_rate, media::Mp4Options{a.crf});
      s.name = "mux";
      s.detail = fmt::format("H.264 + AAC at {} fps", fps.str());
#endif
    }
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.host_peak = host_rss_peak();
    clip.stages.push_back(s);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  const std::string sha_mp4 = file_sha256(m.out);

  if (m.json) {
    json stages = json::array();
    if (enhance_seconds >= 0) stages.push_back({{"name", "enhance"}, {"seconds", enhance_seconds}});
    for (const auto& s : clip.stages)
      stages.push_back({{"name", s.name}, {"seconds", s.seconds}, {"host_peak_bytes", s.host_peak},
                        {"device_peak_bytes", s.device_peak}, {"detail", s.detail}});
    json j{{"family", family},     {"model", m.model},   {"device", m.device},
           {"text_device", text_device}, {"precision", m.precision}, {"seed", m.seed},
           {"steps", clip.steps},  {"seconds", seconds}, {"stages", stages},
           {"final_video", {{"shape", clip.video_latent.shape()}, {"sha256", sha_video}}},
           {"final_audio", {{"shape", clip.audio_latent.shape()}, {"sha256", sha_audio}}},
           {"frames", {{"shape", clip.frames.shape()}, {"fps", clip.fps}, {"sha256", sha_frames}}},
           {"waveform", {{"shape", clip.audio.shape()}, {"sample_rate", clip.sample_rate}, {"sha256", sha_wave}}},
           {"out", m.out},         {"mp4_sha256", sha_mp4}};
    if (a.random_weights) j["random_weights"] = {{"seed", m.seed}};
    if (clip.refined)
      j["refine"] = {
          {"steps", clip.refine_steps},
          {"preview_video",
           {{"shape", clip.preview_latent.shape()}, {"sha256", sha256_hex(clip.preview_latent)}}}};
    j.update(routes.json());
    if (step_cache.active()) j["step_cache"] = step_cache.json(step_seconds);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "{} pipeline{}: {} steps{}, {:.2f} s in all\n\n", family,
      a.random_weights ? fmt::format(" (random weights, seed {})", m.seed) : "", clip.steps,
      clip.refined ? fmt::format(" + {} refiner steps", clip.refine_steps) : "", seconds);
  std::cout << "| stage | seconds | peak host GiB | peak GPU GiB | detail |\n| --- | ---: | ---: | ---: | --- |\n";
  if (enhance_seconds >= 0) std::cout << fmt::format("| enhance | {:.2f} | | | |\n", enhance_seconds);
  for (const auto& s : clip.stages)
    std::cout << fmt::format("| {} | {:.2f} | {} | {} | {} |\n", s.name, s.seconds, bench::gib(s.host_peak),
                             ctx.dit->is_cuda() || (ctx.text->is_cuda() && s.name == "encode") ? bench::gib(s.device_peak) : "-",
                             s.detail);
  std::cout << "\n";
  if (step_cache.active()) std::cout << step_cache.summary(step_seconds) << "\n";
  std::cout << fmt::format("final_video {}  sha256 {}\n", clip.video_latent.shape_str(), sha_video);
  std::cout << fmt::format("final_audio {}  sha256 {}\n", clip.audio_latent.shape_str(), sha_audio);
  std::cout << fmt::format("frames {} at {} fps  sha256 {}\n", clip.frames.shape_str(), clip.fps, sha_frames);
  std::cout << fmt::format("waveform {} at {} Hz  sha256 {}\n", clip.audio.shape_str(), clip.sample_rate, sha_wave);
  // After the lines above, whose order scripts read: the preview's latent under the refined one.
  if (clip.refined)
    std::cout << fmt::format("preview_video {}  sha256 {}\n", clip.preview_latent.shape_str(),
                             sha256_hex(clip.preview_latent));
  if (!a.keep_latents.empty()) std::cout << "wrote " << a.keep_latents << "\n";
  if (!m.routes.stats.empty())
    std::cout << routes.summary() << "\nwrote route statistics " << m.routes.stats << "\n";
  std::cout << fmt::format("wrote {}  sha256 {}\n", m.out, sha_mp4);
  return 0;
}

}  // namespace avdit::app
