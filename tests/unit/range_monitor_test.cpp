// The fp16 range monitor (analysis/ranges/range_monitor.h) on the tiny H3 golden model: every site
// of every block of every call seen (covered == expected == blocks x 7 x calls) and each recorded
// max |x| equal to one computed independently by a second probe at the same points; a step cache
// that skips calls leaves their sites unseen and no margin is stated; a NaN planted in one row of
// one site is reported at that (step, call, block, site, row); and the seed's failure mode (every
// fifth block watched, reported as coverage) is refused.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>

#include "analysis/ranges/range_monitor.h"
#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "models/stack_points.h"
#include "ops/context.h"
#include "pipeline/generate_h3.h"
#include "pipeline/latent_shape.h"
#include "sample/sampler_loop.h"
#include "sample/step_cache.h"
#include "score/plot.h"

namespace avdit::analysis::ranges {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";
constexpr int64_t kBlocks = 3, kSites = 7;

// (global call, block, site) -> max |x| over the finite values, from the host copy in float64.
using Key = std::tuple<int64_t, int64_t, std::string>;

// Follows step.input and stack.input as the monitor does; `site` is called for each site point.
class CallTracker : public Probe {
 public:
  bool wants(const Point& p) const override {
    if (p.is(sample::kInputPoint)) return p.part <= 0;
    if (p.is(models::kStackInput)) return true;
    for (const RangeSite& s : sites_)
      if (p.is(s.point)) return true;
    return false;
  }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    if (p.is(sample::kInputPoint)) {
      step_ = p.index, in_step_ = -1;
    } else if (p.is(models::kStackInput)) {
      ++call_, ++in_step_;
    } else {
      for (const RangeSite& s : sites_)
        if (p.is(s.point)) site(ctx, p.index, s.name, t);
    }
  }

 protected:
  virtual void site(ops::Context& ctx, int64_t block, const std::string& name, Tensor& t) = 0;
  int64_t step_ = -1, in_step_ = -1, call_ = -1;

 private:
  std::vector<RangeSite> sites_ = h3_range_sites();
};

class MaxRecorder final : public CallTracker {
 public:
  std::map<Key, double> max;

 private:
  void site(ops::Context& ctx, int64_t block, const std::string& name, Tensor& t) override {
    const Tensor v = ctx.download(t).to(DType::F64);
    double m = 0;
    for (int64_t i = 0; i < v.numel(); ++i)
      if (std::isfinite(v.data<double>()[i])) m = std::max(m, std::fabs(v.data<double>()[i]));
    max[{call_, block, name}] = m;
  }
};

// Writes a NaN into row `row` of one site's tensor at (step, call in step, block), in place (the
// point's tensor shares the forward's storage on the CPU), before the monitor sees it.
class NanPlanter final : public CallTracker {
 public:
  NanPlanter(int64_t step, int64_t call, int64_t block, std::string site, int64_t row)
      : at_step_(step), at_call_(call), at_block_(block), at_site_(std::move(site)), row_(row) {}
  bool planted = false;

 private:
  void site(ops::Context&, int64_t block, const std::string& name, Tensor& t) override {
    if (step_ != at_step_ || in_step_ != at_call_ || block != at_block_ || name != at_site_) return;
    ASSERT_EQ(t.dtype(), DType::F32);
    t.f32()[row_ * (t.numel() / t.size(0)) + 3] = std::numeric_limits<float>::quiet_NaN();
    planted = true;
  }
  int64_t at_step_, at_call_, at_block_;
  std::string at_site_;
  int64_t row_;
};

Tensor text(int64_t rows, uint64_t seed) {
  Tensor t = Tensor::empty({rows, 64}, DType::F32);
  fill_normal(t, seed, 99);
  return t;
}

// `steps` steps of the golden tiny H3 with CFG (two calls per step), the probes attached in order.
void run_h3(ops::Context& ctx, int steps, const std::vector<Probe*>& probes) {
  const Checkpoint ckpt = Checkpoint::open(kGolden);
  std::vector<std::unique_ptr<ProbeScope>> scopes;
  for (Probe* p : probes) scopes.push_back(std::make_unique<ProbeScope>(ctx.observer(), p));
  pipeline::H3GenerateOptions o;
  o.text = {text(5, 1), "test:text_embeds"};
  o.negative = {text(4, 2), "test:negative"};
  o.video_guidance = o.audio_guidance = 3.0f;
  pipeline::RunOptions run;
  run.steps = steps;
  run.seed = 5;
  const auto s = pipeline::latent_shapes_from_string("h3", *ckpt.config(), "2,2,4,6");
  run.video_shape = s.video;
  run.audio_shape = s.audio;
  o.run = run;
  const models::h3::H3Model model(ctx, ckpt);
  pipeline::generate_h3(model, o);
}

TEST(RangeMonitor, SeesEverySiteOfEveryCallAndRecordsItsMax) {
  ops::CpuContext ctx;
  RangeMonitor monitor(h3_range_sites(), kBlocks);
  MaxRecorder rec;
  run_h3(ctx, 2, {&monitor, &rec});
  const RangeSummary s = monitor.summary(ctx);
  EXPECT_EQ(s.calls, 4);
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.expected, kBlocks * kSites * 4);
  EXPECT_EQ(s.covered, s.expected);
  EXPECT_TRUE(s.full());
  EXPECT_FALSE(s.first_missing);
  EXPECT_FALSE(s.first_nonfinite);
  EXPECT_EQ(s.nonfinite, 0);
  ASSERT_EQ(rec.max.size(), static_cast<size_t>(s.expected));
  ASSERT_EQ(s.per_call.size(), 4u);
  double overall = 0;
  for (int64_t c = 0; c < 4; ++c) {
    EXPECT_EQ(s.per_call[c].step, c / 2);
    EXPECT_EQ(s.per_call[c].call, c % 2);
    for (int64_t b = 0; b < kBlocks; ++b)
      for (int64_t i = 0; i < kSites; ++i) {
        const double want = rec.max.at({c, b, s.sites[i].site});
        EXPECT_EQ(s.per_call[c].max_abs[b * kSites + i], want)
            << "call " << c << " block " << b << " " << s.sites[i].site;
        overall = std::max(overall, want);
      }
  }
  for (const SiteRange& r : s.sites) {
    EXPECT_EQ(r.seen, kBlocks * 4) << r.site;
    double want = 0;
    for (const auto& [key, v] : rec.max)
      if (std::get<2>(key) == r.site) want = std::max(want, v);
    EXPECT_EQ(r.max_abs, want) << r.site;
    EXPECT_EQ(rec.max.at({r.max_at.step * 2 + r.max_at.call, r.max_at.block, r.site}), want);
    ASSERT_TRUE(s.margin(r));
    EXPECT_DOUBLE_EQ(*s.margin(r), kF16Max / want);
  }
  EXPECT_EQ(s.max_abs, overall);
  ASSERT_TRUE(s.margin());
  EXPECT_DOUBLE_EQ(*s.margin(), kF16Max / overall);
  EXPECT_TRUE(s.margin_refusal().empty());

  const std::string text = render_text(s);
  EXPECT_NE(text.find("covered 84 of 84 sites (3 blocks x 7 sites x 4 calls over 2 steps)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("margin to fp16's 65504"), std::string::npos) << text;
  EXPECT_EQ(text.find("not stated"), std::string::npos) << text;

  const fs::path dir = fs::temp_directory_path() / fmt::format("avdit_range_{}", ::getpid());
  fs::create_directories(dir);
  write_range_json((dir / "r.json").string(), s);
  const nlohmann::json j = read_json(dir / "r.json");
  EXPECT_EQ(j["covered"], 84);
  EXPECT_EQ(j["expected"], 84);
  EXPECT_EQ(j["coverage"], "covered 84 of 84 sites");
  EXPECT_DOUBLE_EQ(j["margin"].get<double>(), kF16Max / overall);
  EXPECT_TRUE(j["first_nonfinite"].is_null());
  EXPECT_EQ(j["per_call"].size(), 4u);
  EXPECT_EQ(j["sites"][0]["max_abs_by_block"].size(), static_cast<size_t>(kBlocks));
  EXPECT_EQ(write_range_png((dir / "r.png").string(), s), score::can_write_png());
  if (score::can_write_png()) {
    EXPECT_GT(fs::file_size(dir / "r.png"), 1000u);
  }
  fs::remove_all(dir);
}

// A lone forward (no sampler: step -1) is one call.
TEST(RangeMonitor, ALoneForwardIsOneCall) {
  ops::CpuContext ctx;
  const Checkpoint ckpt = Checkpoint::open(kGolden);
  const models::h3::H3Model model(ctx, ckpt);
  RangeMonitor monitor(h3_range_sites(), kBlocks);
  {
    const ProbeScope scope(ctx.observer(), &monitor);
    models::h3::forward_from_inputs(model, read_all(kGolden / "inputs.safetensors"), false);
  }
  const RangeSummary s = monitor.summary(ctx);
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.covered, kBlocks * kSites);
  EXPECT_TRUE(s.full());
  EXPECT_EQ(s.max_at.step, -1);
  EXPECT_NE(render_text(s).find("covered 21 of 21 sites (3 blocks x 7 sites x 1 call)"),
            std::string::npos)
      << render_text(s);
}

// Skipped calls show no block points: their sites are counted as not seen and no margin is given.
TEST(RangeMonitor, StepCacheSkipsLeaveSitesUnseenAndNoMargin) {
  ops::CpuContext ctx;
  sample::StepCache cache(sample::parse_step_cache("uniform:2:1"));
  RangeMonitor monitor(h3_range_sites(), kBlocks);
  run_h3(ctx, 4, {&cache, &monitor});
  const RangeSummary s = monitor.summary(ctx);
  const int skipped = cache.report().skipped();
  ASSERT_GT(skipped, 0);
  EXPECT_EQ(s.calls, 8);
  EXPECT_EQ(s.expected, kBlocks * kSites * 8);
  EXPECT_EQ(s.covered, s.expected - skipped * kBlocks * kSites);
  EXPECT_FALSE(s.full());
  EXPECT_FALSE(s.margin());
  for (const SiteRange& r : s.sites) EXPECT_FALSE(s.margin(r)) << r.site;
  const std::string refusal = fmt::format("{} sites not seen", skipped * kBlocks * kSites);
  EXPECT_EQ(s.margin_refusal(), refusal);
  const sample::CacheCall* first = nullptr;
  for (const sample::CacheCall& c : cache.report().calls)
    if (c.skipped && !first) first = &c;
  ASSERT_TRUE(first);
  ASSERT_TRUE(s.first_missing);
  EXPECT_EQ(s.first_missing->step, first->step);
  EXPECT_EQ(s.first_missing->call, first->pass);
  EXPECT_EQ(s.first_missing->block, 0);
  EXPECT_EQ(s.first_missing->site, "qkv");
  const std::string text = render_text(s);
  EXPECT_NE(text.find(fmt::format("covered {} of {} sites", s.covered, s.expected)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("margin not stated: " + refusal), std::string::npos) << text;
  EXPECT_EQ(text.find("margin to fp16"), std::string::npos) << text;
  const nlohmann::json j = to_json(s);
  EXPECT_TRUE(j["margin"].is_null());
  EXPECT_EQ(j["margin_refused"], refusal);
}

RangeSummary planted_run(NanPlanter& planter) {
  ops::CpuContext ctx;
  RangeMonitor monitor(h3_range_sites(), kBlocks);
  try {
    run_h3(ctx, 2, {&planter, &monitor});
  } catch (const RuntimeFailure&) {  // the sampler's non-finite guard
  }
  EXPECT_TRUE(planter.planted);
  return monitor.summary(ctx);
}

// The first non-finite value is reported where the run first computed one, with its row; the NaN
// spreads to later sites (and the sampler's guard may stop the run), but the first stays first.
TEST(RangeMonitor, ReportsTheFirstNonFiniteWithItsRow) {
  NanPlanter planter(1, 1, 1, "mlp_up", 5);
  const RangeSummary s = planted_run(planter);
  EXPECT_EQ(s.calls, 4);
  ASSERT_TRUE(s.first_nonfinite);
  EXPECT_EQ(s.first_nonfinite->step, 1);
  EXPECT_EQ(s.first_nonfinite->call, 1);
  EXPECT_EQ(s.first_nonfinite->block, 1);
  EXPECT_EQ(s.first_nonfinite->site, "mlp_up");
  EXPECT_EQ(s.first_nonfinite->row, 5);
  EXPECT_GE(s.nonfinite, 1);
  EXPECT_FALSE(s.margin());
  EXPECT_EQ(s.margin_refusal(), fmt::format("{} non-finite values", s.nonfinite));
  const std::string text = render_text(s);
  EXPECT_NE(text.find("first non-finite value: step 1, call 1, block 1, mlp_up, row 5"),
            std::string::npos)
      << text;
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["first_nonfinite"]["row"], 5);
  EXPECT_EQ(j["first_nonfinite"]["site"], "mlp_up");
}

// The qkv site is [S, heads, 3, dh]: the row reported is the token's, not a (token, head) pair's.
TEST(RangeMonitor, AFourDimensionalSiteReportsTheTokenRow) {
  NanPlanter planter(0, 0, 2, "qkv", 7);
  const RangeSummary s = planted_run(planter);
  ASSERT_TRUE(s.first_nonfinite);
  EXPECT_EQ(s.first_nonfinite->str(), "step 0, call 0, block 2, qkv, row 7");
}

// The seed's failure: a sample of the blocks (every fifth of 50) taken for the whole. The monitor
// counts what it saw and refuses a margin; with every block seen, block 49's max is found.
TEST(RangeMonitor, EveryFifthBlockIsNotCoverage) {
  ops::CpuContext ctx;
  const std::vector<RangeSite> sites = h3_range_sites();
  auto emit_call = [&](RangeMonitor& m, int64_t stride) {
    const ProbeScope scope(ctx.observer(), &m);
    Tensor x = Tensor::zeros({4, 8}, DType::F32);
    ops::observe(ctx, {models::kStackInput}, x);
    for (int64_t b = 0; b < 50; b += stride)
      for (const RangeSite& s : sites) {
        Tensor f = Tensor::zeros({4, 8}, DType::F32);
        f.f32()[9] = b == 49 && s.name == "mlp_out" ? -14000.f : static_cast<float>(b + 1);
        Tensor t = f.to(DType::F16);
        ops::observe(ctx, {s.point, b}, t);
      }
  };
  RangeMonitor sampled(sites, 50);
  emit_call(sampled, 5);
  const RangeSummary a = sampled.summary(ctx);
  EXPECT_EQ(a.covered, 70);
  EXPECT_EQ(a.expected, 350);
  EXPECT_FALSE(a.margin());
  EXPECT_NE(render_text(a).find("margin not stated: 280 sites not seen"), std::string::npos)
      << render_text(a);
  EXPECT_EQ(a.first_missing->block, 1);

  RangeMonitor all(sites, 50);
  emit_call(all, 1);
  const RangeSummary b = all.summary(ctx);
  EXPECT_TRUE(b.full());
  EXPECT_EQ(b.max_abs, 14000.0);
  EXPECT_EQ(b.max_at.block, 49);
  EXPECT_EQ(b.max_at.site, "mlp_out");
  ASSERT_TRUE(b.margin());
  EXPECT_NEAR(*b.margin(), 65504.0 / 14000.0, 1e-12);
  EXPECT_NE(render_text(b).find("covered 350 of 350 sites"), std::string::npos);
  EXPECT_NE(render_text(b).find("margin to fp16's 65504: 4.68x"), std::string::npos)
      << render_text(b);
}

// Points of blocks the monitor was not told of, or before any call, are bugs: named, not dropped.
TEST(RangeMonitor, RefusesABlockOutsideTheModel) {
  ops::CpuContext ctx;
  RangeMonitor m(h3_range_sites(), 2);
  const ProbeScope scope(ctx.observer(), &m);
  Tensor t = Tensor::zeros({2, 2}, DType::F32);
  EXPECT_THROW(ops::observe(ctx, {"block{}_qkv", 0}, t), RuntimeFailure);
  ops::observe(ctx, {models::kStackInput}, t);
  EXPECT_THROW(ops::observe(ctx, {"block{}_qkv", 2}, t), RuntimeFailure);
}

}  // namespace
}  // namespace avdit::analysis::ranges
