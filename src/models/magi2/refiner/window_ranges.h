// The refiner's attention range list, row for row as the reference's
// _build_window_local_attn_handler (level "block", block_mode "grid") hands it to
// flex_flash_attn_func: every video block to the whole tail, the tail in chunks of one block's
// volume to all video and to the whole tail, then the grid window rows offset-major.
#pragma once

#include <cstdint>
#include <vector>

#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/packing.h"
#include "ops/windowed_attention.h"

namespace avdit::models::magi2::refiner {

// Rows over a sequence of `total_tokens` = the grid's video tokens followed by the tail.
std::vector<ops::RangePair> window_range_list(const BlockGrid& grid, const WindowConfig& window,
                                              int64_t total_tokens);

}  // namespace avdit::models::magi2::refiner
