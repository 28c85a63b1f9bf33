#include "pipeline/text_to_clip.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "core/host_memory.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "models/h3/config.h"
#include "models/h3/model.h"
#include "models/magi2/model.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/model.h"
#include "models/magi2/refiner/sampler.h"
#include "models/text/text_encoder.h"
#include "models/vae/decoder_factory.h"
#include "ops/context.h"
#include "pipeline/adaln_cache.h"
#include "pipeline/clip_frames.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "pipeline/prompt_cache.h"
#include "sample/noise.h"

namespace avdit::pipeline {

namespace fs = std::filesystem;
namespace text = models::text;
namespace vae = models::vae;
namespace refiner = models::magi2::refiner;

// The refiner's re-noise draws: their own streams, so that refining never changes the preview's
// noise and one seed gives one two-stage clip.
constexpr uint64_t kRefineVideoNoiseStream = 0x7266766964;  // "rfvid"
constexpr uint64_t kRefineAudioNoiseStream = 0x7266617564;  // "rfaud"

namespace {

// Times one stage and records its peaks; the stage's context pool peak is reset at the start.
class Stage {
 public:
  Stage(Clip& clip, std::string name, ops::Context* ctx) : clip_(clip), ctx_(ctx) {
    record_.name = std::move(name);
    reset_host_rss_peak();
    if (ctx_) ctx_->reset_pool_peak();
    log::info("{} ...", record_.name);
    t0_ = std::chrono::steady_clock::now();
  }
  void done(std::string detail = {}) {
    if (ctx_) ctx_->synchronize();
    record_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    record_.host_peak = host_rss_peak();
    record_.device_peak = ctx_ && ctx_->is_cuda() ? ctx_->pool_peak() : 0;
    record_.detail = std::move(detail);
    log::info("{}: {:.2f} s{}{}", record_.name, record_.seconds, record_.detail.empty() ? "" : ", ",
              record_.detail);
    clip_.stages.push_back(record_);
  }

 private:
  Clip& clip_;
  ops::Context* ctx_;
  StageRecord record_;
  std::chrono::steady_clock::time_point t0_;
};

const Tensor* find_state(const NamedTensors& states, const char* name) {
  for (const auto& [n, t] : states)
    if (n == name) return &t;
  return nullptr;
}

LabeledTensor state(const NamedTensors& states, const char* name) {
  const Tensor* t = find_state(states, name);
  return t ? LabeledTensor{*t, fmt::format("prompt states:{}", name)} : LabeledTensor{};
}

// [L, C] or [1, L, C] text features as the refiner takes them, [1, L, C] (an absent negative: no
// tokens, as the preview's null feature).
Tensor batch_of_one(const Tensor* t, int64_t channels) {
  if (!t || !t->defined()) return Tensor::zeros({1, 0, channels}, DType::F32);
  return t->ndim() == 2 ? t->reshape({1, t->size(0), t->size(1)}) : *t;
}

refiner::RefinerSamplerConfig refine_settings(refiner::RefinerSamplerConfig s,
                                              const RefineRequest& r) {
  if (r.steps) s.num_inference_steps = *r.steps;
  if (r.shift) s.shift = *r.shift;
  if (r.video_guidance) s.video_guidance = *r.video_guidance;
  if (r.audio_guidance) s.audio_guidance = *r.audio_guidance;
  return s;
}

bool magi2_uses_negative_prompt(const nlohmann::json& config) {
  const auto ev = config.find("evaluation_config");
  if (ev == config.end() || !ev->is_object()) return true;
  const auto it = ev->find("use_negative_prompt");
  return it == ev->end() || !it->is_boolean() || it->get<bool>();
}

}  // namespace

RefinePlan check_refine_request(const PipelineComponents& c, const nlohmann::json& dit_config,
                                const LatentShapes& preview, const RefineRequest& r) {
  const fs::path file = c.refiner / "config.json";
  const refiner::RefinerConfig rc = refiner::read_refiner_config(file);
  const refiner::RefinerSamplerConfig s = refine_settings(rc.sampler, r);
  const models::magi2::Magi2Config pc = models::magi2::parse_magi2_config(dit_config);
  const Shape& v = preview.video;
  AVDIT_REQUIRE(
      v.size() == 5 && v[1] == rc.video_in_channels,
      "{}: the refiner takes video latents of {} channels, the preview {} makes [1, C, T, "
      "h, w] = {}; use the refiner released with this preview",
      file.string(), rc.video_in_channels, c.dit.string(), shape_str(v));
  AVDIT_REQUIRE(rc.text_in_channels == pc.text_in_channels,
                "{}: text_in_channels {} but the preview's text features have {} channels; use the "
                "refiner released with this preview",
                file.string(), rc.text_in_channels, pc.text_in_channels);
  AVDIT_REQUIRE(s.audio_noise_scale < 0 ||
                    (preview.audio.size() == 3 && preview.audio[2] == rc.audio_in_channels),
                "{}: audio_in_channels {} does not match the preview's audio latent {}",
                file.string(), rc.audio_in_channels, shape_str(preview.audio));
  AVDIT_REQUIRE(!r.steps || (*r.steps >= 1 && *r.steps <= 1000),
                "--refine-steps {}: expected 1 to 1000", r.steps.value_or(0));
  AVDIT_REQUIRE(std::isfinite(s.shift) && s.shift > 0,
                "--refine-shift {}: expected a positive number", s.shift);
  const int64_t sh = s.vae_stride[1], sw = s.vae_stride[2];
  AVDIT_REQUIRE(
      r.height >= sh && r.width >= sw && r.height <= 8192 && r.width <= 8192 &&
          r.height % sh == 0 && r.width % sw == 0,
      "--refine-height/--refine-width {}x{}: the refiner makes multiples of its vae_stride "
      "{}x{} up to 8192 (the reference's 1080p tier is 1088x1920)",
      r.height, r.width, sh, sw);
  RefinePlan p;
  p.latent_height = r.height / sh;
  p.latent_width = r.width / sw;
  p.steps = static_cast<int>(s.num_inference_steps);
  return p;
}

double output_fps(PipelineFamily family, const nlohmann::json& dit_config) {
  return family == PipelineFamily::H3 ? 24.0 : magi2_fps(dit_config);
}

void encode_prompt(const PipelineComponents& c, const ClipRequest& r, ops::Context& text_ctx, Clip& clip) {
  const StageContexts ctx{&text_ctx, nullptr, nullptr};
  const bool magi2 = c.family == PipelineFamily::Magi2;
  const nlohmann::json dit_config = read_json(c.dit / "config.json");

  // Tokenize: every prompt error is found before any model loads.
  PromptIds ids;
  {
    Stage s(clip, "tokenize", nullptr);
    const std::string family = text::text_encoder_family(c.text_encoder);
    AVDIT_REQUIRE((family == "qwen3_5") == magi2,
                  "{}: a {} text encoder, but {} is a {} pipeline", c.text_encoder.string(), family,
                  c.root.string(), pipeline_family_name(c.family));
    std::string negative = r.negative;
    if (magi2 && negative.empty() && !r.no_negative && magi2_uses_negative_prompt(dit_config))
      negative = kMagi2DefaultNegativePrompt;
    ids = tokenize_prompts(c.tokenizer, family, r.prompt, negative, "--prompt", "--negative-prompt");
    s.done(fmt::format("{} tokens{}", ids.prompt.size(),
                       ids.has_negative ? fmt::format(" + {} negative", ids.negative.size()) : ""));
  }

  // Encode, or read the states a previous run of the same prompt and encoder stored.
  {
    Stage s(clip, "encode", ctx.text);
    // The device is part of the key: CPU and GPU states differ in the last bits, and a warm run
    // must give the bits of a cold one.
    const std::string settings =
        prompt_state_settings(r.act, ctx.text->is_cuda());
    // Random weights are keyed by their seed, never by the folder's files.
    std::optional<uint64_t> random_seed;
    if (r.random) random_seed = component_seed(*r.random, "text_encoder");
    std::string key;
    if (r.cache_dir) {
      key = prompt_state_key(random_seed ? random_identity(c.text_encoder, *random_seed)
                                         : folder_identity(c.text_encoder),
                             ids, settings);
      if (auto hit = load_prompt_states(*r.cache_dir, key)) clip.text_states = std::move(*hit);
    }
    const std::string random_note = random_seed ? std::string(", random weights") : std::string();
    if (!clip.text_states.empty()) {
      s.done("prompt-state cache hit" + random_note);
    } else {
      text::TextEncoderOptions options;
      options.act = r.act;
      options.random_seed = random_seed;
      if (!magi2) {
        // MiniMax-H3 takes the residual after layer 50 of Qwen3-VL-32B's 64; a smaller model (the
        // tiny pipelines of `avdit init`) has no layer 50 and gives the residual after its last.
        const nlohmann::json tc = read_json(c.text_encoder / "config.json");
        const nlohmann::json& t = tc.contains("text_config") ? tc["text_config"] : tc;
        const int64_t layers = t.value("num_hidden_layers", int64_t{0});
        if (layers > 0 && layers < 50) {
          options.selected_layers = static_cast<int>(layers);
          log::info("{}: {} layers, fewer than MiniMax-H3's 50: the residual after the last",
                    c.text_encoder.string(), layers);
        }
      }
      int64_t tokens = 0;
      {
        const auto encoder = text::open_text_encoder(*ctx.text, c.text_encoder, options);
        clip.text_states = encode_prompt_states(*encoder, ids, /*bf16=*/true, &tokens);
      }  // the encoder's weights are freed here, before the DiT loads
      if (r.cache_dir) store_prompt_states(*r.cache_dir, key, clip.text_states);
      s.done(fmt::format("{} tokens encoded{}", tokens, random_note));
    }
  }
}

namespace {

// MAGI-2's second stage on the preview's latents, on the DiT's context (the preview is freed by
// now): the refined video replaces clip.video_latent; the audio stays the preview's, which is what
// the reference decodes.
void refine_clip(const PipelineComponents& c, const ClipRequest& r, ops::Context& ctx, Clip& clip) {
  const nlohmann::json dit_config = read_json(c.dit / "config.json");
  const RefinePlan plan = check_refine_request(
      c, dit_config, {clip.video_latent.shape(), clip.audio_latent.shape()}, r.refine);
  Stage s(clip, "refine", &ctx);
  std::optional<Checkpoint> ckpt;  // held while the model runs (the CPU maps its weights)
  std::optional<refiner::RefinerModel> made;
  std::string random_note;
  if (r.random) {
    const uint64_t seed = component_seed(*r.random, "refiner");
    made.emplace(ctx, refiner::read_refiner_config(c.refiner / "config.json"), r.act, seed);
    random_note = ", random weights";
  } else {
    ckpt.emplace(Checkpoint::open(c.refiner));
    made.emplace(ctx, *ckpt, r.act);
  }
  const refiner::RefinerModel& model = *made;
  const refiner::RefinerSamplerConfig settings = refine_settings(model.config().sampler, r.refine);
  const int64_t channels = model.config().text_in_channels;
  refiner::RefineInputs in;
  in.preview_video = clip.video_latent;
  in.preview_audio = clip.audio_latent;
  in.text = batch_of_one(find_state(clip.text_states, "txt_feat"), channels);
  in.null_text = batch_of_one(find_state(clip.text_states, "null_txt_feat"), channels);
  in.height = plan.latent_height;
  in.width = plan.latent_width;
  const Shape& p = clip.video_latent.shape();
  const Shape video = {1, p[1], 2 * p[2] - 1, in.height, in.width};
  if (settings.noise_value != 0)
    in.video_noise = sample::make_noise(video, r.seed, kRefineVideoNoiseStream);
  if (settings.audio_noise_scale > 0 && clip.audio_latent.defined())
    in.audio_noise = sample::make_noise(clip.audio_latent.shape(), r.seed, kRefineAudioNoiseStream);
  const refiner::Refined out = refiner::refine(model, in, settings, r.refine_progress);
  ctx.forget_fixed();
  clip.preview_latent = clip.video_latent;
  clip.video_latent = out.video;
  clip.refined = true;
  clip.refine_steps = static_cast<int>(settings.num_inference_steps);
  s.done(fmt::format("{} steps to {} ({}x{} px), window {}x{}x{} blocks{}", clip.refine_steps,
                     out.video.shape_str(), in.height * settings.vae_stride[1],
                     in.width * settings.vae_stride[2], model.config().data_proxy.window.block_t,
                     model.config().data_proxy.window.block_h,
                     model.config().data_proxy.window.block_w, random_note));
}

}  // namespace

Clip text_to_clip(const PipelineComponents& c, const ClipRequest& r, const StageContexts& ctx) {
  AVDIT_CHECK(ctx.text && ctx.dit && ctx.vae, "text_to_clip: a stage has no context");
  Clip clip;
  const bool magi2 = c.family == PipelineFamily::Magi2;
  // Random weights: the decoders' folders first (written once, or found in the cache), so that a
  // config they cannot take fails before the long stages, and the decode rows time the decodes.
  PipelineComponents decoders = c;
  std::optional<RandomDecoderFolder> random_video, random_audio;
  if (r.random) {
    Stage s(clip, "decoder weights", nullptr);
    random_video.emplace(c.video_vae, *r.random, "video_vae", r.cache_dir);
    random_audio.emplace(c.audio_vae, *r.random, "audio_vae", r.cache_dir);
    decoders.video_vae = random_video->path();
    decoders.audio_vae = random_audio->path();
    s.done(fmt::format("{}; {}", random_video->describe(), random_audio->describe()));
  }
  encode_prompt(c, r, *ctx.text, clip);

  // DiT sampling.
  {
    Stage s(clip, "sample", ctx.dit);
    RunOptions run;
    run.steps = r.steps;
    run.seed = r.seed;
    run.video_shape = r.shapes.video;
    run.audio_shape = r.shapes.audio;
    run.progress = r.step_progress;
    // Random weights read only the config; real ones the checkpoint (its config.json included).
    std::optional<uint64_t> random_seed;
    if (r.random) random_seed = component_seed(*r.random, "dit");
    const std::optional<Checkpoint> ckpt =
        random_seed ? std::nullopt : std::optional<Checkpoint>(Checkpoint::open(c.dit));
    const nlohmann::json dit_config = read_json(c.dit / "config.json");
    GenerateResult g;
    std::string table_note;
    if (magi2) {
      Magi2GenerateOptions o;
      o.run = run;
      o.text = state(clip.text_states, "txt_feat");
      o.negative = state(clip.text_states, "null_txt_feat");
      o.video_guidance = r.video_guidance;
      o.audio_guidance = r.audio_guidance;
      models::magi2::LoadOptions load;
      load.nvfp4_experts = r.nvfp4_experts;
      load.router_bias_add = r.router_bias_add;
      o.route_recorder = r.route_recorder;
      const models::magi2::Magi2Model model =
          random_seed
              ? models::magi2::Magi2Model(*ctx.dit, models::magi2::parse_magi2_config(dit_config),
                                          r.act, *random_seed, load)
              : models::magi2::Magi2Model(*ctx.dit, *ckpt, r.act, load);
      g = generate_magi2(model, o);
    } else {
      H3GenerateOptions o;
      o.run = run;
      o.text = state(clip.text_states, "text_embeds");
      o.text_token_tags = state(clip.text_states, "text_token_tags");
      o.video_guidance = r.video_guidance;
      o.audio_guidance = r.audio_guidance;
      const auto h3_config = models::h3::H3Config::from_json(dit_config);
      if (!r.adaln_table) {
        const models::h3::H3Model model =
            random_seed ? models::h3::H3Model(*ctx.dit, h3_config, r.act, *random_seed)
                        : models::h3::H3Model(*ctx.dit, *ckpt, r.act);
        g = generate_h3(model, o);
      } else {
        models::h3::H3TableOptions table;
        table.sets = h3_timestep_sets(r.steps.value_or(kH3DefaultSteps));
        std::string key;
        if (r.cache_dir) {
          key = random_seed ? adaln_table_key(random_identity(c.dit, *random_seed), table.sets,
                                              r.act, ctx.dit->is_cuda())
                            : adaln_table_key(c.dit, table.sets, r.act, ctx.dit->is_cuda());
          if (auto given = load_adaln_table(*ctx.dit, h3_config, *r.cache_dir, key, table.sets))
            table.given = std::move(*given);
        }
        const bool cached = !table.given.empty();
        const models::h3::H3Model model =
            random_seed ? models::h3::H3Model(*ctx.dit, h3_config, r.act, *random_seed, table)
                        : models::h3::H3Model(*ctx.dit, *ckpt, r.act, table);
        if (r.cache_dir && !cached) store_adaln_table(*ctx.dit, *r.cache_dir, key, model);
        g = generate_h3(model, o);
        table_note = fmt::format(", adaLN table of {} timestep sets ({}{})", table.sets.size(),
                                 cached ? "cached" : "computed at load",
                                 model.adaln_bytes_avoided() > 0
                                     ? fmt::format("; {:.2f} GiB of projections never on the GPU",
                                                   model.adaln_bytes_avoided() / double(int64_t{1} << 30))
                                     : "");
      }
    }
    ctx.dit->forget_fixed();  // CUDA graphs of the steps hold activations; the DiT is gone
    clip.video_latent = g.video;
    clip.audio_latent = g.audio;
    clip.steps = g.steps;
    s.done(fmt::format("{} steps{}{}{}", g.steps, g.cfg ? " with CFG" : "", table_note,
                       random_seed ? ", random weights" : ""));
  }
  if (magi2 && r.refine.enabled && !c.refiner.empty()) refine_clip(c, r, *ctx.dit, clip);
  // MAGI-2 decodes in its engine's dtype (TurboVAED cast to bf16); the video decoders have no
  // fp16 mode, so an fp16 run decodes in fp32.
  decode_latents(decoders, *ctx.vae, clip, r.act == DType::BF16 ? DType::BF16 : DType::F32);
  return clip;
}

void decode_latents(const PipelineComponents& c, ops::Context& vae_ctx, Clip& clip,
                    DType video_act) {
  const StageContexts ctx{nullptr, nullptr, &vae_ctx};
  const bool magi2 = c.family == PipelineFamily::Magi2;
  // Decode the video, then the audio, each decoder freed after its stage.
  {
    Stage s(clip, "decode video", ctx.vae);
    const vae::Family family = vae::detect_family(c.video_vae);
    const auto decoder = vae::open_decoder(*ctx.vae, c.video_vae, video_act);
    AVDIT_REQUIRE(decoder->media() == vae::Media::Video, "{}: {} decodes audio, not video",
                  c.video_vae.string(), decoder->describe());
    clip.frames = writer_frames(family, decoder->decode(clip.video_latent));
    // A refined clip has 2T - 1 latent frames over the same seconds: twice the release's rate, as
    // the reference writes it (config.fps * 2).
    clip.fps = decoder->rate() > 0 ? decoder->rate()
                                   : output_fps(c.family, read_json(c.dit / "config.json")) *
                                         (clip.refined ? 2.0 : 1.0);
    s.done(fmt::format("{} frames {}x{}", clip.frames.size(0), clip.frames.size(3),
                       clip.frames.size(2)));
  }
  {
    Stage s(clip, "decode audio", ctx.vae);
    const auto decoder = vae::open_decoder(*ctx.vae, c.audio_vae);
    AVDIT_REQUIRE(decoder->media() == vae::Media::Audio, "{}: {} decodes video, not audio",
                  c.audio_vae.string(), decoder->describe());
    // MAGI-2's DiT gives [1, L_a, C]; Stable Audio's decoder takes the time-major [L_a, C].
    const Tensor& a = clip.audio_latent;
    const Tensor latents = magi2 && a.ndim() == 3 ? a.reshape({a.size(1), a.size(2)}) : a;
    clip.audio = decoder->decode(latents);
    clip.sample_rate = static_cast<int>(decoder->rate());
    s.done(fmt::format("{} channels, {} samples at {} Hz", clip.audio.size(0), clip.audio.size(1),
                       clip.sample_rate));
  }
}

}  // namespace avdit::pipeline
