// LayerNorm over the last dim with an optional affine weight and bias: the ViT VAE decoders close
// their transformer with it (torch.nn.LayerNorm), where rms_norm cannot serve (it neither centres
// nor adds a bias).
#pragma once

#include <optional>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& y);
}
namespace cuda {
void layer_norm(CudaContext& c, const Tensor& x, const Tensor* w, const Tensor* b, float eps,
                Tensor& y);
}

// y = (x - mean) / sqrt(var + eps) * w + b over the last dim D, var the biased variance (torch's);
// mean and var reduce in at least fp32 (the CPU in double), y rounded once to its dtype. w, b: [D]
// or null (no weight / no bias).
inline Tensor layer_norm(Context& ctx, const Tensor& x, const Tensor* w, const Tensor* b, float eps,
                         std::optional<DType> out = {}) {
  Tensor y = ctx.empty(x.shape(), out.value_or(x.dtype()));
  AVDIT_OP(ctx, layer_norm, x, w, b, eps, y);
  return y;
}

}  // namespace avdit::ops
