// range_stats on the CPU (see ops/range_stats.h): the reference the GPU's reduction must equal.
#include <cmath>

#include "core/error.h"
#include "ops/cpu/common.h"
#include "ops/range_stats.h"

namespace avdit::ops::cpu {

void range_stats(const Tensor& x, Tensor& slot) {
  check_range_stats(x, slot);
  float* s = slot.f32();
  for (int64_t i = 0; i < kRangeSlotWidth; ++i)
    AVDIT_CHECK(s[i] == 0.f,
                "range_stats: the slot was written before (each call takes a fresh "
                "zeroed slot)");
  const Tensor v = f32(x);
  const float* p = v.f32();
  const int64_t n = v.numel();
  const int64_t width = v.ndim() == 0 ? 1 : v.shape().back();
  float max_abs = 0.f;
  int64_t count = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(p[i])) {
      max_abs = std::max(max_abs, std::fabs(p[i]));
    } else if (count++ == 0) {
      first = i;
    }
  }
  s[0] = max_abs;
  s[1] = static_cast<float>(count);
  s[2] = first < 0 ? -1.f : static_cast<float>(first / width);
}

}  // namespace avdit::ops::cpu
