// Router statistics as an op: one MoE layer's top-K choices, and the gap between the K-th and the
// (K+1)-th biased score, added to integer tallies that stay on the context, split by a class per
// row (modality x pass) and a step bin. Integer additions commute, so the GPU's atomics give the
// CPU's counts exactly, and nothing goes back to the host per layer (analysis/routes/recorder.h
// reads the tallies once per run).
#pragma once

#include <vector>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void route_tally(const Tensor& indices, const Tensor& gap, const Tensor& row_class, int64_t bin,
                 const std::vector<float>& gap_edges, Tensor& counts, Tensor& gap_hist);
}
namespace cuda {
void route_tally(CudaContext& c, const Tensor& indices, const Tensor& gap, const Tensor& row_class,
                 int64_t bin, const std::vector<float>& gap_edges, Tensor& counts,
                 Tensor& gap_hist);
}

// The most gap edges an op call takes (a kernel argument on the GPU).
inline constexpr int kMaxGapEdges = 128;

// indices I32 [T, H, K] (the router's choices), gap F32 [T, H] or undefined, row_class I32 [T]
// (each row's class in [0, C); rows of another value are skipped), bin in [0, B), gap_edges
// ascending (G - 1 of them). Adds, for every row t and head h:
//   counts   I64 [H, C, B, E]: 1 at (h, class, bin, indices[t, h, k]) for each k (indices outside
//            [0, E) are skipped: a caller that knows the total checks it);
//   gap_hist I64 [H, C, G]: 1 at (h, class, g), g = how many edges are <= gap[t, h] (NaN: 0).
inline void route_tally(Context& ctx, const Tensor& indices, const Tensor& gap,
                        const Tensor& row_class, int64_t bin, const std::vector<float>& gap_edges,
                        Tensor& counts, Tensor& gap_hist) {
  AVDIT_OP(ctx, route_tally, indices, gap, row_class, bin, gap_edges, counts, gap_hist);
}

// Shapes the op is called with, checked once by both backends: T, H, K, C, B, E, G.
struct RouteTallyDims {
  int64_t T = 0, H = 0, K = 0, C = 0, B = 0, E = 0, G = 0;
};
RouteTallyDims route_tally_dims(const Tensor& indices, const Tensor& gap, const Tensor& row_class,
                                int64_t bin, const std::vector<float>& gap_edges,
                                const Tensor& counts, const Tensor& gap_hist);

}  // namespace avdit::ops
