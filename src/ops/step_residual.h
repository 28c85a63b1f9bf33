// The element-wise work of step caching (sample/step_cache.h) on any context: the block stack's
// residual, its reuse on a skipped call, and the relative L1 change the cache policies compare.
// The sums are float64 in a fixed order (no float atomics): a skip decided on them is the same
// every run.
#pragma once

#include <limits>

#include "ops/dispatch.h"

namespace avdit::ops {

// sum |a - b| and sum |b| over all elements.
struct L1Sums {
  double diff = 0, base = 0;
  // The relative L1 change |a - b|_1 / |b|_1 (0 for two zero tensors, infinity over a zero base).
  double relative() const {
    if (base > 0) return diff / base;
    return diff > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
};

namespace cpu {
void residual_sub(const Tensor& a, const Tensor& b, Tensor& out);
void residual_add(const Tensor& a, const Tensor& r, Tensor& out);
L1Sums l1_sums(const Tensor& a, const Tensor& b);
}  // namespace cpu
namespace cuda {
void residual_sub(CudaContext& c, const Tensor& a, const Tensor& b, Tensor& out);
void residual_add(CudaContext& c, const Tensor& a, const Tensor& r, Tensor& out);
L1Sums l1_sums(CudaContext& c, const Tensor& a, const Tensor& b);
}  // namespace cuda

// out (F32) = a - b; a, b F32 / BF16 / F16 of out's element count.
inline void residual_sub(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  AVDIT_OP(ctx, residual_sub, a, b, out);
}
// out = a + r computed in float32 and rounded once to out's dtype; r F32.
inline void residual_add(Context& ctx, const Tensor& a, const Tensor& r, Tensor& out) {
  AVDIT_OP(ctx, residual_add, a, r, out);
}
// L1Sums of two float tensors of one element count; waits for the context.
inline L1Sums l1_sums(Context& ctx, const Tensor& a, const Tensor& b) {
  return AVDIT_OP(ctx, l1_sums, a, b);
}

}  // namespace avdit::ops
