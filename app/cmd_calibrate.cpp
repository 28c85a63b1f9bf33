// `avdit calibrate step-cache`: one run without skips (the teacher) with every call's changes
// recorded (sample/step_cache.h), then each indicator's degree-4 fit to the true relative change of
// the residual a skip would reuse (sample/step_cache_fit.h), reported with Pearson r, the in-sample
// R² and the leave-one-out R². The JSON (--out) is what indicator:THRESH:FILE reads.
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <optional>

#include "commands.h"
#include "context.h"
#include "core/error.h"
#include "core/log.h"
#include "io/finite.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/family.h"
#include "pipeline/inputs.h"
#include "pipeline/latent_shape.h"
#include "run_checks.h"
#include "sample/step_cache.h"
#include "sample/step_cache_fit.h"
#include "score/run.h"

namespace avdit::app {

namespace {

using nlohmann::json;

struct CalibrateArgs {
  std::string model, text, negative, latent_shape, out, device = "cpu", precision = "fp32";
  std::optional<int> steps;
  uint64_t seed = 0;
  std::optional<float> guidance;
  std::optional<double> shift;
  bool json = false;
};

json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string fixed(double v, int digits) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : "n/a";
}

int run_calibrate(const CalibrateArgs& a) {
  if (a.guidance) require_finite_option(*a.guidance, "--guidance");
  if (a.shift) require_finite_option(*a.shift, "--shift");
  const Checkpoint ckpt = Checkpoint::open(a.model);
  AVDIT_REQUIRE(ckpt.config(), "{}: no config.json beside the weights", a.model);
  const auto family = models::detect_family(*ckpt.config());
  AVDIT_REQUIRE(family && (*family == "magi2-preview" || *family == "h3"),
                "{}: calibrate step-cache runs MAGI-2 preview and H3 DiTs; this config is {}",
                a.model, family.value_or("of no known family"));
  const bool magi2 = *family == "magi2-preview";
  if (!a.out.empty()) check_output_path(a.out, "--out", checkpoint_files(ckpt));

  score::Prompt prompt;
  prompt.id = "p1";
  const TensorMap states = read_all(a.text);
  prompt.text = pipeline::read_one_of(a.text,
                                      magi2 ? std::vector<std::string>{"txt_feat", "text_embeds"}
                                            : std::vector<std::string>{"text_embeds"},
                                      "text states");
  if (!magi2) prompt.text_tags = pipeline::find_one_of(states, a.text, {"text_token_tags"});
  const std::string negative_file = a.negative.empty() ? a.text : a.negative;
  const TensorMap negative = read_all(negative_file);
  prompt.negative = pipeline::find_one_of(negative, negative_file,
                                          magi2 ? std::vector<std::string>{"null_txt_feat"}
                                                : std::vector<std::string>{"negative_text_embeds"});
  if (!a.negative.empty() && !prompt.negative.defined())
    prompt.negative = pipeline::read_one_of(
        a.negative, {"null_txt_feat", "text_embeds", "txt_feat"}, "negative text states");

  score::Sampling s;
  s.steps = a.steps.value_or(score::default_steps(magi2, *ckpt.config()));
  s.seed = a.seed;
  const pipeline::LatentShapes shapes =
      pipeline::latent_shapes_from_string(*family, *ckpt.config(), a.latent_shape);
  s.video_shape = shapes.video;
  s.audio_shape = shapes.audio;
  s.video_guidance = s.audio_guidance = a.guidance;
  s.shift = a.shift;
  s.device = a.device;
  s.precision = a.precision;

  const std::unique_ptr<ops::Context> ctx = make_context(a.device);
  const score::CandidateRunner runner(*ctx, ckpt, magi2, score::Knobs{}, a.precision);
  sample::StepCache recorder(sample::parse_step_cache("none"), /*record=*/true);
  {
    const ProbeScope scope(ctx->observer(), &recorder);
    runner.run(prompt, s, nullptr);
  }
  const std::vector<sample::CacheCall>& calls = recorder.report().calls;

  // Pairs: each indicator's change at a call against the change of the residual at that call.
  std::vector<double> xm, ym, xf, yf, y_all;
  for (const sample::CacheCall& c : calls) {
    if (std::isnan(c.residual_change)) continue;
    y_all.push_back(c.residual_change);
    if (!std::isnan(c.modulated_change))
      xm.push_back(c.modulated_change), ym.push_back(c.residual_change);
    if (!std::isnan(c.block0_change))
      xf.push_back(c.block0_change), yf.push_back(c.residual_change);
  }
  const sample::IndicatorFit fm = sample::fit_indicator(xm, ym);
  const sample::IndicatorFit ff = sample::fit_indicator(xf, yf);
  const double min_change = *std::min_element(y_all.begin(), y_all.end());

  auto fit_json = [&](const sample::IndicatorFit& f, const std::vector<double>& x,
                      const std::vector<double>& y) {
    return json{
        {"pairs", f.n},        {"coefficients", f.coef},     {"pearson_r", number(f.pearson)},
        {"r2", number(f.r2)},  {"loo_r2", number(f.loo_r2)}, {"indicator", x},
        {"residual_change", y}};
  };
  json call_list = json::array();
  for (const sample::CacheCall& c : calls)
    call_list.push_back({{"step", c.step},
                         {"pass", c.pass},
                         {"modulated_change", number(c.modulated_change)},
                         {"block0_change", number(c.block0_change)},
                         {"residual_change", number(c.residual_change)}});
  const json j{{"family", *family},
               {"model", a.model},
               {"steps", s.steps},
               {"seed", s.seed},
               {"device", a.device},
               {"precision", a.precision},
               {"latent_shape", a.latent_shape},
               {"calls", call_list},
               {"min_residual_change", number(min_change)},
               {"modulated", fit_json(fm, xm, ym)},
               {"first_block", fit_json(ff, xf, yf)}};
  if (!a.out.empty()) write_file_atomic(a.out, j.dump(2) + "\n");
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("calibrate step-cache: {} {}, {} steps, {} calls without skips\n\n",
                           *family, a.model, s.steps, calls.size());
  std::cout << "| indicator | pairs | Pearson r | in-sample R² | leave-one-out R² | x^4, x^3, x^2, "
               "x, 1 |\n"
               "| --- | ---: | ---: | ---: | ---: | --- |\n";
  for (const auto& [name, f] :
       {std::pair{"modulated input (TeaCache)", &fm}, std::pair{"first block", &ff}})
    std::cout << fmt::format(
        "| {} | {} | {} | {} | {} | {:.4g}, {:.4g}, {:.4g}, {:.4g}, {:.4g} |\n", name, f->n,
        fixed(f->pearson, 3), fixed(f->r2, 3), fixed(f->loo_r2, 3), f->coef[0], f->coef[1],
        f->coef[2], f->coef[3], f->coef[4]);
  std::cout << fmt::format("\nthe reused residual changes by at least {:.3f} between calls\n",
                           min_change);
  if (!a.out.empty())
    std::cout << "wrote " << a.out << " (use it as --step-cache indicator:THRESH:" << a.out
              << ")\n";
  return 0;
}

}  // namespace

Run add_calibrate(CLI::App& app) {
  auto* cal = app.add_subcommand("calibrate", "Calibrate a speed knob's indicator on a model");
  cal->require_subcommand(1);
  auto* cmd = cal->add_subcommand(
      "step-cache",
      "Fit the step cache's indicators (TeaCache's modulated input, the first block's residual) to "
      "the true change of the reused residual over a run without skips; reports Pearson r, "
      "in-sample "
      "and leave-one-out R²");
  auto a = std::make_shared<CalibrateArgs>();
  cmd->add_option("--model", a->model, "A DiT folder (config.json + safetensors)")->required();
  cmd->add_option("--text", a->text, "Text states as `generate --text` reads them")->required();
  cmd->add_option(
      "--negative", a->negative,
      "Text states of the unconditional pass (MAGI-2 default: null_txt_feat of --text)");
  cmd->add_option("--latent-shape", a->latent_shape, "Latent size T,H,W,A")->required();
  cmd->add_option("--steps", a->steps, "Sampling steps (default: the family's)")
      ->check(CLI::Range(2, 10000));
  cmd->add_option("--seed", a->seed, "Seed of the noise (default 0)")->check(uint64_string());
  cmd->add_option("--guidance", a->guidance, "CFG scale of both modalities")->check(CLI::Number);
  cmd->add_option("--shift", a->shift, "Schedule shift (as generate)")->check(CLI::Number);
  cmd->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--precision", a->precision, "fp32 or bf16 activations")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--out", a->out,
                  "Write the JSON here (read by --step-cache indicator:THRESH:FILE)");
  cmd->add_flag("--json", a->json, "Print the JSON instead of the table");
  return [a] { return run_calibrate(*a); };
}

}  // namespace avdit::app
