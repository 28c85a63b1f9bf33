// The attention sparsity probe: for a (step, block, head), how much of each video query's softmax
// mass the top-k keys hold (can ANY k-key scheme work?) and how much a fixed structured pattern
// holds (does THIS scheme work?), from the exact scores in two passes (the log-sum-exp, then the
// masses). The pattern "frame+nonvideo": a video query keeps the keys of its own frame and every
// non-video key of its document; k = that count ("auto") unless given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace avdit::ops {
class Context;
}

namespace avdit::analysis {

// The rows of one attention document [begin, end) of a packed sequence: frame[r] >= 0 for a video
// row (rows of one frame share the id), -1 for text, audio and every other non-video row.
struct SparsityLayout {
  int64_t begin = 0, end = 0;
  std::vector<int64_t> frame;  // per row of the whole sequence
  // Per frame id: the pattern's key count of its queries (frame rows + non-video rows).
  std::vector<int64_t> pattern_keys;
  int64_t video_rows() const;
  static SparsityLayout make(std::vector<int64_t> frame, int64_t begin, int64_t end);
};

struct HeadMass {
  int64_t queries = 0;                // video queries measured
  int64_t k = 0;                      // top-k of the first query (all equal when frames are equal)
  double topk_median = 0;             // median over queries of the top-k keys' mass
  double pattern_median = 0;          // median over queries of the pattern's mass
  std::vector<double> topk, pattern;  // per measured query
};

// One head of q, k: [S, heads, D] on ctx (any float dtype), scores scale * q.k through
// ops::attention_mass (float64 on the CPU). Queries: every `query_stride`-th video row of the
// document. fixed_k > 0 replaces the pattern's key count.
HeadMass head_mass(ops::Context& ctx, const Tensor& q, const Tensor& k, int64_t head, double scale,
                   const SparsityLayout& layout, int64_t query_stride, int64_t fixed_k);

double median(std::vector<double> v);

}  // namespace avdit::analysis
