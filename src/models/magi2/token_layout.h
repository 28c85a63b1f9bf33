// TokenLayout: the packed sequence re-ordered by modality (video, audio, text; stable), as the
// reference's ModalityDispatcher does inside the block, so that every modality-specific (G = 3)
// weight applies to one contiguous row range.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace avdit::models::magi2 {

struct TokenLayout {
  std::vector<int64_t> perm;       // permuted row r holds packed token perm[r]
  std::vector<int64_t> inv;        // packed token l sits at permuted row inv[l]
  std::array<int64_t, 3> begin{};  // first permuted row of video, audio, text
  std::array<int64_t, 3> size{};   // token count of video, audio, text

  // modality: [L] ids 0 video, 1 audio, 2 text, 3 time (treated as text). BadInput on other ids.
  static TokenLayout from_modality(const std::vector<int32_t>& modality);
  int64_t tokens() const { return static_cast<int64_t>(perm.size()); }
  // The modality of each permuted row.
  std::vector<int32_t> groups() const;
};

}  // namespace avdit::models::magi2
