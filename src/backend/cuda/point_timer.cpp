// PointTimer (see point_timer.h).
#include "backend/cuda/point_timer.h"

#include "backend/cuda/context.h"

namespace avdit::ops {

PointTimer::~PointTimer() {
  for (auto& [p, e] : marks_) cudaEventDestroy(e);
}

void PointTimer::mark(Context& ctx, const Point& p) {
  cudaEvent_t e;
  AVDIT_CUDA_CHECK(cudaEventCreate(&e));
  AVDIT_CUDA_CHECK(cudaEventRecord(e, ctx.cuda().stream()));
  marks_.emplace_back(p, e);
}

void PointTimer::start(Context& ctx) { mark(ctx, Point{"start"}); }

void PointTimer::on(Context& ctx, const Point& p, Tensor&) { mark(ctx, p); }

std::vector<std::pair<Point, float>> PointTimer::take() {
  std::vector<std::pair<Point, float>> out;
  if (!marks_.empty()) AVDIT_CUDA_CHECK(cudaEventSynchronize(marks_.back().second));
  for (size_t i = 1; i < marks_.size(); ++i) {
    float ms = 0;
    AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[i - 1].second, marks_[i].second));
    out.emplace_back(marks_[i].first, ms);
  }
  for (auto& [p, e] : marks_) cudaEventDestroy(e);
  marks_.clear();
  return out;
}

}  // namespace avdit::ops
