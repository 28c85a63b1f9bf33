// Windowed attention over a list of (query range, key range) rows, as MagiAttention's
// flex_flash_attn_func takes them (the MAGI-2 refiner's window: every video block sees its
// neighbouring blocks and the tail): each query attends, with one softmax, to the union of the key
// ranges of every row whose query range holds it; GQA; an optional per-head sigmoid gate. No dense
// mask is ever built: the plan keeps, per query segment, its key ranges sorted and joined.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/dispatch.h"

namespace avdit::ops {

struct Range {
  int64_t begin = 0, end = 0;  // half-open
  int64_t size() const { return end - begin; }
  // Spelled out: the .cu files that include this header are C++17.
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
};
struct RangePair {
  Range q, k;
  bool operator==(const RangePair& o) const { return q == o.q && k == o.k; }
};

// MagiAttention's auto_range_merge view of a row list: the rows stably sorted by query start, and
// the groups of consecutive rows with the same query range (group u = sorted[offsets[u],
// offsets[u+1]), its query range q[u]). It changes scheduling, not results.
struct MergedRanges {
  std::vector<Range> q;
  std::vector<RangePair> sorted;
  std::vector<int64_t> offsets;
};
MergedRanges merge_ranges(const std::vector<RangePair>& rows);

// What the op runs: the query axis cut at every query-range boundary into segments; each segment
// that some row covers, with the key ranges of those rows sorted by start and touching ranges
// joined (segment s: keys[offsets[s], offsets[s+1])). Built once per layout (the refiner's
// sampler keeps it across steps); on a CUDA context `table` also holds it on the device.
struct WindowPlan {
  int64_t q_rows = 0, k_rows = 0;  // the sequence lengths the rows index
  std::vector<Range> segments;
  std::vector<int64_t> offsets;
  std::vector<Range> keys;
  int64_t max_segment = 0;  // the longest query segment
  int64_t max_keys = 0;     // the most keys one segment attends to
  int64_t pairs = 0;        // attended (query, key) pairs: sum over segments of |q| x |keys|
  int64_t tiles = 0;  // kWindowTileRows-query tiles of the segments (a segment's last is short)
  Tensor table;       // CUDA: I32 [segments | offsets | keys | tiles] (see ops/cuda)
};
// Queries per block of the tensor-core kernel (ops/cuda/sm90): the plan lists its tiles, each
// (segment, first query).
inline constexpr int64_t kWindowTileRows = 128;

// rows: the reference's (q range, k range) list over q_rows queries and k_rows keys. BadInput
// (exit 2) on a range outside [0, rows) or reversed, and on a (query, key) pair that two rows
// cover: MagiAttention would count such a pair twice, which this op does not take.
WindowPlan plan_window(Context& ctx, const std::vector<RangePair>& rows, int64_t q_rows,
                       int64_t k_rows);

namespace cpu {
void windowed_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                        const WindowPlan& plan, const Tensor* gate, Tensor& out, Tensor* lse);
}
namespace cuda {
void windowed_attention(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v,
                        float scale, const WindowPlan& plan, const Tensor* gate, Tensor& out,
                        Tensor* lse);
}

// out[s, h] = sum_j p_j v[j, h / (Hq / Hkv)] over the keys j of s's segment, p = softmax(scale
// q.k), times sigmoid(gate[s, h]) when a gate is given (gate [S, Hq], rounded to out's dtype before
// the product where out is not F32, as ops::attention); a query no row covers gets 0. q [S, Hq, D],
// k, v [Sk, Hkv, D] (any float dtype); out [S, Hq, D] preallocated; lse (optional) F32 [S, Hq]:
// the log-sum-exp of the scaled logits (-inf for an uncovered query).
void windowed_attention_into(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                             float scale, const WindowPlan& plan, const Tensor* gate, Tensor& out,
                             Tensor* lse = nullptr);
inline Tensor windowed_attention(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                                 float scale, const WindowPlan& plan, const Tensor* gate = nullptr,
                                 DType out_dtype = DType::F32, Tensor* lse = nullptr) {
  Tensor o = ctx.empty(q.shape(), out_dtype);
  windowed_attention_into(ctx, q, k, v, scale, plan, gate, o, lse);
  return o;
}

// Shape checks both backends make (BadInput naming the tensor and the plan's sizes).
void check_windowed_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              const WindowPlan& plan, const Tensor* gate, const Tensor& out,
                              const Tensor* lse);

}  // namespace avdit::ops
