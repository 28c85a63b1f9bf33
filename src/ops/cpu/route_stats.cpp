// route_tally on the CPU (see ops/route_stats.h): the reference the GPU's atomics must equal.
#include <algorithm>

#include "ops/route_stats.h"

namespace avdit::ops::cpu {

void route_tally(const Tensor& indices, const Tensor& gap, const Tensor& row_class, int64_t bin,
                 const std::vector<float>& edges, Tensor& counts, Tensor& gap_hist) {
  const RouteTallyDims d = route_tally_dims(indices, gap, row_class, bin, edges, counts, gap_hist);
  const int32_t* idx = indices.data<int32_t>();
  const int32_t* cls = row_class.data<int32_t>();
  const float* g = gap.defined() ? gap.f32() : nullptr;
  int64_t* n = counts.data<int64_t>();
  int64_t* hist = gap_hist.data<int64_t>();
  for (int64_t t = 0; t < d.T; ++t) {
    const int32_t c = cls[t];
    if (c < 0 || c >= d.C) continue;
    for (int64_t h = 0; h < d.H; ++h) {
      for (int64_t k = 0; k < d.K; ++k) {
        const int32_t e = idx[(t * d.H + h) * d.K + k];
        if (e >= 0 && e < d.E) ++n[((h * d.C + c) * d.B + bin) * d.E + e];
      }
      if (!g) continue;
      // The edges <= gap (a NaN compares false with each: bin 0).
      const float v = g[t * d.H + h];
      const int64_t b =
          std::partition_point(edges.begin(), edges.end(), [v](float e) { return e <= v; }) -
          edges.begin();
      ++hist[(h * d.C + c) * d.G + b];
    }
  }
}

}  // namespace avdit::ops::cpu
