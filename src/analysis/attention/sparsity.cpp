// Top-k and pattern softmax mass per query (see sparsity.h).
#include "analysis/attention/sparsity.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/thread_pool.h"

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

HeadMass head_mass(const float* q, const float* k, int64_t heads, int64_t D, int64_t head,
                   double scale, const SparsityLayout& l, int64_t stride, int64_t fixed_k,
                   ThreadPool* pool) {
  AVDIT_REQUIRE(stride >= 1, "attention probe: query stride {} (expected >= 1)", stride);
  std::vector<int64_t> queries;
  int64_t seen = 0;
  for (int64_t r = l.begin; r < l.end; ++r)
    if (l.frame[r] >= 0 && seen++ % stride == 0) queries.push_back(r);
  const int64_t n_keys = l.end - l.begin;
  HeadMass m;
  m.queries = static_cast<int64_t>(queries.size());
  m.topk.assign(queries.size(), 0);
  m.pattern.assign(queries.size(), 0);
  if (queries.empty()) return m;
  auto keys_of = [&](int64_t row) {
    return std::min(fixed_k > 0 ? fixed_k : l.pattern_keys[l.frame[row]], n_keys);
  };
  m.k = keys_of(queries.front());
  auto one = [&](int64_t i) {
    const int64_t row = queries[i];
    const float* qi = q + (row * heads + head) * D;
    std::vector<double> s(n_keys);
    // Pass 1: the exact scores and their log-sum-exp.
    double mx = -INFINITY;
    for (int64_t j = 0; j < n_keys; ++j) {
      const float* kj = k + ((l.begin + j) * heads + head) * D;
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += double(qi[d]) * double(kj[d]);
      s[j] = scale * dot;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (double v : s) sum += std::exp(v - mx);
    const double lse = mx + std::log(sum);
    // Pass 2: each key's probability; the pattern's keys and the k largest.
    double pattern = 0;
    const int64_t f = l.frame[row];
    for (int64_t j = 0; j < n_keys; ++j) {
      s[j] = std::exp(s[j] - lse);
      const int64_t fj = l.frame[l.begin + j];
      if (fj < 0 || fj == f) pattern += s[j];
    }
    const int64_t kk = keys_of(row);
    std::nth_element(s.begin(), s.begin() + (kk - 1), s.end(), std::greater<double>());
    double top = 0;
    for (int64_t j = 0; j < kk; ++j) top += s[j];
    m.topk[i] = top;
    m.pattern[i] = pattern;
  };
  const auto n = static_cast<int64_t>(queries.size());
  if (pool)
    pool->run(n, one);
  else
    for (int64_t i = 0; i < n; ++i) one(i);
  m.topk_median = median(m.topk);
  m.pattern_median = median(m.pattern);
  return m;
}

}  // namespace avdit::analysis
