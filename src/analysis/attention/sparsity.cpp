// Top-k and pattern softmax mass per query (see sparsity.h).
#include "analysis/attention/sparsity.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "ops/attention_mass.h"
#include "ops/context.h"

namespace avdit::analysis {

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t SparsityLayout::video_rows() const {
  int64_t n = 0;
  for (int64_t r = begin; r < end; ++r) n += frame[r] >= 0;
  return n;
}

SparsityLayout SparsityLayout::make(std::vector<int64_t> frame, int64_t begin, int64_t end) {
  AVDIT_REQUIRE(begin >= 0 && begin < end && end <= static_cast<int64_t>(frame.size()),
                "attention probe: document [{}, {}) outside {} rows", begin, end, frame.size());
  SparsityLayout l;
  l.begin = begin;
  l.end = end;
  std::map<int64_t, int64_t> per_frame;
  int64_t non_video = 0;
  for (int64_t r = begin; r < end; ++r) {
    if (frame[r] >= 0)
      ++per_frame[frame[r]];
    else
      ++non_video;
  }
  const int64_t frames = per_frame.empty() ? 0 : per_frame.rbegin()->first + 1;
  l.pattern_keys.assign(frames, 0);
  for (const auto& [f, n] : per_frame) l.pattern_keys[f] = n + non_video;
  l.frame = std::move(frame);
  return l;
}

HeadMass head_mass(ops::Context& ctx, const Tensor& q, const Tensor& k, int64_t head,
                   double scale, const SparsityLayout& l, int64_t stride, int64_t fixed_k) {
  AVDIT_REQUIRE(stride >= 1, "attention probe: query stride {} (expected >= 1)", stride);
  const int64_t n_keys = l.end - l.begin;
  std::vector<int32_t> rows, top_k;
  int64_t seen = 0;
  for (int64_t r = l.begin; r < l.end; ++r)
    if (l.frame[r] >= 0 && seen++ % stride == 0) {
      rows.push_back(static_cast<int32_t>(r));
      top_k.push_back(static_cast<int32_t>(
          std::min(fixed_k > 0 ? fixed_k : l.pattern_keys[l.frame[r]], n_keys)));
    }
  HeadMass m;
  m.queries = static_cast<int64_t>(rows.size());
  if (rows.empty()) return m;
  m.k = top_k.front();
  std::vector<int32_t> frame(l.frame.begin(), l.frame.end());
  const auto index = [&](const std::vector<int32_t>& v) {
    return ctx.upload(Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I32, v.data()));
  };
  const ops::MassQueries mq{index(rows), index(top_k), index(frame), l.begin, l.end};
  Tensor topk = ctx.empty({m.queries}, DType::F64), pattern = ctx.empty({m.queries}, DType::F64);
  ops::attention_mass(ctx, q, k, head, scale, mq, topk, pattern);
  const Tensor ht = ctx.download(topk), hp = ctx.download(pattern);
  m.topk.assign(ht.data<double>(), ht.data<double>() + m.queries);
  m.pattern.assign(hp.data<double>(), hp.data<double>() + m.queries);
  m.topk_median = median(m.topk);
  m.pattern_median = median(m.pattern);
  return m;
}

}  // namespace avdit::analysis
