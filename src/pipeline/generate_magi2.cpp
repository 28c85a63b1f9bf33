// generate_magi2: schedule and guidance from the config, one packed forward per step with the
// conditional and unconditional prompts as two items, UniPC per modality (see generate_magi2.h).
#include "pipeline/generate_magi2.h"

#include "ops/sample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "models/magi2/api.h"
#include "models/magi2/model.h"
#include "models/magi2/packing.h"
#include "models/magi2/weights.h"
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
  AVDIT_REQUIRE(x.ndim() == 3 && x.size(0) == 1, "{} ({}) has shape {}, expected [1, L, {}] or [L, {}]", t.where,
                what, t.tensor.shape_str(), width, width);
  AVDIT_REQUIRE(x.size(2) == width, "{} ({}) has width {}, this model expects {} (arch_config.text_in_channels)",
                t.where, what, x.size(2), width);
  return x.to_f32();
}

// Stacks [1, ...] items along dim 0, zero-padding dim 1 to the longest (text of different lengths).
Tensor stack_padded(const std::vector<Tensor>& items) {
  int64_t rows = 0;
  for (const Tensor& t : items) rows = std::max(rows, t.size(1));
  Shape shape = items.front().shape();
  shape[0] = static_cast<int64_t>(items.size());
  shape[1] = rows;
  Tensor out = Tensor::zeros(shape, DType::F32);
  const int64_t item = shape_numel(shape) / shape[0];
  for (size_t b = 0; b < items.size(); ++b) {
    if (items[b].numel() == 0) continue;  // e.g. the null prompt: no tokens
    const Tensor t = items[b].to_f32();
    std::memcpy(out.f32() + static_cast<int64_t>(b) * item, t.f32(), static_cast<size_t>(t.numel()) * sizeof(float));
  }
  return out;
}

Tensor filled(const Shape& shape, float v) {
  Tensor t = Tensor::empty(shape, DType::F32);
  std::fill(t.f32(), t.f32() + t.numel(), v);
  return t;
}

Tensor lengths(const std::vector<int64_t>& v) {
  return Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I64, v.data());
}

// Item b of a [B, ...] tensor as [1, ...] (a copy, so the sampler owns it).
Tensor item(const Tensor& t, int64_t b) {
  Shape s = t.shape();
  s[0] = 1;
  return t.select(b).reshape(s).clone();
}

// TimeEmb with a given frequency table: pos = t * 1000, a = pos f_k, [cos a | sin a] (packing.h's
// formula; only the table differs).
Tensor time_embedding_with(const Tensor& t, const Tensor& freqs_in, int64_t dim) {
  const Tensor freqs = freqs_in.to_f32();
  const int64_t half = dim / 2, L = t.numel();
  Tensor out = Tensor::zeros({L, dim}, DType::F32);
  for (int64_t l = 0; l < L; ++l) {
    const float pos = t.f32()[l] * 1000.0f;
    float* row = out.f32() + l * dim;
    for (int64_t k = 0; k < half; ++k) {
      const float a = pos * freqs.f32()[k];
      row[k] = std::cos(a);
      row[half + k] = std::sin(a);
    }
  }
  return out;
}

}  // namespace

Magi2SamplerDefaults magi2_sampler_defaults(const nlohmann::json& config) {
  Magi2SamplerDefaults d;
  auto it = config.find("evaluation_config");
  if (it == config.end() || !it->is_object()) return d;
  const nlohmann::json& e = *it;
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
  g.dynamic_cfg_cutoff_value = json_or<float>(e, "dynamic_cfg_cutoff_value", g.dynamic_cfg_cutoff_value);
  g.use_skimmed_cfg_linear = json_or<bool>(e, "use_skimmed_cfg_linear", g.use_skimmed_cfg_linear);
  g.skimmed_cfg_scale = json_or<float>(e, "skimmed_cfg_scale", g.skimmed_cfg_scale);
  g.cfg_rescale = json_or<float>(e, "cfg_rescale", g.cfg_rescale);
  return d;
}

GenerateResult generate_magi2(ops::Context& ctx, const Checkpoint& ckpt, const Magi2GenerateOptions& o) {
  const magi2::Magi2Config config = magi2::config_from_checkpoint(ckpt);
  const Magi2SamplerDefaults defaults = magi2_sampler_defaults(*ckpt.config());
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

  AVDIT_REQUIRE(o.text.defined(), "MAGI-2 needs text features (--text FILE with text_embeds or txt_feat)");
  const Tensor text = text_features(o.text, config.text_in_channels, "text features");
  const Tensor negative = o.negative.defined()
                              ? text_features(o.negative, config.text_in_channels, "negative text features")
                              : Tensor::zeros({1, 0, config.text_in_channels}, DType::F32);
  const int64_t tc = config.data_proxy.time_channel_dim;
  if (o.time_embedding_freqs.defined())
    AVDIT_REQUIRE(o.time_embedding_freqs.tensor.numel() == tc / 2 && dtype_is_float(o.time_embedding_freqs.tensor.dtype()),
                  "{}: time-embedding frequencies have shape {}, expected [{}] float (time_channel_dim / 2)",
                  o.time_embedding_freqs.where, o.time_embedding_freqs.tensor.shape_str(), tc / 2);

  const int64_t pt = config.data_proxy.t_patch_size, ps = config.data_proxy.patch_size;
  const int64_t cv = config.video_in_channels / (pt * ps * ps);
  const Tensor x_video = initial_latent(run.noise_video, run.video_shape, {1, cv, -1, -1, -1}, run.seed,
                                        sample::kVideoNoiseStream, "video");
  const Tensor x_audio = initial_latent(run.noise_audio, run.audio_shape, {1, -1, config.audio_in_channels}, run.seed,
                                        sample::kAudioNoiseStream, "audio");
  AVDIT_REQUIRE(x_video.size(2) % pt == 0 && x_video.size(3) % ps == 0 && x_video.size(4) % ps == 0,
                "video latent {} is not divisible by the patch size (t {}, spatial {})", x_video.shape_str(), pt, ps);

  const sample::FlowUniPCSchedule schedule = sample::magi2_schedule(steps, shift);
  std::optional<magi2::Magi2Weights> weights;
  if (!o.forward) weights.emplace(magi2::load_magi2_weights(ckpt, config, o.load));
  const int64_t batch = cfg ? 2 : 1;
  const Tensor txt = cfg ? stack_padded({text, negative}) : text;
  const Tensor txt_len = cfg ? lengths({text.size(1), negative.size(1)}) : lengths({text.size(1)});
  const Tensor audio_len = lengths(std::vector<int64_t>(batch, x_audio.size(1)));

  auto host = [&](const Tensor& t) { return ctx.download(t).to_f32(); };
  auto device = [&](const Tensor& t) { return ctx.upload(t); };
  // Packing runs on the host: device latents come back for it, velocities go out again.
  sample::ModelFn model = [&](const sample::StepInfo& step, const std::vector<Tensor>& x_in) {
    const std::vector<Tensor> x = {host(x_in[0]), host(x_in[1])};
    const float t = schedule.model_t[step.index];
    TensorMap in;
    in["video_latent"] = cfg ? stack_padded({x[0], x[0]}) : x[0];
    in["audio_latent"] = cfg ? stack_padded({x[1], x[1]}) : x[1];
    in["txt_feat"] = txt;
    in["txt_feat_len"] = txt_len;
    in["audio_feat_len"] = audio_len;
    const Shape& vs = x[0].shape();
    in["per_token_video_t"] = filled({batch, 1, vs[2], vs[3], vs[4]}, t);
    in["per_token_audio_t"] = filled({batch, x[1].size(1), 1}, t);  // text tokens get t = 0 in packing
    magi2::PackedSequence packed = magi2::pack_inputs(config, in);
    if (o.time_embedding_freqs.defined())
      packed.time_tokens = time_embedding_with(packed.per_token_t, o.time_embedding_freqs.tensor, tc);
    const TensorMap out = o.forward ? o.forward(packed) : magi2::forward_packed(*weights, packed);
    Tensor video, audio;
    magi2::unpack_outputs(config, packed, out.at("model_output"), video, audio);
    sample::ModelOut mo{{device(item(video, 0)), device(item(audio, 0))}, {}};
    if (cfg) mo.uncond = {device(item(video, 1)), device(item(audio, 1))};
    return mo;
  };

  GenerateResult result;
  sample::SamplerOptions so;
  so.modalities = {"video", "audio"};
  // On a device, plain and per-frame-scaled guidance run there; skimming and rescale (off in the
  // official config) take the host path on copies.
  const bool device_cfg = !guidance.use_skimmed_cfg_linear && !(guidance.cfg_rescale > 0.0f);
  so.guide = [&](int m, const sample::StepInfo& step, const Tensor& c, const Tensor& u, const Tensor& x) {
    const int64_t timestep = schedule.timesteps[step.index];
    if (device_cfg) {
      Tensor v = ctx.empty(c.shape(), DType::F32);
      if (m == 1) ops::cfg(ctx, c, u, {guidance.audio_scale}, 1, v);
      else  // video [B, C, T, H, W]: one scale per latent frame
        ops::cfg(ctx, c, u, sample::magi2_video_scales(guidance, c.size(2), timestep), c.size(3) * c.size(4), v);
      return v;
    }
    return device(m == 0 ? sample::magi2_cfg_video(host(c), host(u), host(x), guidance, timestep)
                         : sample::magi2_cfg_audio(host(c), host(u), host(x), guidance));
  };
  std::vector<Tensor> latents = {device(x_video), device(x_audio)};
  const RunProbes probes(ctx, run, result, so, latents, steps);
  std::vector<std::unique_ptr<sample::Stepper>> steppers;
  steppers.push_back(sample::make_unipc_stepper(ctx, schedule.sigmas));
  steppers.push_back(sample::make_unipc_stepper(ctx, schedule.sigmas));
  log::debug("magi2 generate: {} steps, shift {}, guidance video {} audio {}{}", steps, shift, guidance.video_scale,
             guidance.audio_scale, cfg ? "" : " (single pass)");
  std::vector<Tensor> final = sample::run_sampler(ctx, std::move(latents), steppers, steps, model, so);
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
