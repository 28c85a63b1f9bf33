// Checks a run makes on its tensors: how many values are not finite (NaN or +-Inf), and the first.
// One reduction over the tensor (cheap beside a model step); the answer comes to the host.
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

struct NonFinite {
  int64_t count = 0;
  int64_t first = -1;  // flat index of the first non-finite value (-1: none)
};

namespace cpu {
NonFinite count_nonfinite(const Tensor& t);
}
namespace cuda {
NonFinite count_nonfinite(CudaContext& c, const Tensor& t);
}

// F32, BF16 or F16 on any context; waits for the context.
inline NonFinite count_nonfinite(Context& ctx, const Tensor& t) {
  return AVDIT_OP(ctx, count_nonfinite, t);
}

}  // namespace avdit::ops
