// Step-cache policies and the StepCache probe (see step_cache.h).
#include "sample/step_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/stack_points.h"
#include "ops/rows.h"
#include "ops/activation.h"
#include "ops/step_residual.h"
#include "sample/sampler_loop.h"

namespace avdit::sample {
namespace {

[[noreturn]] void bad_policy(const std::string& spec, const std::string& why) {
  throw BadInput(fmt::format("--step-cache '{}': {}; expected {}", spec, why, kStepCacheForms));
}

int parse_int(const std::string& spec, const std::string& s, const char* what, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || !end || *end != '\0' || v < lo || v > hi)
    bad_policy(spec, fmt::format("{} '{}' is not an integer from {} to {}", what, s, lo, hi));
  return static_cast<int>(v);
}

double parse_threshold(const std::string& spec, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || !end || *end != '\0' || !std::isfinite(v) || v <= 0)
    bad_policy(spec, fmt::format("THRESH '{}' is not a positive number", s));
  return v;
}

// The indicator's rescale from `avdit calibrate step-cache --json`'s output
// (modulated.coefficients).
Rescale read_rescale(const std::string& spec, const std::string& path) {
  std::ifstream in(path);
  if (!in) bad_policy(spec, fmt::format("cannot read the calibration file {}", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    bad_policy(spec, fmt::format("{} is not JSON (write it with avdit calibrate step-cache --json)",
                                 path));
  }
  const auto* c = j.is_object() && j.contains("modulated") && j["modulated"].is_object()
                      ? &j["modulated"]["coefficients"]
                      : nullptr;
  if (!c || !c->is_array() || c->size() != 5)
    bad_policy(spec, fmt::format("{} has no modulated.coefficients of 5 numbers", path));
  Rescale r;
  for (size_t i = 0; i < 5; ++i) {
    if (!(*c)[i].is_number() || !std::isfinite((*c)[i].get<double>()))
      bad_policy(spec,
                 fmt::format("{}: modulated.coefficients[{}] is not a finite number", path, i));
    r.coef[i] = (*c)[i].get<double>();
  }
  return r;
}

std::vector<std::string> split(const std::string& s, char sep, size_t max_parts) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (out.size() + 1 < max_parts) {
    const size_t at = s.find(sep, begin);
    if (at == std::string::npos) break;
    out.push_back(s.substr(begin, at - begin));
    begin = at + 1;
  }
  out.push_back(s.substr(begin));
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double Rescale::operator()(double x) const {
  double y = 0;
  for (double c : coef) y = y * x + c;
  return y;
}

StepCachePolicy parse_step_cache(const std::string& spec) {
  StepCachePolicy p;
  p.spec = spec;
  const std::vector<std::string> f = split(spec, ':', 3);
  const std::string& kind = f[0];
  if (kind == "none") {
    if (f.size() != 1) bad_policy(spec, "none takes no parameters");
  } else if (kind == "uniform") {
    if (f.size() != 3) bad_policy(spec, "uniform needs EVERY and PROTECT");
    p.kind = StepCachePolicy::Kind::Uniform;
    p.every = parse_int(spec, f[1], "EVERY", 2, 1000000);
    p.protect = parse_int(spec, f[2], "PROTECT (the computed opening steps)", 1, 1000000);
  } else if (kind == "indicator") {
    if (f.size() < 2) bad_policy(spec, "indicator needs THRESH");
    p.kind = StepCachePolicy::Kind::Indicator;
    p.threshold = parse_threshold(spec, f[1]);
    if (f.size() == 3) {
      p.calibration = f[2];
      p.rescale = read_rescale(spec, f[2]);
    }
  } else if (kind == "first-block") {
    if (f.size() != 2) bad_policy(spec, "first-block takes THRESH only");
    p.kind = StepCachePolicy::Kind::FirstBlock;
    p.threshold = parse_threshold(spec, f[1]);
  } else {
    bad_policy(spec, fmt::format("unknown policy '{}'", kind));
  }
  return p;
}

int StepCacheReport::skipped() const {
  return static_cast<int>(
      std::count_if(calls.begin(), calls.end(), [](const CacheCall& c) { return c.skipped; }));
}

std::string StepCacheReport::pattern() const {
  std::string s;
  for (const CacheCall& c : calls) s += c.skipped ? 'S' : 'C';
  return s;
}

double StepCacheReport::ideal_speedup() const {
  const int computed = static_cast<int>(calls.size()) - skipped();
  return computed > 0 ? static_cast<double>(calls.size()) / computed : 1.0;
}

std::string StepCacheReport::line(const std::string& policy) const {
  return fmt::format(
      "step cache {}: {} skipped {} of {} calls, speedup {:.2f}x (ideal: calls / computed)", policy,
      pattern(), skipped(), calls.size(), ideal_speedup());
}

std::pair<double, double> StepCacheReport::step_costs(
    const std::vector<double>& step_seconds) const {
  std::vector<double> computed, skipped_steps;
  for (size_t k = 0; k < step_seconds.size(); ++k) {
    bool any = false, all_skipped = true, none_skipped = true;
    for (const CacheCall& c : calls) {
      if (c.step != static_cast<int>(k)) continue;
      any = true;
      (c.skipped ? none_skipped : all_skipped) = false;
    }
    if (any && all_skipped) skipped_steps.push_back(step_seconds[k]);
    if (any && none_skipped) computed.push_back(step_seconds[k]);
  }
  return {median(computed), median(skipped_steps)};
}

StepCache::StepCache(StepCachePolicy policy, bool record)
    : policy_(std::move(policy)), record_(record) {}

bool StepCache::wants(const Point& p) const {
  using K = StepCachePolicy::Kind;
  if (p.is(kInputPoint)) return p.part <= 0;
  if (p.is(models::kStackInput) || p.is(models::kStackOutput)) return true;
  if (p.is(models::kStackSkip)) return policy_.skips() && p.index == policy_.decision_block();
  if (p.is(models::kStackModulated)) return record_ || policy_.kind == K::Indicator;
  if (p.is(models::kStackBlock0)) return record_ || policy_.kind == K::FirstBlock;
  return false;
}

StepCache::Pass& StepCache::pass() {
  if (passes_.size() <= static_cast<size_t>(pass_)) passes_.resize(pass_ + 1);
  return passes_[pass_];
}

void StepCache::on(ops::Context& ctx, const Point& p, Tensor& t) {
  using K = StepCachePolicy::Kind;
  if (p.is(kInputPoint)) {  // a new step: its calls are the passes 0, 1, ...
    step_ = static_cast<int>(p.index);
    pass_ = -1;
    return;
  }
  if (p.is(models::kStackInput)) {
    AVDIT_CHECK(step_ >= 0, "step cache: a model call outside the sampler loop");
    ++pass_;
    report_.calls.push_back({step_, pass_});
    input_ = ops::clone(ctx, t);
    open_ = true;
    const bool ready = pass().residual.defined();
    skip_ = ready && policy_.kind == K::Uniform && step_ >= policy_.protect &&
            (step_ - policy_.protect) % policy_.every == policy_.every - 1;
    return;
  }
  AVDIT_CHECK(open_, "step cache: point {} outside a model call", p.str());
  Pass& s = pass();
  if (p.is(models::kStackModulated)) {
    // TeaCache: the relative L1 change against the previous call, rescaled, accumulated until it
    // reaches the threshold; the first call of a pass is computed.
    double change = CacheCall::kNone;
    if (s.modulated.defined()) change = ops::l1_sums(ctx, t, s.modulated).relative();
    if (record_) call().modulated_change = change;
    if (policy_.kind == K::Indicator) {
      if (!std::isnan(change) && s.residual.defined()) {
        s.accumulated += policy_.rescale(change);
        call().indicator = s.accumulated;
        skip_ = s.accumulated < policy_.threshold;
      }
      if (!skip_) s.accumulated = 0;
    }
    s.modulated = ops::clone(ctx, t);
    return;
  }
  if (p.is(models::kStackBlock0)) {
    const Tensor r0 = ops::sub(ctx, t, input_, DType::F32);
    if (record_) {
      if (s.block0_previous.defined())
        call().block0_change = ops::l1_sums(ctx, r0, s.block0_previous).relative();
      s.block0_previous = r0;
    }
    if (policy_.kind == K::FirstBlock) {
      if (s.block0.defined() && s.residual.defined()) {
        call().indicator = ops::l1_sums(ctx, r0, s.block0).relative();
        skip_ = call().indicator < policy_.threshold;
      }
      if (!skip_) s.block0 = r0;
    }
    return;
  }
  if (p.is(models::kStackSkip)) {
    if (skip_) {
      t.data<uint8_t>()[0] = 1;
      call().skipped = true;
    }
    return;
  }
  if (p.is(models::kStackOutput)) {
    open_ = false;
    if (call().skipped) {
      t = ops::add(ctx, input_, s.residual, t.dtype());
    } else {
      const Tensor r = ops::sub(ctx, t, input_, DType::F32);
      if (record_ && s.residual.defined())
        call().residual_change = ops::l1_sums(ctx, r, s.residual).relative();
      s.residual = r;
    }
    input_ = Tensor();
    skip_ = false;
  }
}

}  // namespace avdit::sample
