// The refiner's second-stage sampling (see sampler.h), in the order of
// evaluate_magi2_refiner_with_latent: upsample, re-noise, audio start, schedules, the step loop.
#include "models/magi2/refiner/sampler.h"

#include <cmath>
#include <memory>

#include "core/error.h"
#include "ops/rows.h"
#include "ops/sample.h"
#include "sample/cfg.h"
#include "sample/sampler_loop.h"
#include "sample/schedule.h"

namespace avdit::models::magi2::refiner {

std::vector<float> zero_snr_table() {
  constexpr int n = 1000;
  // betas = linspace(sqrt(0.00085), sqrt(0.012), n, float64)^2; alphas_cumprod in float64.
  const double a = std::sqrt(0.00085), b = std::sqrt(0.012), step = (b - a) / (n - 1);
  std::vector<float> s(n);
  double cumprod = 1.0;
  for (int i = 0; i < n; ++i) {
    // torch.linspace (float64): start + i * step for the first half, end - (n - 1 - i) * step
    // for the second.
    const double root = i < n / 2 ? a + i * step : b - (n - 1 - i) * step;
    cumprod *= 1.0 - root * root;
    s[i] = std::sqrt(static_cast<float>(cumprod));  // float32 sqrt of the float32 cumprod
  }
  // s -= s[-1]; s *= s[0] / (s[0] - s[-1]) (float32 tensors, the scalar factor first).
  const float first = s[0], last = s[n - 1];
  const float factor = first / (first - last);
  for (float& v : s) v = (v - last) * factor;
  return s;  // get_sigmas flips, __call__ flips back: index = timestep
}

Tensor upsample_preview(const Tensor& preview_in, int64_t H, int64_t W) {
  AVDIT_REQUIRE(preview_in.ndim() == 5 && preview_in.size(0) == 1 && preview_in.size(2) >= 1,
                "magi2 refiner: the preview latent has shape {}, expected [1, C, T, h, w]",
                preview_in.shape_str());
  AVDIT_REQUIRE(H >= 1 && W >= 1, "magi2 refiner: refiner latent grid {} x {} is empty", H, W);
  const Tensor p = preview_in.to_f32();
  const int64_t C = p.size(1), Ti = p.size(2), Hi = p.size(3), Wi = p.size(4), To = 2 * Ti - 1;
  // Per axis: source index and weights as upsample_trilinear3d with align_corners (float32).
  struct Tap {
    int64_t i0, i1;
    float l0, l1;
  };
  auto taps = [](int64_t in, int64_t out) {
    const float scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.f;
    std::vector<Tap> t(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      const float src = scale * static_cast<float>(o);
      const int64_t i0 = static_cast<int64_t>(src);
      const float l1 = src - static_cast<float>(i0);
      t[o] = {i0, i0 + (i0 < in - 1 ? 1 : 0), 1.f - l1, l1};
    }
    return t;
  };
  const auto tt = taps(Ti, To), th = taps(Hi, H), tw = taps(Wi, W);
  Tensor out = Tensor::empty({1, C, To, H, W}, DType::F32);
  const float* x = std::as_const(p).f32();
  float* y = out.f32();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < To; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          auto at = [&](int64_t ti, int64_t hi, int64_t wi) {
            return x[((c * Ti + ti) * Hi + hi) * Wi + wi];
          };
          const Tap a = tt[t], b = th[h], d = tw[w];
          auto plane = [&](int64_t ti) {
            return b.l0 * (d.l0 * at(ti, b.i0, d.i0) + d.l1 * at(ti, b.i0, d.i1)) +
                   b.l1 * (d.l0 * at(ti, b.i1, d.i0) + d.l1 * at(ti, b.i1, d.i1));
          };
          y[((c * To + t) * H + h) * W + w] = a.l0 * plane(a.i0) + a.l1 * plane(a.i1);
        }
  return out;
}

Tensor renoise(const Tensor& x_in, const Tensor& noise_in, float s) {
  AVDIT_REQUIRE(x_in.shape() == noise_in.shape(),
                "magi2 refiner: re-noise noise {} does not match the upsampled latent {}",
                noise_in.shape_str(), x_in.shape_str());
  const Tensor x = x_in.to_f32(), n = noise_in.to_f32();
  const float c = std::sqrt(1.0f - s * s);
  Tensor out = Tensor::empty(x.shape(), DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float a = std::as_const(x).f32()[i] * s, b = std::as_const(n).f32()[i] * c;
    out.f32()[i] = a + b;
  }
  return out;
}

Refined refine(const RefinerModel& model, const RefineInputs& in, const RefinerSamplerConfig& s,
               const std::function<void(int, int, double)>& progress) {
  ops::Context& ctx = model.ctx();
  const RefinerConfig& c = model.config();
  auto host = [&](const Tensor& t) { return ctx.download(t).to_f32(); };
  const Tensor preview = host(in.preview_video);
  AVDIT_REQUIRE(
      preview.ndim() == 5 && preview.size(0) == 1 && preview.size(1) == c.video_in_channels,
      "magi2 refiner: the preview latent has shape {}, expected [1, {}, T, h, w]",
      preview.shape_str(), c.video_in_channels);
  for (const Tensor* t : {&in.text, &in.null_text})
    AVDIT_REQUIRE(
        t->defined() && t->ndim() == 3 && t->size(0) == 1 && t->size(2) == c.text_in_channels,
        "magi2 refiner: text features {} must be [1, L, {}]",
        t->defined() ? t->shape_str() : std::string("none"), c.text_in_channels);

  Tensor video = upsample_preview(preview, in.height, in.width);
  if (s.noise_value != 0) {
    AVDIT_REQUIRE(in.video_noise.defined(),
                  "magi2 refiner: re-noising (noise value {}) needs noise of shape {}",
                  s.noise_value, video.shape_str());
    video = renoise(video, host(in.video_noise), zero_snr_table()[s.noise_value]);
  }
  // Audio: none at all (scale < 0, the shipping config), the preview's as it is (scale 0, never
  // stepped), or re-noised and stepped beside the video (scale > 0).
  Tensor audio = Tensor::zeros({1, 0, c.audio_in_channels}, DType::F32);
  const bool has_preview_audio = in.preview_audio.defined() && in.preview_audio.numel() > 0;
  const bool step_audio = has_preview_audio && s.audio_noise_scale > 0;
  if (s.audio_noise_scale >= 0 && has_preview_audio) {
    audio = host(in.preview_audio);
    AVDIT_REQUIRE(audio.ndim() == 3 && audio.size(0) == 1 && audio.size(2) == c.audio_in_channels,
                  "magi2 refiner: the preview audio latent has shape {}, expected [1, L, {}]",
                  audio.shape_str(), c.audio_in_channels);
  }
  if (step_audio) {
    const Tensor noise = in.audio_noise.defined() ? host(in.audio_noise) : Tensor();
    AVDIT_REQUIRE(noise.defined() && noise.shape() == audio.shape(),
                  "magi2 refiner: audio re-noise needs noise of shape {}", audio.shape_str());
    const float a = static_cast<float>(s.audio_noise_scale),
                b = static_cast<float>(1.0 - s.audio_noise_scale);
    Tensor start = Tensor::empty(audio.shape(), DType::F32);
    for (int64_t i = 0; i < audio.numel(); ++i)
      start.f32()[i] = std::as_const(noise).f32()[i] * a + std::as_const(audio).f32()[i] * b;
    audio = start;
  }

  const int steps = static_cast<int>(s.num_inference_steps);
  const sample::FlowUniPCSchedule schedule = sample::magi2_schedule(steps, s.shift);
  sample::Magi2Guidance g;
  g.video_scale = s.video_guidance;
  g.use_cfg_trick = s.use_cfg_trick;
  g.cfg_trick_start_frame = static_cast<int>(s.cfg_trick_start_frame);
  g.cfg_trick_value = s.cfg_trick_value;
  const int64_t T = video.size(2);
  const std::vector<float> video_scales = sample::magi2_video_scales(g, T, 0);
  bool uncond_only = true;  // the reference skips the conditional pass when every scale is 0
  for (float v : video_scales) uncond_only = uncond_only && v == 0.f;

  const int64_t La = audio.size(1);
  const RefinerPlan cond = model.plan(video.shape(), La, in.text.size(1));
  const RefinerPlan uncond = model.plan(video.shape(), La, in.null_text.size(1));
  const Tensor text = ctx.upload(in.text.to_f32()), null_text = ctx.upload(in.null_text.to_f32());
  Tensor fixed_audio = ctx.upload(audio);  // the audio tokens when they are not stepped
  sample::ModelFn model_fn = [&](const sample::StepInfo&, const std::vector<Tensor>& x) {
    const Tensor& a = step_audio ? x[1] : fixed_audio;
    const auto u = model.velocity(uncond, x[0], a, null_text);
    sample::ModelOut mo;
    if (uncond_only) {
      mo.cond = {u[0]};
      if (step_audio) mo.cond.push_back(u[1]);
      return mo;
    }
    const auto v = model.velocity(cond, x[0], a, text);
    mo.cond = {v[0]};
    mo.uncond = {u[0]};
    if (step_audio) {
      mo.cond.push_back(v[1]);
      mo.uncond.push_back(u[1]);
    }
    return mo;
  };
  sample::SamplerOptions so;
  so.modalities = {"video"};
  if (step_audio) so.modalities.push_back("audio");
  so.progress = progress;
  so.guide = [&](int m, const sample::StepInfo&, const Tensor& cv, const Tensor& uv,
                 const Tensor&) {
    Tensor v = ctx.empty(cv.shape(), DType::F32);
    if (m == 0)  // video_cfg: one scale per latent frame
      ops::cfg(ctx, cv, uv, video_scales, cv.size(3) * cv.size(4), v);
    else
      ops::cfg(ctx, cv, uv, {s.audio_guidance}, 1, v);
    return v;
  };
  std::vector<std::unique_ptr<sample::Stepper>> steppers;
  std::vector<Tensor> latents = {ctx.upload(video)};
  steppers.push_back(sample::make_unipc_stepper(ctx, schedule.sigmas));
  if (step_audio) {
    latents.push_back(ctx.upload(audio));
    steppers.push_back(sample::make_unipc_stepper(ctx, schedule.sigmas));
  }
  const std::vector<Tensor> final =
      sample::run_sampler(ctx, std::move(latents), steppers, steps, model_fn, so);
  Refined r;
  r.video = host(final[0]);
  r.audio = step_audio ? host(final[1]) : audio;
  return r;
}

}  // namespace avdit::models::magi2::refiner
