// A contact sheet: one PNG that shows several runs at a glance, one row per run and one column
// per position in the clip (10 %, 50 % and 90 % of its frames), for comparing seeds or settings.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace avdit::media {

// Separator lines between cells: kSheetGap pixels of kSheetGapValue (light grey) on R, G and B.
// Runs smaller than the largest one sit at the top left of their cells, on black.
inline constexpr int kSheetGap = 2;
inline constexpr uint8_t kSheetGapValue = 200;
inline constexpr int kSheetPercents[3] = {10, 50, 90};

// runs: each [T, 3, H, W] float32 in [-1, 1] (sizes and lengths may differ). labels: empty or
// one per run; the image carries no text (no font dependency), the labels and the frame indices
// of each row go into the PNG's text chunks ("Row 1", "Row 2", ..., "Columns"). Only the frames
// shown are read, so only they must be finite.
void write_contact_sheet(const std::filesystem::path& path, const std::vector<Tensor>& runs,
                         const std::vector<std::string>& labels = {});

}  // namespace avdit::media
