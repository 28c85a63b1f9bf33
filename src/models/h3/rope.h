// H3's partial 3-axis RoPE tables: 48 angles per row, [p_t inv_freq | p_h inv_freq | p_w inv_freq],
// applied split-half (dim i with i + 48) to dims 0..95 of each 128-wide q/k head.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace avdit::models::h3 {

struct RopeTables {
  Tensor cos;  // [S, 3 L]: cos of the 3 L distinct angles (L = rope_inv_freq_len)
  Tensor sin;  // [S, 3 L]
};

// positions: [S, 3] float64 (t, h, w), cast to float32 first, as the reference does;
// inv_freq: rope.inv_freq [L] from the checkpoint (the model uses the stored buffer).
RopeTables rope_tables(const std::vector<double>& positions, const Tensor& inv_freq);

// [S, 6 L] = [cos | sin], the fixture's `rope_cos_sin_cache`.
Tensor rope_cos_sin_cache(const RopeTables& tables);

}  // namespace avdit::models::h3
