// The shape checks both backends of route_tally share (see ops/route_stats.h).
#include "ops/route_stats.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace avdit::ops {

RouteTallyDims route_tally_dims(const Tensor& indices, const Tensor& gap, const Tensor& row_class,
                                int64_t bin, const std::vector<float>& edges, const Tensor& counts,
                                const Tensor& gap_hist) {
  RouteTallyDims d;
  AVDIT_CHECK(indices.ndim() == 3 && indices.dtype() == DType::I32,
              "route_tally: indices {} {} (expected I32 [T, H, K])", dtype_name(indices.dtype()),
              indices.shape_str());
  d.T = indices.size(0);
  d.H = indices.size(1);
  d.K = indices.size(2);
  AVDIT_CHECK(row_class.dtype() == DType::I32 && row_class.numel() == d.T,
              "route_tally: row_class {} {} for {} rows", dtype_name(row_class.dtype()),
              row_class.shape_str(), d.T);
  AVDIT_CHECK(counts.ndim() == 4 && counts.dtype() == DType::I64 && counts.size(0) == d.H,
              "route_tally: counts {} {} (expected I64 [{}, C, B, E])", dtype_name(counts.dtype()),
              counts.shape_str(), d.H);
  d.C = counts.size(1);
  d.B = counts.size(2);
  d.E = counts.size(3);
  AVDIT_CHECK(0 <= bin && bin < d.B, "route_tally: bin {} of {}", bin, d.B);
  d.G = static_cast<int64_t>(edges.size()) + 1;
  AVDIT_CHECK(edges.size() <= static_cast<size_t>(kMaxGapEdges) &&
                  std::is_sorted(edges.begin(), edges.end()) &&
                  std::all_of(edges.begin(), edges.end(), [](float e) { return std::isfinite(e); }),
              "route_tally: {} gap edges (at most {}, finite, ascending)", edges.size(),
              kMaxGapEdges);
  AVDIT_CHECK(gap_hist.dtype() == DType::I64 && gap_hist.ndim() == 3 && gap_hist.size(0) == d.H &&
                  gap_hist.size(1) == d.C && gap_hist.size(2) == d.G,
              "route_tally: gap_hist {} {} (expected I64 [{}, {}, {}])",
              dtype_name(gap_hist.dtype()), gap_hist.shape_str(), d.H, d.C, d.G);
  AVDIT_CHECK(!gap.defined() || (gap.dtype() == DType::F32 && gap.numel() == d.T * d.H),
              "route_tally: gap {} {} for [{}, {}]", dtype_name(gap.dtype()), gap.shape_str(), d.T,
              d.H);
  return d;
}

}  // namespace avdit::ops
