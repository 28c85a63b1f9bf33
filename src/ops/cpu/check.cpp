// Non-finite values on the CPU (see ops/check.h).
#include <cmath>

#include "ops/check.h"
#include "ops/cpu/common.h"

namespace avdit::ops::cpu {

NonFinite count_nonfinite(const Tensor& t) {
  const Tensor x = f32(t);
  NonFinite r;
  const float* p = x.f32();
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(p[i])) {
      if (r.count++ == 0) r.first = i;
    }
  return r;
}

}  // namespace avdit::ops::cpu
