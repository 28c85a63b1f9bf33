// The CUDA execution context: one device and its stream, the GEMM planner, the timed choices a
// benchmark may opt into (GEMM algorithms, attention segment plans), and the capture state of CUDA
// graphs. Ops enqueue on stream() and never synchronise unless they hand memory to the host.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/gemm.h"
#include "ops/attention.h"
#include "ops/context.h"

namespace avdit::ops {

class CudaContext final : public Context {
 public:
  // Uses `dev` (which must outlive the context); the second form owns a Device of that ordinal.
  explicit CudaContext(::avdit::cuda::Device& dev);
  explicit CudaContext(int ordinal = 0);
  ~CudaContext() override;

  ::avdit::cuda::Device& dev() { return *dev_; }
  cudaStream_t stream() const { return dev_->stream(); }
  ::avdit::cuda::GemmPlanner& gemm() { return gemm_; }

  Tensor empty(Shape shape, DType dtype) override;
  Tensor zeros(Shape shape, DType dtype) override;
  Tensor upload(const Tensor& host) override;
  Tensor download(const Tensor& t) override;
  void synchronize() override;

  // Choices made by timing (off by default: the bits of a run must not depend on a timing).
  // gemm_candidates > 0: GemmPlanner::set_timed_choice; segments: plan_segments times Split and
  // Ragged once per document layout and keeps the faster.
  void set_timed_choices(int gemm_candidates, bool segments);
  bool timed_segments() const { return timed_segments_; }
  // What plan_segments chose per document layout (cu_seqlens): cached and reported by benchmarks.
  struct SegmentTiming {
    int64_t rows = 0;
    SegmentPlan plan = SegmentPlan::Split;
    float ms = 0;
  };
  std::map<std::vector<int64_t>, SegmentPlan>& segment_choices() { return segment_choices_; }
  // Every plan_segments on this context returns this plan instead of Split or a timed choice
  // (benchmarks comparing the attention paths inside a whole forward or step); nullopt: the default.
  void set_segment_plan(std::optional<SegmentPlan> p) { forced_plan_ = p; }
  std::optional<SegmentPlan> segment_plan() const { return forced_plan_; }
  std::vector<SegmentTiming>& segment_timings() { return segment_timings_; }

  // The device's memory pool (every tensor of this backend).
  int64_t pool_in_use() const override;
  int64_t pool_peak() const override;
  void reset_pool_peak() override;

  // Replays from a CUDA graph (see Context::run_fixed): the first run of a key enqueues the ops
  // (kernels load, GEMM and cuDNN plans are built), the second captures them, later runs launch the
  // graph. When probes come or go the next run is eager again, and while one of them wants a point
  // inside the body every run is. A capture that fails turns graphs off for this context (said
  // once) and the body runs eagerly.
  void run_fixed(uint64_t key, const std::function<void()>& body) override;
  void forget_fixed() override;
  void set_graphs(bool on) { graphs_ = on; }
  struct GraphStats {
    int64_t captures = 0, replays = 0;
    size_t nodes = 0;  // kernels, copies and memsets of the last graph captured
  };
  const GraphStats& graph_stats() const { return graph_stats_; }

  // While a CUDA graph is being captured on the stream: no synchronisation, no timing.
  bool capturing() const { return capturing_; }
  void set_capturing(bool on);

 private:
  std::unique_ptr<::avdit::cuda::Device> owned_;
  ::avdit::cuda::Device* dev_;
  ::avdit::cuda::GemmPlanner gemm_;
  bool timed_segments_ = false, capturing_ = false, graphs_ = true;
  struct Fixed {
    uint64_t observer_version = ~uint64_t{0};  // the probes the last eager run was checked with
    bool observed = false;  // a probe wants a point inside the body: it runs eagerly every time
    cudaGraphExec_t exec = nullptr;
  };
  std::map<uint64_t, Fixed> fixed_;
  GraphStats graph_stats_;
  std::map<std::vector<int64_t>, SegmentPlan> segment_choices_;
  std::vector<SegmentTiming> segment_timings_;
  std::optional<SegmentPlan> forced_plan_;
};

}  // namespace avdit::ops
