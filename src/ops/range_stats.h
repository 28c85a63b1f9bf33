// Range statistics as an op, for the fp16 range monitor (analysis/ranges/range_monitor.h): one
// tensor's largest finite magnitude, its count of non-finite values and the first row holding one,
// written into a small F32 slot that stays on the context. On the GPU the answer is the same every
// run (integer atomics and an atomic max of non-negative float bits commute) and nothing goes back
// to the host: the monitor downloads all its slots once, at the end.
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

// One slot: F32 [kRangeSlotWidth]. After range_stats: [0] max |x| over the finite values (0 when
// there is none), [1] the number of non-finite values (NaN, +-Inf; exact below 2^24), [2] the first
// row holding one (-1: none), [3..7] 0 (the GPU's scratch while it runs).
inline constexpr int64_t kRangeSlotWidth = 8;

namespace cpu {
void range_stats(const Tensor& x, Tensor& slot);
}
namespace cuda {
void range_stats(CudaContext& c, const Tensor& x, Tensor& slot);
}

// x: F32, F16 or BF16, any shape; its rows are numel / last dim (a 0-d tensor is one row). slot:
// kRangeSlotWidth F32 values on ctx, all zero (a row of ctx.zeros({n, kRangeSlotWidth}, F32)):
// each slot is written once. Enqueues only on the GPU.
inline void range_stats(Context& ctx, const Tensor& x, Tensor& slot) {
  AVDIT_OP(ctx, range_stats, x, slot);
}

// The checks both backends make: RuntimeFailure naming what is wrong with x or the slot.
void check_range_stats(const Tensor& x, const Tensor& slot);

}  // namespace avdit::ops
