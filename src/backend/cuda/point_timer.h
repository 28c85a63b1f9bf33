// A probe that times the stretches between named points on the GPU: it records a CUDA event on the
// context's stream at every point it wants, so the time from one point to the next is the GPU time
// of the work enqueued between them (benchmarks' per-stage splits). Synchronises only in take().
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/observer.h"

namespace avdit::ops {

class PointTimer final : public Probe {
 public:
  // `select` picks the points to time (e.g. the points of one block).
  explicit PointTimer(std::function<bool(const Point&)> select) : select_(std::move(select)) {}
  ~PointTimer() override;
  PointTimer(const PointTimer&) = delete;
  PointTimer& operator=(const PointTimer&) = delete;

  // Records the start mark now (call before the timed work).
  void start(Context& ctx);
  bool wants(const Point& p) const override { return select_(p); }
  void on(Context& ctx, const Point& p, Tensor& t) override;

  // (point, ms from the previous mark to this one) in order; waits for the last event. Clears.
  std::vector<std::pair<Point, float>> take();

 private:
  void mark(Context& ctx, const Point& p);
  std::function<bool(const Point&)> select_;
  std::vector<std::pair<Point, cudaEvent_t>> marks_;
};

}  // namespace avdit::ops
