// Qwen3-VL's rotary tables for a text-only prompt. M-RoPE gives every frequency one of the t, h, w
// positions, and a text row has t = h = w = its index, so the tables are those of plain 1-D RoPE
// over the whole head: angle_j = pos * theta^(-2j/D), cos / sin of [angles | angles] (rotate_half).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace avdit::models::text::qwen3vl {

struct RopeTable {
  Tensor cos;  // F32 [T, D]
  Tensor sin;  // F32 [T, D]
};

// Positions 0..T-1, computed as transformers does in float32 (inv_freq = 1 / theta^(2j / D), then
// pos * inv_freq), cos / sin of each float32 angle rounded once to float32.
RopeTable rope_table(int64_t tokens, int64_t head_dim, double theta);

// The table in the form the forward applies it to heads [T, heads, D] viewed as [T * heads, D]:
// cos repeated per head, and sin with its first half negated, so that
//   rope(x) = x * cos + swap_halves(x) * sin_signed  ==  x * cos + rotate_half(x) * sin
// with the same products and sum as the reference's (x2 * -sin == -x2 * sin exactly).
// dtype: the activation dtype (the bf16 reference casts its tables to bf16).
RopeTable per_head(const RopeTable& t, int64_t heads, DType dtype);

}  // namespace avdit::models::text::qwen3vl
