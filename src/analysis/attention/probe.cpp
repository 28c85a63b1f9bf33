// AttentionSparsityProbe (see probe.h).
#include "analysis/attention/probe.h"

#include <chrono>
#include <map>

#include "core/error.h"
#include "models/h3/packing.h"
#include "ops/context.h"
#include "ops/rows.h"
#include "sample/sampler_loop.h"

namespace avdit::analysis {

SparsityLayout h3_sparsity_layout(const models::h3::PackedLayout& l) {
  AVDIT_REQUIRE(l.cu_seqlens.size() >= 2, "attention probe: a layout without attention documents");
  std::vector<int64_t> frame(static_cast<size_t>(l.seq_len), -1);
  std::map<double, int64_t> ids;
  for (int64_t r : l.img_pos) {
    const double t = l.positions[3 * r];
    const auto it = ids.emplace(t, static_cast<int64_t>(ids.size())).first;
    frame[r] = it->second;
  }
  // Ids in time order (the map's), so frame 0 is the earliest.
  int64_t next = 0;
  for (auto& [t, id] : ids) id = next++;
  for (int64_t r : l.img_pos) frame[r] = ids.at(l.positions[3 * r]);
  return SparsityLayout::make(std::move(frame), l.cu_seqlens[0], l.cu_seqlens[1]);
}

AttentionSparsityProbe::AttentionSparsityProbe(SparsityLayout layout, int64_t heads,
                                               int64_t head_dim, double scale,
                                               SparsityOptions options)
    : layout_(std::move(layout)),
      heads_(heads),
      head_dim_(head_dim),
      scale_(scale),
      o_(std::move(options)) {
}

bool AttentionSparsityProbe::wants(const Point& p) const {
  if (p.is(sample::kInputPoint)) return p.part <= 0;
  if (!p.is("block{}_q_rope") && !p.is("block{}_k_rope")) return false;
  // The first call of a probed step only (H3 with CFG makes two).
  return calls_ <= 1 && step_ >= 0 && (o_.steps.empty() || o_.steps.count(step_));
}

void AttentionSparsityProbe::on(ops::Context& ctx, const Point& p, Tensor& t) {
  if (p.is(sample::kInputPoint)) {
    step_ = static_cast<int>(p.index);
    calls_ = 0;
    return;
  }
  if (p.is("block{}_q_rope")) {
    if (p.index == 0) ++calls_;
    if (calls_ > 1) return;
    q_ = ops::clone(ctx, t);  // on the model's device: the masses are computed there
    return;
  }
  if (calls_ > 1 || !q_.defined()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor& k = t;
  AVDIT_CHECK(
      k.ndim() == 3 && k.size(1) == heads_ && k.size(2) == head_dim_ && q_.shape() == k.shape(),
      "attention probe: q {} k {} for {} heads of {}", q_.shape_str(), k.shape_str(), heads_,
      head_dim_);
  for (int64_t h = 0; h < heads_; ++h) {
    const HeadMass m =
        head_mass(ctx, q_, k, h, scale_, layout_, o_.query_stride, o_.fixed_k);
    triples_.push_back({step_, static_cast<int>(p.index), static_cast<int>(h), m.queries, m.k,
                        m.topk_median, m.pattern_median});
  }
  q_ = Tensor();
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

SparsitySummary AttentionSparsityProbe::summary(int64_t total) const {
  SparsitySummary s;
  s.covered = static_cast<int64_t>(triples_.size());
  s.total = total;
  std::vector<double> topk, pattern;
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_head;
  for (const TripleMass& t : triples_) {
    topk.push_back(t.topk_median);
    pattern.push_back(t.pattern_median);
    by_head[t.head].first.push_back(t.pattern_median);
    by_head[t.head].second.push_back(t.topk_median);
  }
  s.topk_median = median(topk);
  s.pattern_median = median(pattern);
  for (const auto& [h, v] : by_head) {
    HeadClass c{h, median(v.first), median(v.second), false};
    c.pass = c.pattern_median >= o_.bar;
    s.passing += c.pass;
    s.heads.push_back(c);
  }
  return s;
}

}  // namespace avdit::analysis
