// The modality-sorted token order (see token_layout.h).
#include "models/magi2/token_layout.h"

#include <algorithm>

#include "core/error.h"
#include "models/magi2/config.h"

namespace avdit::models::magi2 {

TokenLayout TokenLayout::from_modality(const std::vector<int32_t>& modality) {
  TokenLayout layout;
  const int64_t n = static_cast<int64_t>(modality.size());
  std::array<std::vector<int64_t>, 3> by_group;
  for (int64_t l = 0; l < n; ++l) {
    int32_t m = modality[l];
    AVDIT_REQUIRE(
        m >= 0 && m <= kTime,
        "modality_mapping[{}] = {} is not a modality id (0 video, 1 audio, 2 text, 3 time)", l, m);
    if (m == kTime) m = kText;  // the reference remaps time tokens to text before dispatching
    by_group[m].push_back(l);
  }
  layout.perm.reserve(n);
  for (int g = 0; g < 3; ++g) {
    layout.begin[g] = static_cast<int64_t>(layout.perm.size());
    layout.size[g] = static_cast<int64_t>(by_group[g].size());
    layout.perm.insert(layout.perm.end(), by_group[g].begin(), by_group[g].end());
  }
  layout.inv.assign(n, 0);
  for (int64_t r = 0; r < n; ++r) layout.inv[layout.perm[r]] = r;
  return layout;
}

std::vector<int32_t> TokenLayout::groups() const {
  std::vector<int32_t> g(perm.size());
  for (int m = 0; m < 3; ++m) std::fill(g.begin() + begin[m], g.begin() + begin[m] + size[m], m);
  return g;
}

}  // namespace avdit::models::magi2
