// generate_h3: refine the prompt(s) once, then per step one velocity call per pass on the unpacked
// latents with each modality's own sigma, guidance per modality, Euler per modality.
#include "pipeline/generate_h3.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/h3/config.h"
#include "models/h3/packing.h"
#include "sample/noise.h"
#include "sample/schedule.h"

namespace avdit::pipeline {

namespace h3 = models::h3;

namespace {

// [L, C] or [1, L, C] -> [L, C] float32, width checked.
Tensor text_states(const LabeledTensor& t, int64_t width, const char* what) {
  Tensor x = t.tensor;
  AVDIT_REQUIRE(dtype_is_float(x.dtype()), "{}: {} must be a float tensor, found {}", t.where, what,
                dtype_name(x.dtype()));
  if (x.ndim() == 3 && x.size(0) == 1) x = x.reshape({x.size(1), x.size(2)});
  AVDIT_REQUIRE(x.ndim() == 2 && x.size(0) >= 1, "{} ({}) has shape {}, expected [L, {}] (L >= 1)", t.where, what,
                t.tensor.shape_str(), width);
  AVDIT_REQUIRE(x.size(1) == width, "{} ({}) has width {}, this model expects {} (config text_dim)", t.where, what,
                x.size(1), width);
  return x.to_f32();
}

std::vector<int64_t> token_tags(const LabeledTensor& t, int64_t text_len) {
  if (!t.defined()) return {};
  AVDIT_REQUIRE(t.tensor.numel() == text_len && !dtype_is_float(t.tensor.dtype()),
                "{}: text token tags are {} {}, expected [{}] integers (one per text row)", t.where,
                dtype_name(t.tensor.dtype()), t.tensor.shape_str(), text_len);
  const Tensor v = t.tensor.to(DType::I64);
  std::vector<int64_t> out(v.data<int64_t>(), v.data<int64_t>() + v.numel());
  for (int64_t tag : out) AVDIT_REQUIRE(tag == 0 || tag == 1, "{}: text token tags must be 0 or 1, found {}", t.where, tag);
  return out;
}

}  // namespace

std::vector<std::vector<float>> h3_timestep_sets(int steps, double video_shift, double audio_shift) {
  const sample::H3Schedule schedule = sample::h3_schedule(steps, video_shift, audio_shift);
  std::vector<std::vector<float>> sets;
  for (int k = 0; k < schedule.steps(); ++k) {
    std::vector<float> set = {h3::timestep_from_sigma(schedule.video_sigmas[k]),
                              h3::timestep_from_sigma(schedule.audio_sigmas[k])};
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    if (std::find(sets.begin(), sets.end(), set) == sets.end()) sets.push_back(set);
  }
  return sets;
}

GenerateResult generate_h3(const h3::H3Model& model, const H3GenerateOptions& o) {
  const h3::H3Config& c = model.config();
  ops::Context& ctx = model.ctx();
  const RunOptions& run = o.run;
  const int steps = run.steps.value_or(kH3DefaultSteps);
  const double video_shift = run.shift.value_or(kH3VideoShift);
  const double audio_shift = o.audio_shift.value_or(kH3AudioShift);
  AVDIT_REQUIRE(steps >= 1, "--steps must be at least 1, got {}", steps);
  AVDIT_REQUIRE(video_shift > 0 && audio_shift > 0, "shifts must be positive, got video {} audio {}", video_shift,
                audio_shift);
  const float gv = o.video_guidance.value_or(1.0f), ga = o.audio_guidance.value_or(1.0f);
  const bool cfg = gv != 1.0f || ga != 1.0f;
  AVDIT_REQUIRE(!cfg || o.negative.defined(),
                "H3 guidance {} / {} needs an unconditional pass: pass --negative FILE (text_embeds of the negative "
                "prompt), or guidance 1 (the released weights are CFG-distilled)",
                gv, ga);

  AVDIT_REQUIRE(o.text.defined(), "H3 needs text states (--text FILE with text_embeds)");
  const Tensor text = text_states(o.text, c.text_dim, "text_embeds");
  const std::vector<int64_t> tags = token_tags(o.text_token_tags, text.size(0));
  const Tensor x_video = initial_latent(run.noise_video, run.video_shape, {1, c.latents_dim, -1, -1, -1}, run.seed,
                                        sample::kVideoNoiseStream, "video");
  const Tensor x_audio = initial_latent(run.noise_audio, run.audio_shape, {h3::kAudioChannels, c.audio_latents_dim, -1},
                                        run.seed, sample::kAudioNoiseStream, "audio");
  AVDIT_REQUIRE(x_video.size(2) % c.patch_size[0] == 0 && x_video.size(3) % c.patch_size[1] == 0 &&
                    x_video.size(4) % c.patch_size[2] == 0,
                "video latent {} is not divisible by the patch size [{}, {}, {}]", x_video.shape_str(),
                c.patch_size[0], c.patch_size[1], c.patch_size[2]);

  const sample::H3Schedule schedule = sample::h3_schedule(steps, video_shift, audio_shift);
  // The prompt only enters through the refiner, which does not depend on the step: refine once.
  const Tensor refined = model.refine_text(text);
  Tensor refined_neg;
  std::vector<int64_t> neg_tags;
  if (cfg) {
    const Tensor neg = text_states(o.negative, c.text_dim, "negative text_embeds");
    neg_tags = token_tags(o.negative_token_tags, neg.size(0));
    refined_neg = model.refine_text(neg);
  }

  // The forward packs and unpacks on the context: the latents never leave it between steps.
  h3::H3Stepper stepper(model);
  sample::ModelFn fn = [&](const sample::StepInfo& step, const std::vector<Tensor>& x) {
    h3::VelocityRequest r;
    r.video_latent = x[0];
    r.audio_latent = x[1];
    r.sigma_video = schedule.video_sigmas[step.index];
    r.sigma_audio = schedule.audio_sigmas[step.index];
    r.text_refined = refined;
    r.text_token_tags = tags;
    const h3::Velocity v = stepper.velocity(r);
    sample::ModelOut out{{v.video, v.audio}, {}};
    if (cfg) {
      r.text_refined = refined_neg;
      r.text_token_tags = neg_tags;
      const h3::Velocity u = stepper.velocity(r);
      out.uncond = {u.video, u.audio};
    }
    return out;
  };

  GenerateResult result;
  sample::SamplerOptions so;
  so.modalities = {"video", "audio"};
  so.guidance = {gv, ga};
  std::vector<Tensor> latents = {ctx.upload(x_video), ctx.upload(x_audio)};
  const RunProbes probes(ctx, run, result, so, latents, steps);
  std::vector<std::unique_ptr<sample::Stepper>> steppers;
  steppers.push_back(sample::make_h3_euler_stepper(ctx, schedule.video_t, schedule.video_ratio));
  steppers.push_back(sample::make_h3_euler_stepper(ctx, schedule.audio_t, schedule.audio_ratio));
  log::debug("h3 generate: {} steps, shift video {} audio {}, guidance video {} audio {}", steps, video_shift,
             audio_shift, gv, ga);
  std::vector<Tensor> final = sample::run_sampler(ctx, std::move(latents), steppers, steps, fn, so);
  result.video = ctx.download(final[0]).to_f32();
  result.audio = ctx.download(final[1]).to_f32();
  result.steps = steps;
  result.shift = video_shift;
  result.video_guidance = gv;
  result.audio_guidance = ga;
  result.cfg = cfg;
  return result;
}

}  // namespace avdit::pipeline
