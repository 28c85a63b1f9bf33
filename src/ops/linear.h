// Matrix products with fp32 accumulation (no TF32, no reduced-precision reductions). On the GPU one
// cuBLASLt path (backend/cuda/gemm.h: plans per shape, optional timed choice); on the CPU OpenBLAS
// sgemm on widened operands, the oracle.
#pragma once

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* acc, Tensor& y);
void matmul(const Tensor& a, const Tensor& b, Tensor& c);
}  // namespace cpu
namespace cuda {
void linear(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* acc,
            Tensor& y);
void matmul(CudaContext& c, const Tensor& a, const Tensor& b, Tensor& out);
}  // namespace cuda

// y[..., N] = x[..., K] · w[N, K]^T (+ bias[N]) (+ acc[..., N]), computed in fp32 and rounded once
// to y's dtype. x, w: F32, BF16 or F16 (mixed dtypes are widened, exactly). y is preallocated and
// may be a row range of a larger tensor (slice_rows), and acc may be y itself.
inline void linear_into(Context& ctx, const Tensor& x, const Tensor& w, const Tensor* bias,
                        Tensor& y, const Tensor* acc = nullptr) {
  AVDIT_OP(ctx, linear, x, w, bias, acc, y);
}
inline Tensor linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor* bias = nullptr,
                     DType out = DType::F32, const Tensor* acc = nullptr) {
  Shape shape = x.shape();
  shape.back() = w.size(0);
  Tensor y = ctx.empty(shape, out);
  linear_into(ctx, x, w, bias, y, acc);
  return y;
}

// c[M, N] = a[M, K] · b[K, N] in fp32, rounded once to c's dtype (default F32).
inline Tensor matmul(Context& ctx, const Tensor& a, const Tensor& b, DType out = DType::F32) {
  Tensor c = ctx.empty({a.size(0), b.size(1)}, out);
  AVDIT_OP(ctx, matmul, a, b, c);
  return c;
}

}  // namespace avdit::ops
