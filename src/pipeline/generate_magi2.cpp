// generate_magi2: schedule and guidance from the config, one packed forward per step with the
// conditional and unconditional prompts as two items, UniPC per modality (see generate_magi2.h).
#include "pipeline/generate_magi2.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "models/magi2/api.h"
#include "ops/sample.h"
#include "sample/noise.h"
#include "sample/schedule.h"

namespace avdit::pipeline {

namespace magi2 = models::magi2;

namespace {

template <class T>
T json_or(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

// [L, C] or [1, L, C] -> [1, L, C] float32, width checked against the model.
Tensor text_features(const LabeledTensor& t, int64_t width, const char* what) {
  Tensor x = t.tensor;
  AVDIT_REQUIRE(dtype_is_float(x.dtype()), "{}: {} must be a float tensor, found {}", t.where, what,
                dtype_name(x.dtype()));
  if (x.ndim() == 2) x = x.reshape({1, x.size(0), x.size(1)});
  AVDIT_REQUIRE(x.ndim() == 3 && x.size(0) == 1,
                "{} ({}) has shape {}, expected [1, L, {}] or [L, {}]", t.where, what,
                t.tensor.shape_str(), width, width);
  AVDIT_REQUIRE(x.size(2) == width,
                "{} ({}) has width {}, this model expects {} (arch_config.text_in_channels)",
                t.where, what, x.size(2), width);
  return x.to_f32();
}

}  // namespace

Magi2SamplerDefaults magi2_sampler_defaults(const magi2::Magi2Config& config) {
  Magi2SamplerDefaults d;
  const nlohmann::json& e = config.evaluation_config;
  if (!e.is_object()) return d;
  d.steps = json_or<int>(e, "num_inference_steps", d.steps);
  d.shift = json_or<double>(e, "shift", d.shift);
  sample::Magi2Guidance& g = d.guidance;
  g.video_scale = json_or<float>(e, "video_txt_guidance_scale", g.video_scale);
  g.audio_scale = json_or<float>(e, "audio_txt_guidance_scale", g.audio_scale);
  g.use_cfg_trick = json_or<bool>(e, "use_cfg_trick", g.use_cfg_trick);
  g.cfg_trick_start_frame = json_or<int>(e, "cfg_trick_start_frame", g.cfg_trick_start_frame);
  g.cfg_trick_value = json_or<float>(e, "cfg_trick_value", g.cfg_trick_value);
  g.use_dynamic_cfg = json_or<bool>(e, "use_dynamic_cfg", g.use_dynamic_cfg);
  g.dynamic_cfg_start_t = json_or<int64_t>(e, "dynamic_cfg_start_t", g.dynamic_cfg_start_t);
  g.dynamic_cfg_cutoff_value =
      json_or<float>(e, "dynamic_cfg_cutoff_value", g.dynamic_cfg_cutoff_value);
  g.use_skimmed_cfg_linear = json_or<bool>(e, "use_skimmed_cfg_linear", g.use_skimmed_cfg_linear);
  g.skimmed_cfg_scale = json_or<float>(e, "skimmed_cfg_scale", g.skimmed_cfg_scale);
  g.cfg_rescale = json_or<float>(e, "cfg_rescale", g.cfg_rescale);
  return d;
}

GenerateResult generate_magi2(const magi2::Magi2Model& model, const Magi2GenerateOptions& o) {
  const magi2::Magi2Config& config = model.config();
  ops::Context& ctx = model.ctx();
  const Magi2SamplerDefaults defaults = magi2_sampler_defaults(config);
  const RunOptions& run = o.run;
  const int steps = run.steps.value_or(defaults.steps);
  const double shift = run.shift.value_or(defaults.shift);
  AVDIT_REQUIRE(steps >= 1, "--steps must be at least 1, got {}", steps);
  AVDIT_REQUIRE(shift > 0, "--shift must be positive, got {}", shift);
  sample::Magi2Guidance guidance = defaults.guidance;
  if (o.video_guidance) guidance.video_scale = *o.video_guidance;
  if (o.audio_guidance) guidance.audio_scale = *o.audio_guidance;
  // Guidance 1 for both modalities is the conditional output alone: skip the unconditional pass.
  const bool cfg = guidance.video_scale != 1.0f || guidance.audio_scale != 1.0f;

  AVDIT_REQUIRE(o.text.defined(),
                "MAGI-2 needs text features (--text FILE with text_embeds or txt_feat)");
  const Tensor text = text_features(o.text, config.text_in_channels, "text features");
  const Tensor negative =
      o.negative.defined()
          ? text_features(o.negative, config.text_in_channels, "negative text features")
          : Tensor::zeros({1, 0, config.text_in_channels}, DType::F32);
  const int64_t tc = config.data_proxy.time_channel_dim;
  if (o.time_embedding_freqs.defined())
    AVDIT_REQUIRE(
        o.time_embedding_freqs.tensor.numel() == tc / 2 &&
            dtype_is_float(o.time_embedding_freqs.tensor.dtype()),
        "{}: time-embedding frequencies have shape {}, expected [{}] float (time_channel_dim / 2)",
        o.time_embedding_freqs.where, o.time_embedding_freqs.tensor.shape_str(), tc / 2);

  const int64_t pt = config.data_proxy.t_patch_size, ps = config.data_proxy.patch_size;
  const int64_t cv = config.video_in_channels / (pt * ps * ps);
  const Tensor x_video = initial_latent(run.noise_video, run.video_shape, {1, cv, -1, -1, -1},
                                        run.seed, sample::kVideoNoiseStream, "video");
  const Tensor x_audio =
      initial_latent(run.noise_audio, run.audio_shape, {1, -1, config.audio_in_channels}, run.seed,
                     sample::kAudioNoiseStream, "audio");
  AVDIT_REQUIRE(x_video.size(2) % pt == 0 && x_video.size(3) % ps == 0 && x_video.size(4) % ps == 0,
                "video latent {} is not divisible by the patch size (t {}, spatial {})",
                x_video.shape_str(), pt, ps);

  const sample::FlowUniPCSchedule schedule = sample::magi2_schedule(steps, shift);
  // The conditional and unconditional prompts are two items of one packed forward, sharing the
  // latents; packing and unpacking run on the context (no host round trip per step on the GPU).
  magi2::Magi2Stepper stepper(
      model, cfg ? std::vector<Tensor>{text, negative} : std::vector<Tensor>{text},
      o.time_embedding_freqs.defined() ? o.time_embedding_freqs.tensor : Tensor());
  sample::ModelFn model_fn = [&](const sample::StepInfo& step, const std::vector<Tensor>& x) {
    const auto v = stepper.velocity(x[0], x[1], schedule.model_t[step.index]);
    sample::ModelOut mo{{v[0][0], v[0][1]}, {}};
    if (cfg) mo.uncond = {v[1][0], v[1][1]};
    return mo;
  };

  auto host = [&](const Tensor& t) { return ctx.download(t).to_f32(); };
  GenerateResult result;
  sample::SamplerOptions so;
  so.modalities = {"video", "audio"};
  // Plain and per-frame-scaled guidance run on the context; skimming and rescale (off in the
  // official config) take the host path on copies.
  const bool context_cfg = !guidance.use_skimmed_cfg_linear && !(guidance.cfg_rescale > 0.0f);
  so.guide = [&](int m, const sample::StepInfo& step, const Tensor& c, const Tensor& u,
                 const Tensor& x) {
    const int64_t timestep = schedule.timesteps[step.index];
    if (context_cfg) {
      Tensor v = ctx.empty(c.shape(), DType::F32);
      if (m == 1)
        ops::cfg(ctx, c, u, {guidance.audio_scale}, 1, v);
      else  // video [B, C, T, H, W]: one scale per latent frame
        ops::cfg(ctx, c, u, sample::magi2_video_scales(guidance, c.size(2), timestep),
                 c.size(3) * c.size(4), v);
      return v;
    }
    return ctx.upload(m == 0
                          ? sample::magi2_cfg_video(host(c), host(u), host(x), guidance, timestep)
                          : sample::magi2_cfg_audio(host(c), host(u), host(x), guidance));
  };
  std::vector<Tensor> latents = {ctx.upload(x_video), ctx.upload(x_audio)};
  const RunProbes probes(ctx, run, result, so, latents, steps);
  if (o.route_recorder)
    o.route_recorder->begin(ctx, config, stepper.layout(x_video.shape(), x_audio.shape()), steps);
  const ProbeScope route_scope(ctx.observer(), o.route_recorder);
  std::vector<std::unique_ptr<sample::Stepper>> steppers;
  steppers.push_back(sample::make_unipc_stepper(ctx, schedule.sigmas));
  steppers.push_back(sample::make_unipc_stepper(ctx, schedule.sigmas));
  log::debug("magi2 generate: {} steps, shift {}, guidance video {} audio {}{}", steps, shift,
             guidance.video_scale, guidance.audio_scale, cfg ? "" : " (single pass)");
  std::vector<Tensor> final =
      sample::run_sampler(ctx, std::move(latents), steppers, steps, model_fn, so);
  result.video = host(final[0]);
  result.audio = host(final[1]);
  result.steps = steps;
  result.shift = shift;
  result.video_guidance = guidance.video_scale;
  result.audio_guidance = guidance.audio_scale;
  result.cfg = cfg;
  return result;
}

}  // namespace avdit::pipeline
