// Element-wise ops and the gated activations of the MLPs. fp32 math; each result is rounded to the
// output's dtype where the reference's (bf16) tensors hold it.
#pragma once

#include <optional>

#include "ops/dispatch.h"

namespace avdit::ops {

enum class Unary { Silu, Sigmoid };
enum class Binary { Add, Sub, Mul };
enum class Gated {
  Swiglu,              // [g | u] halves (gate first): y = round(round(silu(g)) * u)   (H3)
  Swiglu7Interleaved,  // even columns gate, odd linear: y = round(swiglu7(g, l))      (MAGI-2)
  Swiglu7Split,  // separate g and l tensors:       y = round(swiglu7(g, l))      (MAGI-2 experts)
};
// swiglu7(g, l) = g' sigmoid(1.702 g') (l' + 1) with g' = min(g, 7), l' = clamp(l, -7, 7).
inline constexpr float kSwiglu7Alpha = 1.702f;
inline constexpr float kSwiglu7Limit = 7.0f;

namespace cpu {
void unary(Unary op, const Tensor& x, Tensor& y);
void binary(Binary op, const Tensor& a, const Tensor& b, Tensor& y);
void gated(Gated kind, const Tensor& u, const Tensor* l, Tensor& y, int64_t col);
}  // namespace cpu
namespace cuda {
void unary(CudaContext& c, Unary op, const Tensor& x, Tensor& y);
void binary(CudaContext& c, Binary op, const Tensor& a, const Tensor& b, Tensor& y);
void gated(CudaContext& c, Gated kind, const Tensor& u, const Tensor* l, Tensor& y, int64_t col);
}  // namespace cuda

inline Tensor silu(Context& ctx, const Tensor& x, std::optional<DType> out = {}) {
  Tensor y = ctx.empty(x.shape(), out.value_or(x.dtype()));
  AVDIT_OP(ctx, unary, Unary::Silu, x, y);
  return y;
}
inline Tensor sigmoid(Context& ctx, const Tensor& x, std::optional<DType> out = {}) {
  Tensor y = ctx.empty(x.shape(), out.value_or(x.dtype()));
  AVDIT_OP(ctx, unary, Unary::Sigmoid, x, y);
  return y;
}
// y = a op b (same numel), rounded to y's dtype (default a's); y may be a (in place).
inline void binary_into(Context& ctx, Binary op, const Tensor& a, const Tensor& b, Tensor& y) {
  AVDIT_OP(ctx, binary, op, a, b, y);
}
inline Tensor add(Context& ctx, const Tensor& a, const Tensor& b, std::optional<DType> out = {}) {
  Tensor y = ctx.empty(a.shape(), out.value_or(a.dtype()));
  binary_into(ctx, Binary::Add, a, b, y);
  return y;
}
inline Tensor sub(Context& ctx, const Tensor& a, const Tensor& b, std::optional<DType> out = {}) {
  Tensor y = ctx.empty(a.shape(), out.value_or(a.dtype()));
  binary_into(ctx, Binary::Sub, a, b, y);
  return y;
}
inline Tensor mul(Context& ctx, const Tensor& a, const Tensor& b, std::optional<DType> out = {}) {
  Tensor y = ctx.empty(a.shape(), out.value_or(a.dtype()));
  binary_into(ctx, Binary::Mul, a, b, y);
  return y;
}
inline void add_(Context& ctx, Tensor& a, const Tensor& b) {
  binary_into(ctx, Binary::Add, a, b, a);
}

// The gated activations: u [..., 2F] (Swiglu, Swiglu7Interleaved) or u = g, l [..., F]
// (Swiglu7Split) -> [..., F]. gated_into writes columns [col, col + F) of a 2-D y [rows, >= col +
// F] (MAGI-2 puts the shared expert's h beside the routed experts' output for one merge GEMM).
inline void gated_into(Context& ctx, Gated kind, const Tensor& u, const Tensor* l, Tensor& y,
                       int64_t col = 0) {
  AVDIT_OP(ctx, gated, kind, u, l, y, col);
}
inline Tensor gated(Context& ctx, Gated kind, const Tensor& u, const Tensor* l = nullptr,
                    std::optional<DType> out = {}) {
  Shape shape = u.shape();
  if (kind != Gated::Swiglu7Split) shape.back() /= 2;
  Tensor y = ctx.empty(shape, out.value_or(u.dtype()));
  gated_into(ctx, kind, u, l, y, 0);
  return y;
}

}  // namespace avdit::ops
