// RMSNorm over the last dim, with per-token weight rows for modality-grouped layers.
#pragma once

#include <optional>

#include "ops/dispatch.h"

namespace avdit::ops {

struct RmsNormWeight {
  Tensor w;                       // [D] or [G, D] (undefined: no weight)
  bool one_plus = false;          // the weight is zero-centred: g = 1 + w
  const Tensor* group = nullptr;  // with G > 1: I32 [T], the weight row of each token
};

namespace cpu {
void rms_norm(const Tensor& x, const RmsNormWeight& w, float eps, Tensor& y);
}
namespace cuda {
void rms_norm(CudaContext& c, const Tensor& x, const RmsNormWeight& w, float eps, Tensor& y);
}

// y = x / sqrt(mean(x^2) + eps) * g over the last dim D (sum of squares in at least fp32; the CPU
// sums in double), rounded once to y's dtype. x [T, D] or [T, H, D] (T tokens: with grouped
// weights, token t of x uses row group[t]).
inline Tensor rms_norm(Context& ctx, const Tensor& x, const RmsNormWeight& w, float eps,
                       std::optional<DType> out = {}) {
  Tensor y = ctx.empty(x.shape(), out.value_or(x.dtype()));
  AVDIT_OP(ctx, rms_norm, x, w, eps, y);
  return y;
}
inline Tensor rms_norm(Context& ctx, const Tensor& x, const Tensor& w, float eps,
                       bool one_plus = false, std::optional<DType> out = {}) {
  return rms_norm(ctx, x, RmsNormWeight{w, one_plus, nullptr}, eps, out);
}

}  // namespace avdit::ops
