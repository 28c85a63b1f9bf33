// TokenLayout: the packed sequence re-ordered by modality (video, audio, text; stable), as the reference's
// ModalityDispatcher does inside the block, so that every modality-specific (G = 3) weight applies to one
// contiguous row range. Plus the row/column copies the forward needs around it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace avdit::models::magi2 {

struct TokenLayout {
  std::vector<int64_t> perm;     // permuted row r holds packed token perm[r]
  std::vector<int64_t> inv;      // packed token l sits at permuted row inv[l]
  std::array<int64_t, 3> begin{};  // first permuted row of video, audio, text
  std::array<int64_t, 3> size{};   // token count of video, audio, text

  // modality: [L] ids 0 video, 1 audio, 2 text, 3 time (treated as text).
  static TokenLayout from_modality(const std::vector<int32_t>& modality);
  int64_t tokens() const { return static_cast<int64_t>(perm.size()); }
};

// out[i] = x[index[i]] along dim 0 (x F32, any trailing shape); a new F32 tensor.
Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& index);

// Columns [begin, end) of a 2-D F32 tensor [rows, cols], copied: [rows, end - begin].
Tensor take_columns(const Tensor& x, int64_t begin, int64_t end);

// Applies fn(group, rows of that group) per modality group and stacks the results in permuted order.
// groups == 1: one call on all rows with group 0 (the layer has shared weights).
Tensor apply_grouped(const Tensor& x, int64_t groups, const TokenLayout& layout,
                     const std::function<Tensor(int64_t group, const Tensor& rows)>& fn);

}  // namespace avdit::models::magi2
