// The FP8 option of a model's dense GEMMs (issue 39): every product through ops::linear_fp8 with one
// scaling, each weight quantized once, on its first use, and kept beside the original (keyed by
// the weight's data, so a row slice of a grouped weight is its own entry). One per model; a model
// runs one forward at a time, so the cache needs no lock.
#pragma once

#include <map>

#include "ops/linear_fp8.h"

namespace avdit::ops {

class Fp8Gemms {
 public:
  explicit Fp8Gemms(Fp8Scaling scaling) : scaling_(scaling) {}
  Fp8Scaling scaling() const { return scaling_; }

  // y [..., N] = x [..., K] · w^T through e4m3 (ops/linear_fp8.h), y preallocated.
  void linear_into(Context& ctx, const Tensor& x, const Tensor& w, Tensor& y) const {
    auto it = weights_.find(w.raw());
    if (it == weights_.end()) it = weights_.emplace(w.raw(), quantize_fp8(ctx, w, scaling_)).first;
    AVDIT_OP(ctx, linear_fp8, x, it->second, y);
  }
  Tensor linear(Context& ctx, const Tensor& x, const Tensor& w, DType out) const {
    Shape shape = x.shape();
    shape.back() = w.size(0);
    Tensor y = ctx.empty(shape, out);
    linear_into(ctx, x, w, y);
    return y;
  }

 private:
  Fp8Scaling scaling_;
  mutable std::map<const void*, Fp8Weight> weights_;
};

}  // namespace avdit::ops
