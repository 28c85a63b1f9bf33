// The router options of `avdit generate` (latent and pipeline mode): --route-stats FILE (router
// statistics of the run, analysis/routes/recorder.h), --route-maps LAYER:HEAD:STEP,... (each row's
// choices at those points, into the same file) and --expert-mask MASK (`avdit routes mask`'s
// output applied as router bias). MAGI-2 only; everything is checked before the work.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/routes/recorder.h"
#include "core/tensor.h"

namespace avdit {
class OutputFile;
namespace ops {
class Context;
}
}  // namespace avdit

namespace avdit::app {

struct RouteCli {
  std::string stats, maps, mask;
  bool any() const { return !stats.empty() || !maps.empty() || !mask.empty(); }
};

void add_route_options(CLI::App* cmd, RouteCli& a);

// One run's router options, resolved before the work: BadInput for any of them on a model that is
// not MAGI-2 (`model` names it), --route-maps without --route-stats or unparsable, a stats path
// that is not writable, is an input or is one of `outputs` (path, option), or a mask that is not a
// mask of this config (`dit_config`: the DiT's config.json).
class RouteRun {
 public:
  RouteRun(const RouteCli& a, bool magi2, const std::string& model,
           const nlohmann::json& dit_config, const std::vector<std::filesystem::path>& inputs,
           const std::vector<std::pair<std::string, std::string>>& outputs);
  ~RouteRun();

  // Attach to the MAGI-2 run (Magi2GenerateOptions / ClipRequest): null without --route-stats.
  analysis::routes::RouteRecorder* recorder() { return recorder_.get(); }
  // LoadOptions::router_bias_add (empty without --expert-mask).
  const std::map<int64_t, Tensor>& router_bias_add() const { return bias_; }

  // After the run (ctx: the DiT's): the statistics written into an OutputFile the caller publishes
  // (null without --route-stats), and the summary line / JSON fields.
  OutputFile* write(ops::Context& ctx);
  std::string summary() const { return summary_; }
  nlohmann::json json() const;

 private:
  RouteCli a_;
  std::unique_ptr<analysis::routes::RouteRecorder> recorder_;
  std::map<int64_t, Tensor> bias_;
  std::unique_ptr<OutputFile> out_;
  std::string summary_, counts_sha_;
};

}  // namespace avdit::app
