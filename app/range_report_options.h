// --range-report FILE.json of `avdit generate` and `avdit forward` (MiniMax-H3): the fp16 range
// monitor (analysis/ranges/range_monitor.h) attached to the DiT's context for the run, its JSON
// and the PNG beside it (FILE.png) written at the end, the coverage line and margins on stderr.
// Also what `avdit bench h3 --range-monitor` times: the full-width forward with the monitor on.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/ranges/range_monitor.h"
#include "core/observer.h"

namespace avdit::ops {
class Context;
class CudaContext;
}  // namespace avdit::ops
namespace avdit::bench {
class Report;
}

namespace avdit::app {

inline constexpr const char* kRangeReportHelp =
    "H3: watch every block's sites (qkv, attention core, out_proj, fc1, the SwiGLU product, fc2, "
    "the residual) at every call of every step: max |x| and non-finite values, never sampled; "
    "writes this JSON and a PNG beside it (max |x| by block, fp16's 65504 drawn) and prints "
    "'covered N of N sites' and the margin to fp16 (none when a site went unseen)";

class RangeReportRun {
 public:
  // "": nothing attached. Checked before any work: the family (H3 only), both output paths (no
  // input replaced, neither the same file as one of `outputs`: (path, option) pairs, "" skipped).
  RangeReportRun(const std::string& path, const std::string& family, const nlohmann::json& config,
                 const std::vector<std::filesystem::path>& inputs,
                 const std::vector<std::pair<std::string, std::string>>& outputs);
  bool active() const { return monitor_.has_value(); }
  // Detaches the probe when it dies (declare it after the context, as StepCacheRun::Attached).
  class Attached {
   public:
    explicit Attached(RangeReportRun& run) : run_(run) {}
    ~Attached() { run_.scope_.reset(); }
    Attached(const Attached&) = delete;
    Attached& operator=(const Attached&) = delete;

   private:
    RangeReportRun& run_;
  };
  [[nodiscard]] Attached attach(ops::Context& ctx);
  // After the run: writes the JSON and the PNG, prints the summary to stderr (not with -q).
  void finish(ops::Context& ctx);

 private:
  std::string json_, png_;
  std::optional<analysis::ranges::RangeMonitor> monitor_;
  std::optional<ProbeScope> scope_;
};

#if AVDIT_HAVE_CUDA
// `avdit bench h3 --range-monitor`: times `forward` again with a monitor of `blocks` H3 blocks
// attached (warmup + iters forwards, all watched), prints its coverage line, then once more with
// nothing attached; adds the columns "monitor on s", "monitor cost %" (against off_s, the
// bench's plain median) and "monitor off again s" to the report's current row.
void bench_range_monitor(ops::CudaContext& ctx, int64_t blocks,
                         const std::function<void()>& forward, int warmup, int iters, double off_s,
                         bench::Report& rep);
#endif

}  // namespace avdit::app
