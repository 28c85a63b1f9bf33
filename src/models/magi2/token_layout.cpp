// Modality-sorted token order and the row/column copies around it (see token_layout.h).
#include "models/magi2/token_layout.h"

#include <cstring>

#include "core/error.h"
#include "models/magi2/config.h"
#include "ops/ops.h"

namespace avdit::models::magi2 {

TokenLayout TokenLayout::from_modality(const std::vector<int32_t>& modality) {
  TokenLayout layout;
  const int64_t n = static_cast<int64_t>(modality.size());
  std::array<std::vector<int64_t>, 3> by_group;
  for (int64_t l = 0; l < n; ++l) {
    int32_t m = modality[l];
    AVDIT_REQUIRE(m >= 0 && m <= kTime, "modality_mapping[{}] = {} is not a modality id (0 video, 1 audio, 2 text, 3 time)",
                  l, m);
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

Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& index) {
  const Tensor src = x.to_f32();
  Shape shape = src.shape();
  AVDIT_CHECK(!shape.empty(), "gather_rows of a scalar");
  const int64_t rows = shape[0];
  const int64_t row_len = rows > 0 ? src.numel() / rows : 0;
  shape[0] = static_cast<int64_t>(index.size());
  Tensor out = Tensor::empty(shape, DType::F32);
  const float* s = src.f32();
  float* d = out.f32();
  for (size_t i = 0; i < index.size(); ++i) {
    AVDIT_CHECK(index[i] >= 0 && index[i] < rows, "gather_rows index {} outside [0, {})", index[i], rows);
    std::memcpy(d + static_cast<int64_t>(i) * row_len, s + index[i] * row_len, sizeof(float) * row_len);
  }
  return out;
}

Tensor take_columns(const Tensor& x, int64_t begin, int64_t end) {
  const Tensor src = x.to_f32();
  AVDIT_CHECK(src.ndim() == 2 && begin >= 0 && begin <= end && end <= src.size(1),
              "take_columns [{}, {}) of {}", begin, end, src.shape_str());
  const int64_t rows = src.size(0), cols = src.size(1), w = end - begin;
  Tensor out = Tensor::empty({rows, w}, DType::F32);
  const float* s = src.f32();
  float* d = out.f32();
  for (int64_t r = 0; r < rows; ++r) std::memcpy(d + r * w, s + r * cols + begin, sizeof(float) * w);
  return out;
}

Tensor apply_grouped(const Tensor& x, int64_t groups, const TokenLayout& layout,
                     const std::function<Tensor(int64_t, const Tensor&)>& fn) {
  if (groups == 1) return fn(0, x);
  AVDIT_CHECK(groups == 3, "apply_grouped with {} groups", groups);
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < 3; ++g) {
    if (layout.size[g] == 0) continue;
    parts.push_back(fn(g, x.slice_rows(layout.begin[g], layout.begin[g] + layout.size[g])));
  }
  AVDIT_CHECK(!parts.empty(), "apply_grouped on an empty sequence");
  if (parts.size() == 1) return parts[0];
  return ops::concat_rows(parts);
}

}  // namespace avdit::models::magi2
