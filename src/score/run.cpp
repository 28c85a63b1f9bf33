// CandidateRunner (see run.h): the family's model with the candidate's load options, the probes of
// the score-only knobs, generate_magi2 / generate_h3.
#include "score/run.h"

#include <cmath>
#include <optional>

#include "analysis/routes/mask.h"
#include "core/error.h"
#include "core/log.h"
#include "core/observer.h"
#include "core/sha256.h"
#include "models/h3/model.h"
#include "models/magi2/api.h"
#include "models/magi2/model.h"
#include "ops/dispatch.h"
#include "ops/rows.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "sample/noise.h"
#include "sample/step_cache.h"

namespace avdit::score {

namespace {

// --velocity-bf16: each model answer (cond and uncond) rounded once to bf16, on its context.
class VelocityBf16 final : public Probe {
 public:
  bool wants(const Point& p) const override {
    return p.is(sample::kCondPoint) || p.is(sample::kUncondPoint);
  }
  void on(ops::Context& ctx, const Point&, Tensor& t) override {
    t = ops::cast(ctx, ops::cast(ctx, t, DType::BF16), DType::F32);
  }
};

// --perturb-velocity EPS: the guided velocity v of step k, modality m gets EPS |v| u / |u| added,
// u a fixed seeded Gaussian direction per (k, m). Host arithmetic: a calibration knob, not a fast
// path. With a solver whose update is a multiple of v (H3's Euler, the last UniPC step), the
// teacher-forced error of every step is EPS.
class PerturbVelocity final : public Probe {
 public:
  explicit PerturbVelocity(double eps) : eps_(eps) {}
  bool wants(const Point& p) const override { return p.is(sample::kVelocityPoint); }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    Tensor v = ctx.download(t).to(DType::F32);
    const Tensor u =
        sample::make_noise(v.shape(), kSeed, static_cast<uint64_t>(p.index * 2 + p.part));
    double nv = 0, nu = 0;
    for (int64_t i = 0; i < v.numel(); ++i) {
      nv += double(v.f32()[i]) * v.f32()[i];
      nu += double(u.f32()[i]) * u.f32()[i];
    }
    const double scale = nu > 0 ? eps_ * std::sqrt(nv / nu) : 0.0;
    for (int64_t i = 0; i < v.numel(); ++i)
      v.f32()[i] = static_cast<float>(v.f32()[i] + scale * u.f32()[i]);
    t = ctx.upload(v);
  }

 private:
  static constexpr uint64_t kSeed = 0x70657274;  // "pert"
  double eps_;
};

DType act_of(const std::string& precision) {
  return precision == "bf16" ? DType::BF16 : DType::F32;
}

}  // namespace

std::string states_digest(const std::vector<std::pair<std::string, Tensor>>& states) {
  Sha256 h;
  for (const auto& [name, t] : states) {
    if (!t.defined()) continue;
    h.update(fmt::format("{}|{}|{}|", name, dtype_name(t.dtype()), t.shape_str()));
    h.update(sha256_hex(t));
  }
  return h.hex_digest();
}

int default_steps(bool magi2, const nlohmann::json& config) {
  return magi2 ? pipeline::magi2_sampler_defaults(models::magi2::parse_magi2_config(config)).steps
               : pipeline::kH3DefaultSteps;
}

struct CandidateRunner::Impl {
  ops::Context& ctx;
  Knobs knobs;
  std::optional<models::magi2::Magi2Model> magi2;
  std::optional<models::h3::H3Model> h3;
};

CandidateRunner::CandidateRunner(ops::Context& ctx, const Checkpoint& ckpt, bool magi2,
                                 const Knobs& knobs, const std::string& precision)
    : impl_(std::make_unique<Impl>(Impl{ctx, knobs, std::nullopt, std::nullopt})) {
  AVDIT_REQUIRE(magi2 || !knobs.magi2_only(),
                "{}: --nvfp4-experts, --moe-combine, --nvfp4-expert-inputs and --expert-mask are "
                "MAGI-2 knobs; "
                "this is an H3 model",
                ckpt.source().string());
  AVDIT_REQUIRE(!knobs.nvfp4_expert_inputs || !ctx.is_cuda(),
                "--nvfp4-expert-inputs runs on the CPU only for now (--device cpu)");
  const DType act = act_of(knobs.precision.value_or(precision));
  if (magi2) {
    models::magi2::LoadOptions load;
    load.nvfp4_experts = knobs.nvfp4_experts;
    load.moe_combine = knobs.moe_combine;
    load.nvfp4_expert_inputs = knobs.nvfp4_expert_inputs;
    if (!knobs.fp8_gemm.empty()) load.fp8_gemm = ops::parse_fp8_scaling(knobs.fp8_gemm, "--fp8-gemm");
    load.fp8_attention = knobs.fp8_attention;
    if (!knobs.expert_mask.empty())  // as generate --expert-mask: a router bias far below any score
      load.router_bias_add = analysis::routes::mask_router_bias(
          analysis::routes::read_expert_mask(knobs.expert_mask),
          models::magi2::config_from_checkpoint(ckpt), knobs.expert_mask);
    impl_->magi2.emplace(ctx, ckpt, act, load);
  } else {
    impl_->h3.emplace(ctx, ckpt, act);
    if (!knobs.fp8_gemm.empty())
      impl_->h3->set_fp8_gemm(ops::parse_fp8_scaling(knobs.fp8_gemm, "--fp8-gemm"));
    impl_->h3->set_fp8_attention(knobs.fp8_attention);
  }
}

CandidateRunner::~CandidateRunner() = default;

pipeline::GenerateResult CandidateRunner::run(
    const Prompt& p, const Sampling& s, const sample::Trajectory* teacher,
    const std::function<void(int, int, double)>& progress) const {
  pipeline::RunOptions run;
  run.steps = s.steps;
  run.shift = s.shift;
  run.seed = s.seed;
  run.video_shape = s.video_shape;
  run.audio_shape = s.audio_shape;
  run.teacher = teacher;
  run.record_trajectory = true;
  run.progress = progress;
  ops::Context& ctx = impl_->ctx;
  std::optional<VelocityBf16> bf16;
  std::optional<PerturbVelocity> perturb;
  if (impl_->knobs.velocity_bf16) bf16.emplace();
  if (impl_->knobs.perturb_velocity > 0) perturb.emplace(impl_->knobs.perturb_velocity);
  const ProbeScope bf16_scope(ctx.observer(), bf16 ? &*bf16 : nullptr);
  const ProbeScope perturb_scope(ctx.observer(), perturb ? &*perturb : nullptr);
  std::optional<sample::StepCache> cache;
  if (!impl_->knobs.step_cache.empty()) {
    sample::StepCachePolicy policy = sample::parse_step_cache(impl_->knobs.step_cache);
    if (policy.skips()) cache.emplace(std::move(policy));
  }
  const ProbeScope cache_scope(ctx.observer(), cache ? &*cache : nullptr);
  if (impl_->magi2) {
    pipeline::Magi2GenerateOptions o;
    o.run = run;
    o.text = p.text;
    o.negative = p.negative;
    o.video_guidance = s.video_guidance;
    o.audio_guidance = s.audio_guidance;
    pipeline::GenerateResult r = pipeline::generate_magi2(*impl_->magi2, o);
    if (cache) log::info("{}", cache->report().line(cache->policy().spec));
    return r;
  }
  pipeline::H3GenerateOptions o;
  o.run = run;
  o.text = p.text;
  o.text_token_tags = p.text_tags;
  o.negative = p.negative;
  o.negative_token_tags = p.negative_tags;
  o.video_guidance = s.video_guidance;
  o.audio_guidance = s.audio_guidance;
  pipeline::GenerateResult r = pipeline::generate_h3(*impl_->h3, o);
  if (cache) log::info("{}", cache->report().line(cache->policy().spec));
  return r;
}

}  // namespace avdit::score
