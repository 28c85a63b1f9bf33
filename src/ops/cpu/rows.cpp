// Row and column moves, casts and fills on the CPU (see ops/rows.h).
#include <cstring>

#include "ops/cpu/common.h"
#include "ops/rows.h"

namespace avdit::ops::cpu {
namespace {

void check_index(const Tensor& index, int64_t n, int64_t rows, const char* what) {
  AVDIT_CHECK(index.dtype() == DType::I32 || index.dtype() == DType::I64,
              "{}: index must be I32, got {}", what, dtype_name(index.dtype()));
  AVDIT_CHECK(index.numel() == n, "{}: {} indices for {} rows", what, index.numel(), n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = index_at(index, i);
    AVDIT_CHECK(r >= 0 && r < rows, "{}: index {} at {} outside [0, {})", what, r, i, rows);
  }
}

}  // namespace

Tensor cast(const Tensor& x, DType dtype) { return x.to(dtype); }

void gather_rows(const Tensor& x, const Tensor& index, Tensor& out) {
  AVDIT_CHECK(out.dtype() == x.dtype() && out.numel() * x.size(0) == x.numel() * out.size(0),
              "gather_rows: out {} {} for x {} {}", dtype_name(out.dtype()), out.shape_str(),
              dtype_name(x.dtype()), x.shape_str());
  check_index(index, out.size(0), x.size(0), "gather_rows");
  const int64_t rb = out.size(0) ? out.nbytes() / out.size(0) : 0;
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.mutable_raw());
  for (int64_t i = 0; i < out.size(0); ++i)
    std::memcpy(dst + i * rb, src + index_at(index, i) * rb, rb);
}

void scatter_rows(const Tensor& src, const Tensor& index, Tensor& dst) {
  const int64_t n = src.size(0), W = src.numel() / std::max<int64_t>(n, 1);
  AVDIT_CHECK(dst.numel() == dst.size(0) * W, "scatter_rows: src {} into dst {}", src.shape_str(),
              dst.shape_str());
  check_index(index, n, dst.size(0), "scatter_rows");
  const Tensor s = f32(src);
  std::vector<float> row(static_cast<size_t>(W));
  const int64_t rb = dtype_nbytes(dst.dtype(), W);
  char* d = static_cast<char*>(dst.mutable_raw());
  for (int64_t i = 0; i < n; ++i)
    convert(s.f32() + i * W, DType::F32, d + index_at(index, i) * rb, dst.dtype(), W);
}

void gather_rows_masked(const Tensor& src, const Tensor& index, const Tensor& mask, Tensor& out) {
  const int64_t n = out.size(0), W = out.numel() / std::max<int64_t>(n, 1);
  AVDIT_CHECK(out.dtype() == src.dtype() && src.numel() == src.size(0) * W,
              "gather_rows_masked: src {} out {}", src.shape_str(), out.shape_str());
  AVDIT_CHECK(mask.dtype() == DType::U8 && mask.numel() == n,
              "gather_rows_masked: mask {} for {} rows", mask.shape_str(), n);
  check_index(index, n, src.size(0), "gather_rows_masked");
  const int64_t rb = dtype_nbytes(out.dtype(), W);
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(out.mutable_raw());
  for (int64_t i = 0; i < n; ++i) {
    if (mask.data<uint8_t>()[i])
      std::memcpy(d + i * rb, s + index_at(index, i) * rb, rb);
    else
      std::memset(d + i * rb, 0, rb);
  }
}

void copy_columns(const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col, int64_t width) {
  AVDIT_CHECK(src.ndim() == 2 && dst.ndim() == 2 && src.size(0) == dst.size(0) && src_col >= 0 &&
                  dst_col >= 0 && width >= 0 && src_col + width <= src.size(1) &&
                  dst_col + width <= dst.size(1),
              "copy_columns: {} columns from {} at {} into {} at {}", width, src.shape_str(),
              src_col, dst.shape_str(), dst_col);
  const Tensor s = f32(src);
  const int64_t rows = src.size(0), sw = src.size(1), dw = dst.size(1);
  char* d = static_cast<char*>(dst.mutable_raw());
  for (int64_t r = 0; r < rows; ++r)
    convert(s.f32() + r * sw + src_col, DType::F32, d + dtype_nbytes(dst.dtype(), r * dw + dst_col),
            dst.dtype(), width);
}

void copy_(Tensor& dst, const Tensor& src) {
  AVDIT_CHECK(dst.numel() == src.numel(), "copy_: {} into {}", src.shape_str(), dst.shape_str());
  if (dst.dtype() == src.dtype()) {
    if (dst.raw() != src.raw())
      std::memcpy(dst.mutable_raw(), src.raw(), static_cast<size_t>(src.nbytes()));
    return;
  }
  const Tensor s = f32(src);
  store(dst, s.f32());
}

void zero_(Tensor& t) { std::memset(t.mutable_raw(), 0, static_cast<size_t>(t.nbytes())); }

void gather_elements(const Tensor& x, const Tensor& index, Tensor& out) {
  AVDIT_CHECK(out.dtype() == x.dtype() && index.numel() == out.numel(),
              "gather_elements: {} indices for out {}", index.numel(), out.shape_str());
  const int64_t es = dtype_nbytes(x.dtype(), 1), n = out.numel(), nx = x.numel();
  const char* s = static_cast<const char*>(x.raw());
  char* d = static_cast<char*>(out.mutable_raw());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = index_at(index, i);
    AVDIT_CHECK(j >= 0 && j < nx, "gather_elements: index {} outside [0, {})", j, nx);
    std::memcpy(d + i * es, s + j * es, static_cast<size_t>(es));
  }
}

}  // namespace avdit::ops::cpu
