// --step-cache of `avdit generate` (see step_cache_options.h).
#include "step_cache_options.h"

#include <cmath>

#include <fmt/format.h>

#include "ops/context.h"

namespace avdit::app {

StepCacheRun::StepCacheRun(const std::string& spec) {
  if (spec.empty()) return;
  sample::StepCachePolicy policy = sample::parse_step_cache(spec);
  if (policy.skips()) cache_.emplace(std::move(policy));
}

StepCacheRun::Attached StepCacheRun::attach(ops::Context& ctx) {
  if (cache_) scope_.emplace(ctx.observer(), &*cache_);
  return Attached(*this);
}

std::string StepCacheRun::summary(const std::vector<double>& step_seconds) const {
  if (!cache_) return "";
  const sample::StepCacheReport& r = cache_->report();
  std::string s = r.line(cache_->policy().spec);
  const auto [computed, skipped] = r.step_costs(step_seconds);
  if (!std::isnan(computed) && !std::isnan(skipped))
    s += fmt::format("; step time median: computed {:.2f} ms, skipped {:.2f} ms", computed * 1e3,
                     skipped * 1e3);
  return s;
}

nlohmann::json StepCacheRun::json(const std::vector<double>& step_seconds) const {
  if (!cache_) return nullptr;
  const sample::StepCacheReport& r = cache_->report();
  const auto [computed, skipped] = r.step_costs(step_seconds);
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  return {{"policy", cache_->policy().spec},
          {"pattern", r.pattern()},
          {"calls", r.calls.size()},
          {"skipped", r.skipped()},
          {"ideal_speedup", r.ideal_speedup()},
          {"computed_step_seconds_median", num(computed)},
          {"skipped_step_seconds_median", num(skipped)},
          {"step_seconds", step_seconds}};
}

}  // namespace avdit::app
