// The attention sparsity probe as an observer probe on H3's forward: at each block's q and k after
// RoPE (block{}_q_rope, block{}_k_rope) of the first model call of each probed step, every head's
// top-k and pattern mass (sparsity.h); then the run's medians and per-head classes against a bar
// fixed before the run, with the coverage said as covered N of M (step, block, head).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "analysis/attention/sparsity.h"
#include "core/observer.h"
#include "core/tensor.h"

namespace avdit::models::h3 {
struct PackedLayout;
}

namespace avdit::analysis {

// H3's packed layout as the probe sees it: the first attention document (the real tokens; the pad
// rows form the second), video rows grouped into frames by their RoPE time coordinate.
SparsityLayout h3_sparsity_layout(const models::h3::PackedLayout& layout);

struct SparsityOptions {
  double bar = 0.7;          // a head passes when its median pattern mass is at least this
  int64_t fixed_k = 0;       // 0: the pattern's key count
  int64_t query_stride = 1;  // every n-th video query
  std::set<int> steps;       // empty: every step
};

struct TripleMass {
  int step = 0, block = 0, head = 0;
  int64_t queries = 0, k = 0;
  double topk_median = 0, pattern_median = 0;
};

struct HeadClass {
  int head = 0;
  double pattern_median = 0, topk_median = 0;  // over the head's (step, block)
  bool pass = false;
};

struct SparsitySummary {
  int64_t covered = 0, total = 0;
  double topk_median = 0, pattern_median = 0;  // over the covered triples
  std::vector<HeadClass> heads;
  int passing = 0;
};

class AttentionSparsityProbe final : public Probe {
 public:
  AttentionSparsityProbe(SparsityLayout layout, int64_t heads, int64_t head_dim, double scale,
                         SparsityOptions options);
  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;

  const std::vector<TripleMass>& triples() const { return triples_; }
  // total: the (step, block, head) of the run, steps * blocks * heads.
  SparsitySummary summary(int64_t total) const;
  double seconds() const { return seconds_; }
  const SparsityLayout& layout() const { return layout_; }

 private:
  SparsityLayout layout_;
  int64_t heads_, head_dim_;
  double scale_;
  SparsityOptions o_;
  int step_ = -1, calls_ = 0;
  Tensor q_;
  std::vector<TripleMass> triples_;
  double seconds_ = 0;
};

}  // namespace avdit::analysis
