// The relative L1 change the step cache's policies compare (sample/step_cache.h), on any context
// (the residual and its reuse are the element-wise ops' Sub and Add).
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
L1Sums l1_sums(const Tensor& a, const Tensor& b);
}  // namespace cpu
namespace cuda {
L1Sums l1_sums(CudaContext& c, const Tensor& a, const Tensor& b);
}  // namespace cuda

// L1Sums of two float tensors of one element count; waits for the context.
inline L1Sums l1_sums(Context& ctx, const Tensor& a, const Tensor& b) {
  return AVDIT_OP(ctx, l1_sums, a, b);
}

}  // namespace avdit::ops
