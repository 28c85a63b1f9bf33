// Window moves and linear cross-fades on [outer, rows, cols] views: how tiled and chunked decoders
// place a decoded tile or temporal chunk into their output and blend it with its neighbour. A
// video [C, T, H, W] is viewed as [C * T, H, W] to move a spatial window, as [C, T, H * W] to move
// frames; a horizontal blend views it as [C * T * H, W, 1]. Exact moves; the blend rounds as torch.
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

// A window of a 3-D tensor: rows [row, row + rows) and columns [col, col + cols) of every outer
// slice.
struct Window {
  int64_t row = 0, col = 0, rows = 0, cols = 0;
};

namespace cpu {
void copy_window(const Tensor& src, const Window& from, Tensor& dst, int64_t row, int64_t col);
void blend_rows(const Tensor& a, int64_t a_row, Tensor& b, int64_t b_row, int64_t extent);
}  // namespace cpu
namespace cuda {
void copy_window(CudaContext& c, const Tensor& src, const Window& from, Tensor& dst, int64_t row,
                 int64_t col);
void blend_rows(CudaContext& c, const Tensor& a, int64_t a_row, Tensor& b, int64_t b_row,
                int64_t extent);
}  // namespace cuda

// dst[o, row + i, col + j] = src[o, from.row + i, from.col + j] for i < from.rows, j < from.cols:
// src [P, R, C] and dst [P, R', C'] (same P, any float dtypes; cast to dst's). BadInput when the
// window leaves either tensor.
inline void copy_window(Context& ctx, const Tensor& src, const Window& from, Tensor& dst,
                        int64_t row, int64_t col) {
  AVDIT_OP(ctx, copy_window, src, from, dst, row, col);
}

// The cross-fade of the tiled decoders, in place on b: for k < E (extent),
//   b[o, b_row + k, c] = a[o, a_row + k, c] * (1 - k / E) + b[o, b_row + k, c] * (k / E)
// with the weights, both products and the sum each rounded to float32 (torch's
// a * w_a + b * w_b), so k = 0 takes a and a never reaches weight 0. a [P, Ra, C], b [P, Rb, C].
inline void blend_rows(Context& ctx, const Tensor& a, int64_t a_row, Tensor& b, int64_t b_row,
                       int64_t extent) {
  AVDIT_OP(ctx, blend_rows, a, a_row, b, b_row, extent);
}

// Shape checks both backends make (BadInput naming the op).
void check_copy_window(const Tensor& src, const Window& from, const Tensor& dst, int64_t row,
                       int64_t col);
void check_blend_rows(const Tensor& a, int64_t a_row, const Tensor& b, int64_t b_row,
                      int64_t extent);

}  // namespace avdit::ops
