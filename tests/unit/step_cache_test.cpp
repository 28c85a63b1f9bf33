// Step caching (sample/step_cache.h): the policy parser and its one-line refusals, the residual ops
// against float64 loops, and on each family's tiny random model: the skip pattern each policy must
// give, every skipped call's stack output equal to its input plus the residual of the last computed
// call of the same CFG pass (recorded by a second probe at the same points), and the calls before
// the first skip bit-identical to a run without the cache.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/magi2/api.h"
#include "models/magi2/model.h"
#include "models/stack_points.h"
#include "ops/context.h"
#include "ops/rows.h"
#include "ops/activation.h"
#include "ops/step_residual.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "pipeline/latent_shape.h"
#include "sample/step_cache.h"

namespace avdit::sample {
namespace {

namespace fs = std::filesystem;

std::string refusal(const std::string& spec) {
  try {
    parse_step_cache(spec);
  } catch (const BadInput& e) {
    return e.what();
  }
  return "";
}

TEST(StepCachePolicy, ParsesTheFourForms) {
  EXPECT_EQ(parse_step_cache("none").kind, StepCachePolicy::Kind::None);
  const StepCachePolicy u = parse_step_cache("uniform:3:4");
  EXPECT_EQ(u.kind, StepCachePolicy::Kind::Uniform);
  EXPECT_EQ(u.every, 3);
  EXPECT_EQ(u.protect, 4);
  EXPECT_EQ(u.decision_block(), 0);
  const StepCachePolicy i = parse_step_cache("indicator:0.25");
  EXPECT_EQ(i.kind, StepCachePolicy::Kind::Indicator);
  EXPECT_DOUBLE_EQ(i.threshold, 0.25);
  EXPECT_DOUBLE_EQ(i.rescale(0.3), 0.3);  // identity without a calibration
  const StepCachePolicy f = parse_step_cache("first-block:0.1");
  EXPECT_EQ(f.kind, StepCachePolicy::Kind::FirstBlock);
  EXPECT_EQ(f.decision_block(), 1);
}

TEST(StepCachePolicy, RefusesWhatDoesNotParseNamingTheString) {
  for (const std::string bad :
       {"", "sometimes", "uniform", "uniform:2", "uniform:1:3", "uniform:2:0", "uniform:x:3",
        "uniform:2:3:4", "indicator", "indicator:-1", "indicator:nan", "indicator:0",
        "first-block:", "first-block:0.1:2", "none:1", "indicator:0.1:/no/such/calibration.json"}) {
    const std::string msg = refusal(bad);
    ASSERT_FALSE(msg.empty()) << bad;
    EXPECT_NE(msg.find("'" + bad + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("uniform:EVERY:PROTECT"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(StepCachePolicy, RescaleIsTheDegree4PolynomialInPolyfitOrder) {
  Rescale r;
  r.coef = {2, -1, 0.5, 3, -4};
  const double x = 0.7;
  EXPECT_NEAR(r(x), 2 * std::pow(x, 4) - std::pow(x, 3) + 0.5 * x * x + 3 * x - 4, 1e-15);
}

Tensor random(Shape shape, uint64_t stream, DType dtype = DType::F32) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  fill_normal(t, 77, stream);
  return t.to(dtype);
}

TEST(StepResidualOps, MatchFloat64Loops) {
  ops::CpuContext ctx;
  for (const DType dt : {DType::F32, DType::BF16}) {
    const Tensor a = random({37, 13}, 1, dt), b = random({37, 13}, 2, dt);
    Tensor r = Tensor::empty({37, 13}, DType::F32), back = Tensor::empty({37, 13}, dt);
    ops::binary_into(ctx, ops::Binary::Sub, a, b, r);
    ops::binary_into(ctx, ops::Binary::Add, b, r, back);
    const Tensor a32 = a.to_f32(), b32 = b.to_f32(), back32 = back.to_f32();
    double diff = 0, base = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double x = a32.f32()[i], y = b32.f32()[i];
      EXPECT_NEAR(r.f32()[i], x - y, 1e-6 * (std::fabs(x) + std::fabs(y))) << i;
      // b + (a - b) gives a back up to one rounding of the stored dtype.
      EXPECT_NEAR(back32.f32()[i], x,
                  (dt == DType::F32 ? 1e-6 : 1e-2) * (std::fabs(x) + std::fabs(y)));
      diff += std::fabs(x - y);
      base += std::fabs(y);
    }
    const ops::L1Sums s = ops::l1_sums(ctx, a, b);
    EXPECT_NEAR(s.diff, diff, 1e-12 * diff);
    EXPECT_NEAR(s.base, base, 1e-12 * base);
    EXPECT_NEAR(s.relative(), diff / base, 1e-12);
  }
  EXPECT_EQ(ops::L1Sums{}.relative(), 0.0);
  EXPECT_TRUE(std::isinf(ops::L1Sums{1.0, 0.0}.relative()));
}

// --- on the tiny models ------------------------------------------------------------------------

struct TinyModels {
  fs::path root;
  TinyModels() {
    root = fs::temp_directory_path() / ("avdit_step_cache_test_" + std::to_string(::getpid()));
    fs::create_directories(root);
    const std::string golden = std::string(AVDIT_SHARED_DIR) + "/golden/";
    models::magi2::init_checkpoint(read_json(golden + "magi2-tiny/config.json"), root / "magi2",
                                   11);
    models::h3::init_checkpoint(read_json(golden + "h3-tiny/config.json"), root / "h3", 12);
  }
  ~TinyModels() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

fs::path model_dir(const std::string& family) {
  static const TinyModels models;
  return models.root / family;
}

Tensor text(int64_t rows, int64_t width, uint64_t seed) {
  Tensor t = Tensor::empty({rows, width}, DType::F32);
  fill_normal(t, seed, 99);
  return t;
}

// Every call's stack input and (final) stack output on the host, keyed by (step, pass).
class StackRecorder final : public Probe {
 public:
  struct Call {
    Tensor in, out;
  };
  std::map<std::pair<int, int>, Call> calls;
  bool wants(const Point& p) const override {
    return (p.is(kInputPoint) && p.part <= 0) || p.is(models::kStackInput) ||
           p.is(models::kStackOutput);
  }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    if (p.is(kInputPoint)) {
      step_ = static_cast<int>(p.index);
      pass_ = -1;
    } else if (p.is(models::kStackInput)) {
      calls[{step_, ++pass_}].in = ctx.download(t).to_f32().clone();
    } else {
      calls[{step_, pass_}].out = ctx.download(t).to_f32().clone();
    }
  }

 private:
  int step_ = -1, pass_ = -1;
};

struct Run {
  pipeline::GenerateResult result;
  StepCacheReport report;
  StackRecorder stack;
};

// Six steps of a family's tiny model with CFG, the cache (when given) attached before the recorder.
Run run_family(const std::string& family, const std::string& policy) {
  Run r;
  ops::CpuContext ctx;
  const Checkpoint ckpt = Checkpoint::open(model_dir(family));
  std::optional<StepCache> cache;
  if (!policy.empty()) cache.emplace(parse_step_cache(policy));
  const ProbeScope cache_scope(ctx.observer(), cache ? &*cache : nullptr);
  const ProbeScope record_scope(ctx.observer(), &r.stack);
  pipeline::RunOptions run;
  run.steps = 6;
  run.seed = 3;
  run.record_trajectory = true;
  if (family == "magi2") {
    pipeline::Magi2GenerateOptions o;
    o.text = {text(6, 64, 1), "test:text"};
    o.negative = {text(3, 64, 2), "test:negative"};
    const auto s = pipeline::latent_shapes_from_string("magi2-preview", *ckpt.config(), "2,2,3,5");
    run.video_shape = s.video;
    run.audio_shape = s.audio;
    o.run = run;
    const models::magi2::Magi2Model model(ctx, ckpt);
    r.result = pipeline::generate_magi2(model, o);
  } else {
    pipeline::H3GenerateOptions o;
    o.text = {text(5, 64, 1), "test:text_embeds"};
    o.negative = {text(4, 64, 2), "test:negative"};
    o.video_guidance = o.audio_guidance = 3.0f;
    const auto s = pipeline::latent_shapes_from_string("h3", *ckpt.config(), "2,2,4,6");
    run.video_shape = s.video;
    run.audio_shape = s.audio;
    o.run = run;
    const models::h3::H3Model model(ctx, ckpt);
    r.result = pipeline::generate_h3(model, o);
  }
  if (cache) r.report = cache->report();
  return r;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

// Each skipped call's output is, bit for bit, its input plus (in float32) the residual of the last
// computed call of its pass; returns how many skipped calls were checked.
int check_skipped_calls(const Run& r) {
  int checked = 0;
  for (const CacheCall& c : r.report.calls) {
    if (!c.skipped) continue;
    int j = c.step - 1;
    while (j >= 0 && [&] {
      for (const CacheCall& d : r.report.calls)
        if (d.step == j && d.pass == c.pass) return d.skipped;
      return true;
    }())
      --j;
    EXPECT_GE(j, 0) << "a skip with no computed call before it, step " << c.step;
    if (j < 0) continue;
    const auto& now = r.stack.calls.at({c.step, c.pass});
    const auto& then = r.stack.calls.at({j, c.pass});
    EXPECT_EQ(now.out.numel(), then.out.numel());
    if (now.out.numel() != then.out.numel()) continue;
    int64_t wrong = 0;
    for (int64_t i = 0; i < now.out.numel(); ++i) {
      const float residual = then.out.f32()[i] - then.in.f32()[i];
      if (now.out.f32()[i] != now.in.f32()[i] + residual) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << "step " << c.step << " pass " << c.pass << " reusing step " << j;
    ++checked;
  }
  return checked;
}

void check_family(const std::string& family, int passes) {
  const Run plain = run_family(family, "");
  const std::string uniform_pattern =
      "CC"
      "C"
      "S"
      "C"
      "S";  // uniform:2:2 over 6 steps
  const Run u = run_family(family, "uniform:2:2");
  std::string want;
  for (char ch : uniform_pattern) want += std::string(passes, ch);
  EXPECT_EQ(u.report.pattern(), want);
  EXPECT_EQ(u.report.skipped(), 2 * passes);
  EXPECT_NEAR(u.report.ideal_speedup(), 1.5, 1e-12);
  EXPECT_EQ(check_skipped_calls(u), 2 * passes);
  // Steps before the first skip are the plain run's, bit for bit; the skip changes what follows.
  for (int k = 0; k <= 3; ++k)
    for (int m = 0; m < 2; ++m)
      EXPECT_TRUE(
          bit_equal(u.result.trajectory.latents[k][m], plain.result.trajectory.latents[k][m]))
          << family << " latents " << k << " modality " << m;
  EXPECT_FALSE(bit_equal(u.result.video, plain.result.video));

  // The indicators at the extremes: a threshold nothing reaches skips every call after each pass's
  // first; one everything exceeds skips none and is the plain run.
  for (const std::string policy : {"indicator:1e9", "first-block:1e9"}) {
    const Run all = run_family(family, policy);
    EXPECT_EQ(all.report.pattern(), std::string(passes, 'C') + std::string(5 * passes, 'S'))
        << policy;
    EXPECT_EQ(check_skipped_calls(all), 5 * passes) << policy;
  }
  for (const std::string policy : {"indicator:1e-12", "first-block:1e-12"}) {
    const Run none = run_family(family, policy);
    EXPECT_EQ(none.report.pattern(), std::string(6 * passes, 'C')) << policy;
    EXPECT_TRUE(bit_equal(none.result.video, plain.result.video)) << policy;
    EXPECT_TRUE(bit_equal(none.result.audio, plain.result.audio)) << policy;
    // The indicator's value at each call after the first is finite and positive.
    for (size_t k = passes; k < none.report.calls.size(); ++k)
      EXPECT_GT(none.report.calls[k].indicator, 0) << policy << " call " << k;
  }
}

// MAGI-2 packs both CFG passes into one call; H3 makes one call per pass.
TEST(StepCache, Magi2SkipsReuseTheLastComputedResidual) { check_family("magi2", 1); }
TEST(StepCache, H3SkipsReuseTheLastComputedResidualPerPass) { check_family("h3", 2); }

}  // namespace
}  // namespace avdit::sample
