// Range-list planning for windowed attention (see ops/windowed_attention.h): validated and cut into
// query segments on the host, once per layout.
#include "ops/windowed_attention.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace avdit::ops {

MergedRanges merge_ranges(const std::vector<RangePair>& rows) {
  MergedRanges m;
  m.sorted = rows;
  std::stable_sort(m.sorted.begin(), m.sorted.end(),
                   [](const RangePair& a, const RangePair& b) { return a.q.begin < b.q.begin; });
  for (size_t i = 0; i < m.sorted.size(); ++i) {
    if (i == 0 || !(m.sorted[i].q == m.sorted[i - 1].q)) {
      m.q.push_back(m.sorted[i].q);
      m.offsets.push_back(static_cast<int64_t>(i));
    }
  }
  m.offsets.push_back(static_cast<int64_t>(m.sorted.size()));
  return m;
}

WindowPlan plan_window(Context& ctx, const std::vector<RangePair>& rows, int64_t q_rows,
                       int64_t k_rows) {
  AVDIT_REQUIRE(
      q_rows >= 0 && k_rows >= 0 && q_rows < (int64_t{1} << 31) && k_rows < (int64_t{1} << 31),
      "windowed attention: {} queries x {} keys do not fit 32-bit indices", q_rows, k_rows);
  std::vector<int64_t> cuts;
  for (size_t i = 0; i < rows.size(); ++i) {
    const RangePair& r = rows[i];
    AVDIT_REQUIRE(0 <= r.q.begin && r.q.begin <= r.q.end && r.q.end <= q_rows && 0 <= r.k.begin &&
                      r.k.begin <= r.k.end && r.k.end <= k_rows,
                  "windowed attention: row {} (q [{}, {}), k [{}, {})) leaves the {} queries x {} "
                  "keys or is reversed",
                  i, r.q.begin, r.q.end, r.k.begin, r.k.end, q_rows, k_rows);
    if (r.q.size() == 0 || r.k.size() == 0) continue;  // covers nothing
    cuts.push_back(r.q.begin);
    cuts.push_back(r.q.end);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // Elementary interval e = [cuts[e], cuts[e+1]) collects the key ranges of the rows over it.
  std::vector<std::vector<Range>> keys(cuts.empty() ? 0 : cuts.size() - 1);
  for (const RangePair& r : rows) {
    if (r.q.size() == 0 || r.k.size() == 0) continue;
    const auto first = std::lower_bound(cuts.begin(), cuts.end(), r.q.begin) - cuts.begin();
    const auto last = std::lower_bound(cuts.begin(), cuts.end(), r.q.end) - cuts.begin();
    for (auto e = first; e < last; ++e) keys[e].push_back(r.k);
  }
  WindowPlan p;
  p.q_rows = q_rows;
  p.k_rows = k_rows;
  p.offsets.push_back(0);
  for (size_t e = 0; e < keys.size(); ++e) {
    std::vector<Range>& ks = keys[e];
    if (ks.empty()) continue;
    const Range seg{cuts[e], cuts[e + 1]};
    std::sort(ks.begin(), ks.end(),
              [](const Range& a, const Range& b) { return a.begin < b.begin; });
    int64_t n = 0;
    for (size_t i = 0; i < ks.size(); ++i) {
      if (i > 0) {
        const Range& prev = p.keys.back();
        AVDIT_REQUIRE(ks[i].begin >= prev.end,
                      "windowed attention: queries [{}, {}) see keys [{}, {}) twice (two rows "
                      "cover the same pairs); the op takes every (query, key) pair at most once",
                      seg.begin, seg.end, ks[i].begin, std::min(prev.end, ks[i].end));
        if (ks[i].begin == prev.end) {  // touching: one range
          p.keys.back().end = ks[i].end;
          n += ks[i].size();
          continue;
        }
      }
      p.keys.push_back(ks[i]);
      n += ks[i].size();
    }
    p.segments.push_back(seg);
    p.offsets.push_back(static_cast<int64_t>(p.keys.size()));
    p.max_segment = std::max(p.max_segment, seg.size());
    p.max_keys = std::max(p.max_keys, n);
    p.pairs += seg.size() * n;
    p.tiles += (seg.size() + kWindowTileRows - 1) / kWindowTileRows;
  }
  if (ctx.is_cuda()) {
    // [segments (begin, end) | offsets | keys (begin, end) | tiles (segment, first query)], I32:
    // what the kernels read.
    std::vector<int32_t> t;
    t.reserve(2 * p.segments.size() + p.offsets.size() + 2 * p.keys.size() + 2 * p.tiles);
    for (const Range& s : p.segments) t.insert(t.end(), {int32_t(s.begin), int32_t(s.end)});
    for (int64_t o : p.offsets) t.push_back(static_cast<int32_t>(o));
    for (const Range& k : p.keys) t.insert(t.end(), {int32_t(k.begin), int32_t(k.end)});
    for (size_t i = 0; i < p.segments.size(); ++i)
      for (int64_t r = p.segments[i].begin; r < p.segments[i].end; r += kWindowTileRows)
        t.insert(t.end(), {static_cast<int32_t>(i), static_cast<int32_t>(r)});
    Tensor host = Tensor::empty({static_cast<int64_t>(t.size())}, DType::I32);
    std::copy(t.begin(), t.end(), host.data<int32_t>());
    p.table = ctx.upload(host);
  }
  return p;
}

void check_windowed_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              const WindowPlan& plan, const Tensor* gate, const Tensor& out,
                              const Tensor* lse) {
  AVDIT_REQUIRE(q.ndim() == 3 && k.ndim() == 3 && v.ndim() == 3,
                "windowed attention: q, k, v must be [S, H, D], found {} {} {}", q.shape_str(),
                k.shape_str(), v.shape_str());
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Sk = k.size(0), Hkv = k.size(1);
  AVDIT_REQUIRE(v.size(0) == Sk && k.size(2) == D && v.size(1) == Hkv && v.size(2) == D &&
                    Hkv > 0 && Hq % Hkv == 0,
                "windowed attention: q {} k {} v {} (k and v alike, query heads a multiple of "
                "key heads)",
                q.shape_str(), k.shape_str(), v.shape_str());
  AVDIT_REQUIRE(S == plan.q_rows && Sk == plan.k_rows,
                "windowed attention: {} queries x {} keys, but the range list was planned for "
                "{} x {}",
                S, Sk, plan.q_rows, plan.k_rows);
  AVDIT_REQUIRE(out.shape() == q.shape(), "windowed attention: output {} for q {}", out.shape_str(),
                q.shape_str());
  AVDIT_REQUIRE(!gate || gate->numel() == S * Hq,
                "windowed attention: gate {} for {} queries x {} heads", gate->shape_str(), S, Hq);
  AVDIT_REQUIRE(!lse || (lse->numel() == S * Hq && lse->dtype() == DType::F32),
                "windowed attention: lse must be F32 [{}, {}], found {} {}", S, Hq,
                lse->shape_str(), dtype_name(lse->dtype()));
}

void windowed_attention_into(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                             float scale, const WindowPlan& plan, const Tensor* gate, Tensor& out,
                             Tensor* lse) {
  check_windowed_attention(q, k, v, plan, gate, out, lse);
  AVDIT_OP(ctx, windowed_attention, q, k, v, scale, plan, gate, out, lse);
}

}  // namespace avdit::ops
