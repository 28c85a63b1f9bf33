// Random windowed-attention range lists for the op's CPU and GPU tests: rows whose rectangles never
// overlap, query ranges drawn from a few shared cut points (so that rows share query ranges, as
// the refiner's do) and partly overlapping each other.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/windowed_attention.h"

namespace avdit::testing {

inline std::vector<ops::RangePair> random_range_rows(int64_t S, int64_t Sk, int n, std::mt19937& rng) {
  std::vector<std::vector<uint8_t>> used(S, std::vector<uint8_t>(Sk, 0));
  std::vector<int64_t> cuts = {0, S};
  std::uniform_int_distribution<int64_t> qpos(0, S), kpos(0, Sk);
  for (int i = 0; i < 5; ++i) cuts.push_back(qpos(rng));
  std::sort(cuts.begin(), cuts.end());
  std::uniform_int_distribution<size_t> pick(0, cuts.size() - 1);
  std::vector<ops::RangePair> rows;
  for (int tries = 0; tries < 2000 && static_cast<int>(rows.size()) < n; ++tries) {
    int64_t a = cuts[pick(rng)], b = cuts[pick(rng)], c = kpos(rng), d = kpos(rng);
    if (a > b) std::swap(a, b);
    if (c > d) std::swap(c, d);
    if (a == b || c == d) continue;
    bool clash = false;
    for (int64_t i = a; i < b && !clash; ++i)
      for (int64_t j = c; j < d && !clash; ++j) clash = used[i][j];
    if (clash) continue;
    for (int64_t i = a; i < b; ++i)
      for (int64_t j = c; j < d; ++j) used[i][j] = 1;
    rows.push_back({{a, b}, {c, d}});
  }
  return rows;
}

}  // namespace avdit::testing
