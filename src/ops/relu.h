// max(x, 0) element-wise: TurboVAED's ResNet blocks after an upsampler use ReLU where the others
// use SiLU. A separate op (not a Unary member) so that adding it touched no existing op.
#pragma once

#include <optional>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void relu(const Tensor& x, Tensor& y);
}
namespace cuda {
void relu(CudaContext& c, const Tensor& x, Tensor& y);
}

// y = max(x, 0) in fp32, rounded to y's dtype (default x's).
inline Tensor relu(Context& ctx, const Tensor& x, std::optional<DType> out = {}) {
  Tensor y = ctx.empty(x.shape(), out.value_or(x.dtype()));
  AVDIT_OP(ctx, relu, x, y);
  return y;
}

}  // namespace avdit::ops
