// Range-list construction of the refiner's window (see window_ranges.h), in the reference's row
// order (row order only changes MagiAttention's scheduling; the golden compares it exactly).
#include "models/magi2/refiner/window_ranges.h"

#include <algorithm>

namespace avdit::models::magi2::refiner {

std::vector<ops::RangePair> window_range_list(const BlockGrid& g, const WindowConfig& w,
                                              int64_t total_tokens) {
  const int64_t V = g.T * g.H * g.W;
  const ops::Range tail{V, total_tokens}, video{0, V};
  std::vector<ops::RangePair> rows;
  if (tail.size() > 0) {
    // Dense rows: video blocks -> tail; tail chunks -> video; tail chunks -> tail.
    for (const ops::Range& b : g.blocks) rows.push_back({b, tail});
    const int64_t chunk = std::max<int64_t>(1, g.bt * g.bh * g.bw);
    for (const ops::Range& k : {video, tail})
      for (int64_t s = tail.begin; s < tail.end; s += chunk)
        rows.push_back({{s, std::min(s + chunk, tail.end)}, k});
  }
  // BlockGridLocalAttn: for each offset (dt slowest), every block whose neighbour lies inside.
  for (int64_t dt = -w.radius_t; dt <= w.radius_t; ++dt)
    for (int64_t dh = -w.radius_h; dh <= w.radius_h; ++dh)
      for (int64_t dw = -w.radius_w; dw <= w.radius_w; ++dw)
        for (int64_t b = 0; b < g.count(); ++b) {
          const int64_t tb = b / (g.nh * g.nw), hb = (b / g.nw) % g.nh, wb = b % g.nw;
          const int64_t kt = tb + dt, kh = hb + dh, kw = wb + dw;
          if (kt < 0 || kt >= g.nt || kh < 0 || kh >= g.nh || kw < 0 || kw >= g.nw) continue;
          rows.push_back({g.blocks[b], g.blocks[(kt * g.nh + kh) * g.nw + kw]});
        }
  return rows;
}

}  // namespace avdit::models::magi2::refiner
