// --range-report and bench h3 --range-monitor (see range_report_options.h).
#include "range_report_options.h"

#include <fmt/format.h>

#include <cstdio>

#include "bench/report.h"
#include "core/error.h"
#include "core/log.h"
#include "io/output_file.h"
#include "models/h3/config.h"
#include "ops/context.h"
#if AVDIT_HAVE_CUDA
#include "backend/cuda/context.h"
#include "backend/cuda/timer.h"
#endif

namespace avdit::app {

namespace fs = std::filesystem;
namespace ranges = analysis::ranges;

RangeReportRun::RangeReportRun(const std::string& path, const std::string& family,
                               const nlohmann::json& config, const std::vector<fs::path>& inputs,
                               const std::vector<std::pair<std::string, std::string>>& outputs) {
  if (path.empty()) return;
  AVDIT_REQUIRE(family == "h3",
                "--range-report watches MiniMax-H3's block sites; this is a {} model (MAGI-2's "
                "forward shows no qkv or gating-product point, and its layers.* points are "
                "regrouped copies)",
                family);
  AVDIT_REQUIRE(fs::path(path).extension() != ".png",
                "--range-report {}: give the JSON file; the PNG is written beside it", path);
  json_ = path;
  png_ = fs::path(path).replace_extension(".png").string();
  check_output_path(json_, "--range-report", inputs);
  check_output_path(png_, "--range-report (its PNG)", inputs);
  for (const auto& [other, option] : outputs) {
    if (other.empty()) continue;
    check_distinct_outputs(json_, "--range-report", other, option);
    check_distinct_outputs(png_, "--range-report (its PNG)", other, option);
  }
  const int64_t blocks = models::h3::H3Config::from_json(config).num_layers;
  monitor_.emplace(ranges::h3_range_sites(), blocks);
}

RangeReportRun::Attached RangeReportRun::attach(ops::Context& ctx) {
  if (monitor_) scope_.emplace(ctx.observer(), &*monitor_);
  return Attached(*this);
}

void RangeReportRun::finish(ops::Context& ctx) {
  if (!monitor_) return;
  const ranges::RangeSummary s = monitor_->summary(ctx);
  ranges::write_range_json(json_, s);
  const bool png = ranges::write_range_png(png_, s);
  if (log::level() > log::Level::Info) return;
  std::fprintf(
      stderr, "%s\nwrote range report %s%s\n", ranges::render_text(s).c_str(), json_.c_str(),
      png ? fmt::format(" and {}", png_).c_str() : " (no PNG: this build has no PNG writer)");
}

#if AVDIT_HAVE_CUDA
void bench_range_monitor(ops::CudaContext& ctx, int64_t blocks,
                         const std::function<void()>& forward, int warmup, int iters, double off_s,
                         bench::Report& rep) {
  ranges::RangeMonitor monitor(ranges::h3_range_sites(), blocks);
  bench::Timing on;
  {
    const ProbeScope scope(ctx.observer(), &monitor);
    on = cuda::time_on_stream(ctx.dev(), forward, warmup, iters);
  }
  const ranges::RangeSummary s = monitor.summary(ctx);
  fmt::print("{}\n", ranges::render_text(s));
  const bench::Timing off = cuda::time_on_stream(ctx.dev(), forward, 0, iters);
  const double on_s = on.median() / 1e3;
  rep.set("monitor on s", on_s, 3);
  rep.set("monitor cost %", off_s > 0 ? 100 * (on_s - off_s) / off_s : 0.0, 1);
  rep.set("monitor off again s", off.median() / 1e3, 3);
  rep.set("monitor coverage", fmt::format("{} of {}", s.covered, s.expected));
}
#endif

}  // namespace avdit::app
