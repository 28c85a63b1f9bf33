// The shape checks of the window ops, shared by both backends (ops/window.h).
#include "ops/window.h"

#include "core/error.h"

namespace avdit::ops {

void check_copy_window(const Tensor& src, const Window& from, const Tensor& dst, int64_t row,
                       int64_t col) {
  AVDIT_REQUIRE(src.ndim() == 3 && dst.ndim() == 3 && src.size(0) == dst.size(0),
                "copy_window: src {} and dst {} must be 3-D with the same outer size",
                src.shape_str(), dst.shape_str());
  const bool inside_src = from.row >= 0 && from.col >= 0 && from.rows >= 0 && from.cols >= 0 &&
                          from.row + from.rows <= src.size(1) &&
                          from.col + from.cols <= src.size(2);
  const bool inside_dst =
      row >= 0 && col >= 0 && row + from.rows <= dst.size(1) && col + from.cols <= dst.size(2);
  AVDIT_REQUIRE(inside_src && inside_dst,
                "copy_window: window rows [{}, +{}) cols [{}, +{}) of {} to ({}, {}) of {} leaves "
                "a tensor",
                from.row, from.rows, from.col, from.cols, src.shape_str(), row, col,
                dst.shape_str());
}

void check_blend_rows(const Tensor& a, int64_t a_row, const Tensor& b, int64_t b_row,
                      int64_t extent) {
  AVDIT_REQUIRE(a.ndim() == 3 && b.ndim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(2),
                "blend_rows: a {} and b {} must be 3-D with the same outer and column sizes",
                a.shape_str(), b.shape_str());
  AVDIT_REQUIRE(extent >= 0 && a_row >= 0 && b_row >= 0 && a_row + extent <= a.size(1) &&
                    b_row + extent <= b.size(1),
                "blend_rows: {} rows from {} of a {} onto {} of b {} leave a tensor", extent, a_row,
                a.shape_str(), b_row, b.shape_str());
}

}  // namespace avdit::ops
