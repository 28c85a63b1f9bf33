#include "pipeline/text_to_clip.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "core/error.h"
#include "core/host_memory.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "models/h3/model.h"
#include "models/magi2/model.h"
#include "models/text/text_encoder.h"
#include "models/vae/decoder_factory.h"
#include "ops/context.h"
#include "models/h3/config.h"
#include "pipeline/adaln_cache.h"
#include "pipeline/clip_frames.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "pipeline/prompt_cache.h"

namespace avdit::pipeline {

namespace fs = std::filesystem;
namespace text = models::text;
namespace vae = models::vae;

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

bool magi2_uses_negative_prompt(const nlohmann::json& config) {
  const auto ev = config.find("evaluation_config");
  if (ev == config.end() || !ev->is_object()) return true;
  const auto it = ev->find("use_negative_prompt");
  return it == ev->end() || !it->is_boolean() || it->get<bool>();
}

}  // namespace

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
    std::string key;
    if (r.cache_dir) {
      key = prompt_state_key(folder_identity(c.text_encoder), ids, settings);
      if (auto hit = load_prompt_states(*r.cache_dir, key)) clip.text_states = std::move(*hit);
    }
    if (!clip.text_states.empty()) {
      s.done("prompt-state cache hit");
    } else {
      text::TextEncoderOptions options;
      options.act = r.act;
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
      s.done(fmt::format("{} tokens encoded", tokens));
    }
  }
}

Clip text_to_clip(const PipelineComponents& c, const ClipRequest& r, const StageContexts& ctx) {
  AVDIT_CHECK(ctx.text && ctx.dit && ctx.vae, "text_to_clip: a stage has no context");
  Clip clip;
  const bool magi2 = c.family == PipelineFamily::Magi2;
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
    const Checkpoint ckpt = Checkpoint::open(c.dit);
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
      const models::magi2::Magi2Model model(*ctx.dit, ckpt, r.act, load);
      g = generate_magi2(model, o);
    } else {
      H3GenerateOptions o;
      o.run = run;
      o.text = state(clip.text_states, "text_embeds");
      o.text_token_tags = state(clip.text_states, "text_token_tags");
      o.video_guidance = r.video_guidance;
      o.audio_guidance = r.audio_guidance;
      if (!r.adaln_table) {
        const models::h3::H3Model model(*ctx.dit, ckpt, r.act);
        g = generate_h3(model, o);
      } else {
        models::h3::H3TableOptions table;
        table.sets = h3_timestep_sets(r.steps.value_or(kH3DefaultSteps));
        std::string key;
        if (r.cache_dir) {
          key = adaln_table_key(c.dit, table.sets, r.act, ctx.dit->is_cuda());
          const auto config = models::h3::H3Config::from_json(*ckpt.config());
          if (auto given = load_adaln_table(*ctx.dit, config, *r.cache_dir, key, table.sets))
            table.given = std::move(*given);
        }
        const bool cached = !table.given.empty();
        const models::h3::H3Model model(*ctx.dit, ckpt, r.act, table);
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
    s.done(fmt::format("{} steps{}{}", g.steps, g.cfg ? " with CFG" : "", table_note));
  }
  decode_latents(c, *ctx.vae, clip);
  return clip;
}

void decode_latents(const PipelineComponents& c, ops::Context& vae_ctx, Clip& clip) {
  const StageContexts ctx{nullptr, nullptr, &vae_ctx};
  const bool magi2 = c.family == PipelineFamily::Magi2;
  // Decode the video, then the audio, each decoder freed after its stage.
  {
    Stage s(clip, "decode video", ctx.vae);
    const vae::Family family = vae::detect_family(c.video_vae);
    const auto decoder = vae::open_decoder(*ctx.vae, c.video_vae);
    AVDIT_REQUIRE(decoder->media() == vae::Media::Video, "{}: {} decodes audio, not video",
                  c.video_vae.string(), decoder->describe());
    clip.frames = writer_frames(family, decoder->decode(clip.video_latent));
    clip.fps = decoder->rate() > 0 ? decoder->rate()
                                       : output_fps(c.family, read_json(c.dit / "config.json"));
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
