// The window moves and cross-fades on the CPU (ops/window.h): plain loops, float32.
#include <vector>

#include "ops/cpu/common.h"
#include "ops/window.h"

namespace avdit::ops::cpu {

void copy_window(const Tensor& src_in, const Window& from, Tensor& dst, int64_t row, int64_t col) {
  check_copy_window(src_in, from, dst, row, col);
  const Tensor src = f32(src_in);
  const int64_t P = src.size(0), R = src.size(1), C = src.size(2), Rd = dst.size(1),
                Cd = dst.size(2);
  std::vector<float> line(static_cast<size_t>(from.cols));
  for (int64_t o = 0; o < P; ++o)
    for (int64_t i = 0; i < from.rows; ++i) {
      const float* s = src.f32() + (o * R + from.row + i) * C + from.col;
      const int64_t at = (o * Rd + row + i) * Cd + col;
      if (dst.dtype() == DType::F32) {
        std::copy(s, s + from.cols, dst.f32() + at);
      } else {
        convert(s, DType::F32,
                static_cast<char*>(dst.mutable_raw()) + dtype_nbytes(dst.dtype(), at), dst.dtype(),
                from.cols);
      }
    }
}

void blend_rows(const Tensor& a_in, int64_t a_row, Tensor& b, int64_t b_row, int64_t extent) {
  check_blend_rows(a_in, a_row, b, b_row, extent);
  const Tensor a = f32(a_in);
  Tensor b32 = b.dtype() == DType::F32 ? b : b.to_f32();
  const int64_t P = a.size(0), Ra = a.size(1), Rb = b.size(1), C = a.size(2);
  const float e = static_cast<float>(extent);
  for (int64_t o = 0; o < P; ++o)
    for (int64_t k = 0; k < extent; ++k) {
      const float wb = static_cast<float>(k) / e, wa = 1.0f - wb;
      const float* pa = a.f32() + (o * Ra + a_row + k) * C;
      float* pb = b32.f32() + (o * Rb + b_row + k) * C;
      for (int64_t c = 0; c < C; ++c) {
        // Each product rounded before the sum, as torch's separate multiplies and add.
        const volatile float x = pa[c] * wa;
        const volatile float y = pb[c] * wb;
        pb[c] = x + y;
      }
    }
  if (b32.raw() != b.raw()) store(b, b32.f32());
}

}  // namespace avdit::ops::cpu
