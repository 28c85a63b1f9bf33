// RouteRecorder: the probe behind `avdit generate --route-stats`. It attaches to the MAGI-2
// forward's router points (moe.{i}.router: each row's top-K experts; moe.{i}.router.gap: the gap
// between the K-th and the (K+1)-th biased score) and the sampler's step.input (which step is
// running), and adds each MoE layer's choices to integer tallies on the model's context with
// ops::route_tally - no host synchronisation per layer; the tallies come back once, in finish().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/routes/route_stats.h"
#include "core/observer.h"
#include "models/magi2/config.h"
#include "models/magi2/packing.h"

namespace avdit::analysis::routes {

struct RouteMapPoint {
  int64_t layer = 0, head = 0, step = 0;  // block index, head, 0-based step
};

// "LAYER:HEAD:STEP,..." (the --route-maps option) -> points; BadInput naming the option and the
// item that is not three non-negative integers.
std::vector<RouteMapPoint> parse_route_maps(const std::string& spec);

// The class (modality * 2 + pass) of each row in the model's modality-sorted order (the order of
// the moe.* points, models/magi2/token_layout.h) for a packed layout: time tokens count as text;
// item 0 is the conditional pass, later items the unconditional one.
std::vector<int32_t> row_classes(const models::magi2::PackedSequence& layout);

class RouteRecorder final : public Probe {
 public:
  explicit RouteRecorder(std::vector<RouteMapPoint> maps = {}) : map_points_(std::move(maps)) {}

  // Before the sampling loop: the model's config, the packed layout every forward of the loop uses
  // and the number of steps. Allocates the tallies on ctx and uploads the row classes (once).
  // BadInput when a map point is not a MoE layer, head or step of this run.
  void begin(ops::Context& ctx, const models::magi2::Magi2Config& config,
             const models::magi2::PackedSequence& layout, int steps);

  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;

  // After the loop: the tallies on the host (one download), checked: every layer counted rows x
  // heads x top_k selections (RuntimeFailure if a forward's router point was missed).
  RouteStats finish(ops::Context& ctx);

 private:
  int64_t ordinal(int64_t layer) const;  // MoE ordinal of a block index, -1 if not MoE

  std::vector<RouteMapPoint> map_points_;
  RouteShape shape_;
  int steps_ = 0, step_ = 0;
  std::vector<int64_t> class_rows_;  // rows of each class in one forward
  std::vector<int64_t> rows_;        // [class][bin], summed over forwards
  Tensor row_class_;                 // I32 [rows] on the context
  Tensor row_class_host_;
  std::array<int64_t, 3> video_grid_{};
  Tensor counts_, gap_hist_;  // I64 [L, H, 6, 10, E], [L, H, 6, kGapBins] on the context
  Tensor pending_gap_;        // the gap of the layer whose router point comes next
  int64_t pending_gap_layer_ = -1;
  std::vector<RouteMap> maps_;
  bool begun_ = false;
};

}  // namespace avdit::analysis::routes
