// Step caching: a model call whose block stack is skipped reuses the residual (stack output minus
// stack input) of the last computed call of the same CFG pass; the policies decide which calls to
// skip. The StepCache probe attaches to the stack points every DiT shows (models/stack_points.h)
// and to the sampler loop's step.input, so one implementation serves both families.
#pragma once

#include <array>
#include <limits>
#include <string>
#include <vector>

#include "core/observer.h"
#include "core/tensor.h"

namespace avdit::sample {

// TeaCache's rescaling of the indicator: c[0] x^4 + c[1] x^3 + c[2] x^2 + c[3] x + c[4] (numpy
// polyfit's order). The default is the identity: the raw relative change.
struct Rescale {
  std::array<double, 5> coef{0, 0, 0, 1, 0};
  double operator()(double x) const;
};

inline constexpr const char* kStepCacheForms =
    "none | uniform:EVERY:PROTECT | indicator:THRESH[:CALIBRATION.json] | first-block:THRESH";

struct StepCachePolicy {
  enum class Kind { None, Uniform, Indicator, FirstBlock };
  Kind kind = Kind::None;
  // uniform: after PROTECT computed opening steps, every EVERY-th step is skipped (EVERY >= 2).
  int every = 0, protect = 0;
  // indicator: skip while the accumulated rescaled change of block 0's modulated input stays
  // below THRESH; first-block: skip when block 0's residual changed by less than THRESH.
  double threshold = 0;
  Rescale rescale;          // indicator
  std::string calibration;  // the file the rescale came from ("": identity)
  std::string spec;         // as given
  bool skips() const { return kind != Kind::None; }
  // The block before which a skip is taken (first-block runs block 0 to decide).
  int decision_block() const { return kind == Kind::FirstBlock ? 1 : 0; }
};

// BadInput (one line: the string and the expected forms) for anything else.
StepCachePolicy parse_step_cache(const std::string& spec);

// One model call (one CFG pass of one step; MAGI-2 packs both passes into one call).
struct CacheCall {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  int step = 0, pass = 0;
  bool skipped = false;
  double indicator = kNone;  // the policy's value when it decided (accumulated for indicator)
  // With recording, relative L1 changes against this pass's previous call: block 0's modulated
  // input, block 0's residual (its output minus the stack input), and the stack's residual.
  double modulated_change = kNone, block0_change = kNone, residual_change = kNone;
};

struct StepCacheReport {
  std::vector<CacheCall> calls;
  int skipped() const;
  std::string pattern() const;  // one letter per call in order: C computed, S skipped
  // calls / computed calls: the speedup when a skipped call costs nothing.
  double ideal_speedup() const;
  // "step cache POLICY: CCS... skipped 6 of 16 calls, speedup 1.60x (ideal: 1 / (1 - skip))".
  std::string line(const std::string& policy) const;
  // Median seconds of the steps whose calls were all computed and of those all skipped (NaN when
  // there is none), from the run's per-step seconds.
  std::pair<double, double> step_costs(const std::vector<double>& step_seconds) const;
};

class StepCache final : public Probe {
 public:
  // record: also measure each call's changes (CacheCall), for calibration; three reductions more.
  explicit StepCache(StepCachePolicy policy, bool record = false);
  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;
  const StepCacheReport& report() const { return report_; }
  const StepCachePolicy& policy() const { return policy_; }

 private:
  struct Pass {
    Tensor residual;         // F32: the last computed call's stack output - input
    Tensor modulated;        // the previous call's block-0 modulated input
    Tensor block0;           // block 0's residual of the last computed call (first-block)
    Tensor block0_previous;  // of the previous call (recording)
    double accumulated = 0;
  };
  Pass& pass();
  CacheCall& call() { return report_.calls.back(); }

  StepCachePolicy policy_;
  bool record_;
  int step_ = -1, pass_ = -1;
  std::vector<Pass> passes_;
  Tensor input_;  // this call's stack input (a copy: the forward updates its stream in place)
  bool skip_ = false, open_ = false;
  StepCacheReport report_;
};

}  // namespace avdit::sample
