// The operand checks both backends of range_stats share (see ops/range_stats.h).
#include "ops/range_stats.h"

#include "core/error.h"

namespace avdit::ops {

void check_range_stats(const Tensor& x, const Tensor& slot) {
  AVDIT_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::F16 || x.dtype() == DType::BF16,
              "range_stats: x {} {} (expected F32, F16 or BF16)", dtype_name(x.dtype()),
              x.shape_str());
  AVDIT_CHECK(slot.dtype() == DType::F32 && slot.numel() == kRangeSlotWidth,
              "range_stats: slot {} {} (expected {} F32 values)", dtype_name(slot.dtype()),
              slot.shape_str(), kRangeSlotWidth);
}

}  // namespace avdit::ops
