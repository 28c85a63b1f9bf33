// The generic sampling loop, its two solvers on the op set, the trajectory probes and the trajectory
// file form.
#include "sample/sampler_loop.h"

#include <chrono>
#include <cstring>

#include "core/error.h"
#include "ops/check.h"
#include "ops/sample.h"
#include "sample/unipc.h"

namespace avdit::sample {

namespace {

class UniPCStepper final : public Stepper {
 public:
  UniPCStepper(ops::Context& ctx, std::vector<float> sigmas) : ctx_(ctx), plan_(std::move(sigmas)) {}
  Tensor step(const StepInfo& s, const Tensor& velocity, const Tensor& latent) override {
    AVDIT_CHECK(s.index == plan_.step_index(), "UniPC stepper at step {} was asked for step {}", plan_.step_index(),
                s.index);
    AVDIT_REQUIRE(velocity.shape() == latent.shape(), "UniPC: velocity shape {} differs from sample shape {}",
                  velocity.shape_str(), latent.shape_str());
    const int64_t n = latent.numel();
    if (s.index == 0 || history_.numel() != 3 * n) {
      AVDIT_REQUIRE(s.index == 0, "UniPC: the sample has {} elements but had {} at the previous step", n,
                    history_.numel() / 3);
      history_ = ctx_.zeros({3, n}, DType::F32);  // last corrected sample, m_last, m_prev
    }
    Tensor out = ctx_.empty(latent.shape(), DType::F32);
    ops::unipc_step(ctx_, plan_.next(), velocity, latent, history_, out);
    return out;
  }

 private:
  ops::Context& ctx_;
  UniPCPlanner plan_;
  Tensor history_;
};

class H3EulerStepper final : public Stepper {
 public:
  H3EulerStepper(ops::Context& ctx, std::vector<float> t, std::vector<float> ratio)
      : ctx_(ctx), t_(std::move(t)), ratio_(std::move(ratio)) {
    AVDIT_REQUIRE(t_.size() == ratio_.size(), "H3 Euler: {} timesteps but {} sigma ratios; expected equal",
                  t_.size(), ratio_.size());
  }
  Tensor step(const StepInfo& s, const Tensor& velocity, const Tensor& latent) override {
    AVDIT_REQUIRE(s.index >= 0 && static_cast<size_t>(s.index) < t_.size(),
                  "H3 Euler: step {} is outside the schedule of {} steps", s.index, t_.size());
    AVDIT_REQUIRE(velocity.shape() == latent.shape(), "H3 Euler step: velocity shape {} differs from latent shape {}",
                  velocity.shape_str(), latent.shape_str());
    // The scalars exactly as the reference forms them (sample/euler.h): (1 - t) and (1 - r) in float32.
    const float t = t_[s.index], r = ratio_[s.index];
    Tensor out = ctx_.empty(latent.shape(), DType::F32);
    ops::h3_euler(ctx_, latent, velocity, 1.0f - t, r, 1.0f - r, out);
    return out;
  }

 private:
  ops::Context& ctx_;
  std::vector<float> t_, ratio_;
};

std::string modality_name(const SamplerOptions& o, size_t m) {
  return m < o.modalities.size() ? o.modalities[m] : fmt::format("modality {}", m);
}

// [n, ...shape] from n tensors of one shape.
Tensor stack(const std::vector<Tensor>& parts) {
  Shape shape = parts.front().shape();
  shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
  Tensor out = Tensor::empty(shape, DType::F32);
  const int64_t n = parts.front().numel();
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor p = parts[i].to_f32();
    AVDIT_CHECK(p.shape() == parts.front().shape(), "stacking {} and {}", p.shape_str(),
                parts.front().shape_str());
    std::memcpy(out.f32() + static_cast<int64_t>(i) * n, p.f32(), static_cast<size_t>(n) * sizeof(float));
  }
  return out;
}

std::vector<Tensor> unstack(const Tensor& t) {
  std::vector<Tensor> out;
  for (int64_t i = 0; i < t.size(0); ++i) out.push_back(t.select(i).to_f32());
  return out;
}

}  // namespace

std::unique_ptr<Stepper> make_unipc_stepper(ops::Context& ctx, std::vector<float> sigmas) {
  return std::make_unique<UniPCStepper>(ctx, std::move(sigmas));
}

std::unique_ptr<Stepper> make_h3_euler_stepper(ops::Context& ctx, std::vector<float> t, std::vector<float> ratio) {
  return std::make_unique<H3EulerStepper>(ctx, std::move(t), std::move(ratio));
}

std::vector<Tensor> run_sampler(ops::Context& ctx, std::vector<Tensor> latents,
                                std::vector<std::unique_ptr<Stepper>>& steppers, int steps, const ModelFn& model,
                                const SamplerOptions& o) {
  const size_t nm = latents.size();
  AVDIT_REQUIRE(steppers.size() == nm, "sampler: {} latents but {} solvers; expected one solver per modality", nm,
                steppers.size());
  auto points = [&](const char* name, int64_t index, std::vector<Tensor>& ts) {
    for (size_t m = 0; m < ts.size(); ++m)
      if (ts[m].defined()) ops::observe_mut(ctx, {name, index, static_cast<int64_t>(m)}, ts[m]);
  };
  points(kInitialPoint, -1, latents);
  for (int i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepInfo info{i, steps};
    points(kInputPoint, i, latents);

    ModelOut out = model(info, latents);
    AVDIT_REQUIRE(out.cond.size() == nm, "step {}: the model returned {} velocities, expected {} (one per modality)",
                  i, out.cond.size(), nm);
    AVDIT_REQUIRE(out.uncond.empty() || out.uncond.size() == nm,
                  "step {}: the model returned {} unconditional velocities, expected 0 or {}", i,
                  out.uncond.size(), nm);
    points(kCondPoint, i, out.cond);
    points(kUncondPoint, i, out.uncond);
    std::vector<Tensor> velocity(nm);
    for (size_t m = 0; m < nm; ++m) {
      AVDIT_REQUIRE(out.cond[m].shape() == latents[m].shape(),
                    "step {}: the model's {} velocity has shape {}, expected the latent's {}", i,
                    modality_name(o, m), out.cond[m].shape_str(), latents[m].shape_str());
      const bool guided = !out.uncond.empty() && out.uncond[m].defined();
      if (!guided) {
        velocity[m] = out.cond[m];
      } else if (o.guide) {
        velocity[m] = o.guide(static_cast<int>(m), info, out.cond[m], out.uncond[m], latents[m]);
      } else {
        AVDIT_REQUIRE(m < o.guidance.size(), "step {}: no guidance scale for {} (expected {} scales)", i,
                      modality_name(o, m), nm);
        velocity[m] = ctx.empty(out.cond[m].shape(), DType::F32);
        ops::cfg(ctx, out.cond[m], out.uncond[m], {o.guidance[m]}, 1, velocity[m]);
      }
    }
    points(kVelocityPoint, i, velocity);
    for (size_t m = 0; m < nm; ++m) latents[m] = steppers[m]->step(info, velocity[m], latents[m]);
    points(kOutputPoint, i, latents);
    if (o.progress)
      o.progress(i + 1, steps, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return latents;
}

TrajectoryRecorder::TrajectoryRecorder(Trajectory& out, std::vector<std::string> modalities, bool model_out)
    : t_(out), model_out_(model_out) {
  t_ = Trajectory{};
  t_.modalities = std::move(modalities);
}

bool TrajectoryRecorder::wants(const Point& p) const {
  return p.is(kInitialPoint) || p.is(kOutputPoint) || p.is(kVelocityPoint) ||
         (model_out_ && (p.is(kCondPoint) || p.is(kUncondPoint)));
}

void TrajectoryRecorder::on(ops::Context& ctx, const Point& p, Tensor& t) {
  const Tensor h = ctx.download(t).to_f32().clone();
  auto at = [&](std::vector<std::vector<Tensor>>& rows, size_t k) -> Tensor& {
    if (rows.size() <= k) rows.resize(k + 1);
    if (rows[k].size() <= static_cast<size_t>(p.part)) rows[k].resize(p.part + 1);
    return rows[k][p.part];
  };
  if (p.is(kInitialPoint)) {
    at(t_.latents, 0) = h;
  } else if (p.is(kOutputPoint)) {
    at(t_.latents, p.index + 1) = h;
  } else if (p.is(kVelocityPoint)) {
    at(t_.velocity, p.index) = h;
  } else {
    if (t_.model_out.size() <= static_cast<size_t>(p.index)) t_.model_out.resize(p.index + 1);
    std::vector<Tensor>& v = p.is(kCondPoint) ? t_.model_out[p.index].cond : t_.model_out[p.index].uncond;
    if (v.size() <= static_cast<size_t>(p.part)) v.resize(p.part + 1);
    v[p.part] = h;
  }
}

void TeacherForcing::check(int steps, const std::vector<Tensor>& latents,
                           const std::vector<std::string>& modalities) const {
  const size_t nm = latents.size();
  AVDIT_REQUIRE(teacher_.steps() >= steps, "teacher trajectory has {} steps, expected at least {}", teacher_.steps(),
                steps);
  for (const auto& lat : teacher_.latents)
    AVDIT_REQUIRE(lat.size() == nm, "teacher trajectory has {} modalities per step, expected {}", lat.size(), nm);
  for (size_t m = 0; m < nm; ++m)
    AVDIT_REQUIRE(teacher_.latents[0][m].shape() == latents[m].shape(),
                  "teacher trajectory {} latent has shape {}, expected {}",
                  m < modalities.size() ? modalities[m] : std::to_string(m), teacher_.latents[0][m].shape_str(),
                  latents[m].shape_str());
}

bool TeacherForcing::wants(const Point& p) const { return p.is(kInputPoint); }

void TeacherForcing::on(ops::Context& ctx, const Point& p, Tensor& t) {
  t = ctx.upload(teacher_.latents[p.index][p.part].to_f32());
}

bool NonFiniteGuard::wants(const Point& p) const {
  return p.is(kCondPoint) || p.is(kUncondPoint) || p.is(kOutputPoint);
}

void NonFiniteGuard::on(ops::Context& ctx, const Point& p, Tensor& t) {
  const ops::NonFinite nf = ops::count_nonfinite(ctx, t);
  if (nf.count == 0) return;
  const std::string modality = p.part >= 0 && static_cast<size_t>(p.part) < modalities_.size()
                                   ? modalities_[p.part]
                                   : fmt::format("modality {}", p.part);
  const char* what = p.is(kCondPoint)     ? "the model's conditional velocity"
                     : p.is(kUncondPoint) ? "the model's unconditional velocity"
                                          : "the latents after the solver step";
  throw RuntimeFailure(fmt::format(
      "step {}: {} of {} {} has {} non-finite values of {} (the first at flat index {}); the run stops here", p.index,
      what, modality, shape_str(t.shape()), nf.count, t.numel(), nf.first));
}

TensorMap trajectory_to_tensors(const Trajectory& t) {
  TensorMap out;
  if (t.latents.empty()) return out;
  for (size_t m = 0; m < t.latents.front().size(); ++m) {
    const std::string name = m < t.modalities.size() ? t.modalities[m] : fmt::format("m{}", m);
    auto column = [m](const auto& rows) {
      std::vector<Tensor> col;
      for (const auto& r : rows) col.push_back(r[m]);
      return col;
    };
    out["latents_" + name] = stack(column(t.latents));
    if (!t.velocity.empty()) out["velocity_" + name] = stack(column(t.velocity));
    if (!t.model_out.empty()) {
      std::vector<Tensor> cond, uncond;
      for (const auto& mo : t.model_out) {
        cond.push_back(mo.cond[m]);
        if (!mo.uncond.empty() && mo.uncond[m].defined()) uncond.push_back(mo.uncond[m]);
      }
      out["cond_" + name] = stack(cond);
      if (uncond.size() == cond.size()) out["uncond_" + name] = stack(uncond);
    }
  }
  return out;
}

Trajectory trajectory_from_tensors(const TensorMap& tensors, const std::vector<std::string>& modalities) {
  Trajectory t;
  t.modalities = modalities;
  auto find = [&](const std::string& name) -> const Tensor* {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  };
  for (size_t m = 0; m < modalities.size(); ++m) {
    const Tensor* lat = find("latents_" + modalities[m]);
    AVDIT_REQUIRE(lat, "trajectory: tensor latents_{} is missing (expected [steps + 1, ...latent shape])",
                  modalities[m]);
    AVDIT_REQUIRE(lat->ndim() >= 1 && lat->size(0) >= 1, "trajectory: latents_{} has shape {}, expected [steps + 1, ...]",
                  modalities[m], lat->shape_str());
    const auto rows = unstack(*lat);
    if (m == 0) t.latents.resize(rows.size());
    AVDIT_REQUIRE(rows.size() == t.latents.size(), "trajectory: latents_{} has {} entries but latents_{} has {}",
                  modalities[m], rows.size(), modalities[0], t.latents.size());
    for (size_t k = 0; k < rows.size(); ++k) t.latents[k].push_back(rows[k]);
    const size_t steps = rows.size() - 1;
    auto per_step = [&](const std::string& name) -> std::vector<Tensor> {
      const Tensor* x = find(name);
      if (!x) return {};
      AVDIT_REQUIRE(x->ndim() >= 1 && static_cast<size_t>(x->size(0)) == steps,
                    "trajectory: {} has shape {}, expected [{}, ...] (one entry per step)", name, x->shape_str(), steps);
      return unstack(*x);
    };
    if (auto v = per_step("velocity_" + modalities[m]); !v.empty()) {
      t.velocity.resize(steps);
      for (size_t k = 0; k < steps; ++k) t.velocity[k].push_back(v[k]);
    }
    if (auto c = per_step("cond_" + modalities[m]); !c.empty()) {
      auto u = per_step("uncond_" + modalities[m]);
      t.model_out.resize(steps);
      for (size_t k = 0; k < steps; ++k) {
        t.model_out[k].cond.push_back(c[k]);
        t.model_out[k].uncond.push_back(u.empty() ? Tensor() : u[k]);
      }
    }
  }
  return t;
}

}  // namespace avdit::sample
