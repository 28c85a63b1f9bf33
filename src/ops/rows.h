// Row and column moves, casts and fills: the data movement the models need around their kernels.
// Index tensors are I32 on the op's context. Every op is exact (no arithmetic besides dtype casts,
// which round to nearest even).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
Tensor cast(const Tensor& x, DType dtype);
void gather_rows(const Tensor& x, const Tensor& index, Tensor& out);
void scatter_rows(const Tensor& src, const Tensor& index, Tensor& dst);
void gather_rows_masked(const Tensor& src, const Tensor& index, const Tensor& mask, Tensor& out);
void copy_columns(const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col, int64_t width);
void copy_(Tensor& dst, const Tensor& src);
void zero_(Tensor& t);
void gather_elements(const Tensor& x, const Tensor& index, Tensor& out);
}  // namespace cpu
namespace cuda {
Tensor cast(CudaContext& c, const Tensor& x, DType dtype);
void gather_rows(CudaContext& c, const Tensor& x, const Tensor& index, Tensor& out);
void scatter_rows(CudaContext& c, const Tensor& src, const Tensor& index, Tensor& dst);
void gather_rows_masked(CudaContext& c, const Tensor& src, const Tensor& index, const Tensor& mask,
                        Tensor& out);
void copy_columns(CudaContext& c, const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col,
                  int64_t width);
void copy_(CudaContext& c, Tensor& dst, const Tensor& src);
void zero_(CudaContext& c, Tensor& t);
void gather_elements(CudaContext& c, const Tensor& x, const Tensor& index, Tensor& out);
}  // namespace cuda

// A copy of x in `dtype` (x itself when it has that dtype already).
inline Tensor cast(Context& ctx, const Tensor& x, DType dtype) {
  return x.dtype() == dtype ? x : AVDIT_OP(ctx, cast, x, dtype);
}

// out[r] = x[index[r]] along dim 0 (bytes as they are; out has x's dtype): out [R, ...]
// preallocated.
inline void gather_rows(Context& ctx, const Tensor& x, const Tensor& index, Tensor& out) {
  AVDIT_OP(ctx, gather_rows, x, index, out);
}
inline Tensor gather_rows(Context& ctx, const Tensor& x, const Tensor& index) {
  Shape shape = x.shape();
  shape[0] = index.numel();
  Tensor out = ctx.empty(shape, x.dtype());
  gather_rows(ctx, x, index, out);
  return out;
}

// dst[index[i]] = src[i] for src [n, W], cast to dst's dtype; rows of dst not named stay as they
// are.
inline void scatter_rows(Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst) {
  AVDIT_OP(ctx, scatter_rows, src, index, dst);
}

// out[i] = mask[i] ? src[index[i]] : 0, src [*, W], out [n, W] (same dtype), mask U8 [n].
inline void gather_rows_masked(Context& ctx, const Tensor& src, const Tensor& index,
                               const Tensor& mask, Tensor& out) {
  AVDIT_OP(ctx, gather_rows_masked, src, index, mask, out);
}

// dst[:, dst_col + j] = src[:, src_col + j] for j < width (2-D tensors with the same rows; cast to
// dst's dtype).
inline void copy_columns(Context& ctx, const Tensor& src, int64_t src_col, Tensor& dst,
                         int64_t dst_col, int64_t width) {
  AVDIT_OP(ctx, copy_columns, src, src_col, dst, dst_col, width);
}
// Columns [begin, end) of a 2-D tensor as a new contiguous tensor.
Tensor take_columns(Context& ctx, const Tensor& x, int64_t begin, int64_t end);
// [a | b]: two 2-D tensors with the same rows side by side.
Tensor concat_columns(Context& ctx, const Tensor& a, const Tensor& b);
// Tensors with equal trailing dims stacked along dim 0.
Tensor concat_rows(Context& ctx, const std::vector<Tensor>& parts);

// dst = src (same numel; cast to dst's dtype).
inline void copy_(Context& ctx, Tensor& dst, const Tensor& src) { AVDIT_OP(ctx, copy_, dst, src); }
inline void zero_(Context& ctx, Tensor& t) { AVDIT_OP(ctx, zero_, t); }
// A copy of t on ctx (same shape and dtype).
inline Tensor clone(Context& ctx, const Tensor& t) {
  Tensor y = ctx.empty(t.shape(), t.dtype());
  copy_(ctx, y, t);
  return y;
}

// out.flat[i] = x.flat[index.flat[i]] (index I32 with out's numel): any fixed permutation of
// elements, e.g. patchifying latents on the device with an index built once per layout.
inline void gather_elements(Context& ctx, const Tensor& x, const Tensor& index, Tensor& out) {
  AVDIT_OP(ctx, gather_elements, x, index, out);
}

// An I32 tensor on ctx from host integers.
Tensor index_tensor(Context& ctx, const std::vector<int64_t>& values);
Tensor index_tensor(Context& ctx, const std::vector<int32_t>& values);

}  // namespace avdit::ops
