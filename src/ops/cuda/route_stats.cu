// route_tally on the GPU (see ops/route_stats.h): one thread per (row, head) adds its K choices and
// its gap bin with 64-bit integer atomics. Integer additions commute, so the tallies equal the
// CPU's bit for bit in any order; the op enqueues only (no host synchronisation). Contention: a
// hot expert takes one atomic per row that chose it, a few thousand per layer - microseconds.
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/route_stats.h"

namespace avdit::cuda {
namespace {

struct GapEdges {
  float v[avdit::ops::kMaxGapEdges];
  int n;
};

__global__ void route_tally_kernel(const int* idx, const float* gap, const int* cls, int64_t T,
                                   int H, int K, int C, int B, int E, int bin, GapEdges edges,
                                   unsigned long long* counts, unsigned long long* hist) {
  const int64_t n = T * H;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t t = i / H;
    const int h = static_cast<int>(i % H);
    const int c = cls[t];
    if (c < 0 || c >= C) continue;
    const int64_t base = ((int64_t(h) * C + c) * B + bin) * E;
    for (int k = 0; k < K; ++k) {
      const int e = idx[i * K + k];
      if (e >= 0 && e < E) atomicAdd(counts + base + e, 1ull);
    }
    if (!gap) continue;
    // The edges <= gap, as the CPU's partition_point (a NaN compares false: bin 0).
    const float v = gap[i];
    int b = 0;
    for (int j = 0; j < edges.n; ++j) b += edges.v[j] <= v ? 1 : 0;
    atomicAdd(hist + (int64_t(h) * C + c) * (edges.n + 1) + b, 1ull);
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void route_tally(CudaContext& c, const Tensor& indices, const Tensor& gap, const Tensor& row_class,
                 int64_t bin, const std::vector<float>& edges, Tensor& counts, Tensor& gap_hist) {
  const RouteTallyDims d = route_tally_dims(indices, gap, row_class, bin, edges, counts, gap_hist);
  c.require_here(indices, "route_tally indices");
  c.require_here(row_class, "route_tally row_class");
  c.require_here(counts, "route_tally counts");
  c.require_here(gap_hist, "route_tally gap_hist");
  if (gap.defined()) c.require_here(gap, "route_tally gap");
  if (d.T == 0 || d.H == 0) return;
  GapEdges e{};
  e.n = static_cast<int>(edges.size());
  for (int j = 0; j < e.n; ++j) e.v[j] = edges[static_cast<size_t>(j)];
  route_tally_kernel<<<grid_for(d.T * d.H), kThreads, 0, c.stream()>>>(
      static_cast<const int*>(indices.raw()),
      gap.defined() ? static_cast<const float*>(gap.raw()) : nullptr,
      static_cast<const int*>(row_class.raw()), d.T, static_cast<int>(d.H), static_cast<int>(d.K),
      static_cast<int>(d.C), static_cast<int>(d.B), static_cast<int>(d.E), static_cast<int>(bin), e,
      static_cast<unsigned long long*>(device_ptr(counts)),
      static_cast<unsigned long long*>(device_ptr(gap_hist)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
