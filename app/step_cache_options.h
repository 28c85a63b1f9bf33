// --step-cache of `avdit generate` (latent and pipeline mode): the policy parsed before any work
// (a bad string exits 2 naming it), the StepCache probe attached to the DiT's context for the
// sampling, and the one-line report of which calls were skipped.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/observer.h"
#include "sample/step_cache.h"

namespace avdit::ops {
class Context;
}

namespace avdit::app {

inline constexpr const char* kStepCacheHelp =
    "Step caching: none | uniform:EVERY:PROTECT (after PROTECT computed steps, skip every "
    "EVERY-th) "
    "| indicator:THRESH[:CALIBRATION.json] (TeaCache: block 0's modulated input, rescaled by the "
    "calibrated polynomial) | first-block:THRESH; a skipped call reuses the last computed call's "
    "stack residual";

class StepCacheRun {
 public:
  // "" and "none": nothing attached.
  explicit StepCacheRun(const std::string& spec);
  bool active() const { return cache_.has_value(); }
  // Detaches the probe when it dies: keep it as a local declared after the context, so the probe
  // leaves the observer before the context goes (this object is parsed before the context exists).
  class Attached {
   public:
    explicit Attached(StepCacheRun& run) : run_(run) {}
    ~Attached() { run_.scope_.reset(); }
    Attached(const Attached&) = delete;
    Attached& operator=(const Attached&) = delete;

   private:
    StepCacheRun& run_;
  };
  // Attaches the probe to ctx's observer until the returned guard dies.
  [[nodiscard]] Attached attach(ops::Context& ctx);
  // The pattern line, and the median seconds of the computed and the skipped steps.
  std::string summary(const std::vector<double>& step_seconds) const;
  nlohmann::json json(const std::vector<double>& step_seconds) const;

 private:
  std::optional<sample::StepCache> cache_;
  std::optional<ProbeScope> scope_;
};

}  // namespace avdit::app
