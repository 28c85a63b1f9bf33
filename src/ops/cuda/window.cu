// The window moves and cross-fades on the GPU (ops/window.h): one thread per element of the window
// in a grid-stride loop. The blend multiplies and adds with explicit round-to-nearest intrinsics,
// so no FMA contraction departs from the CPU's (and torch's) separately rounded products.
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/window.h"

namespace avdit::cuda {
namespace {

__global__ void copy_window_kernel(const void* src, Elt st, int64_t R, int64_t C, int64_t r0,
                                   int64_t c0, void* dst, Elt dt, int64_t Rd, int64_t Cd,
                                   int64_t row, int64_t col, int64_t rows, int64_t cols,
                                   int64_t n) {
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t j = i % cols, r = (i / cols) % rows, o = i / (cols * rows);
    store_elt(dst, dt, (o * Rd + row + r) * Cd + col + j,
              load_elt(src, st, (o * R + r0 + r) * C + c0 + j));
  }
}

__global__ void blend_rows_kernel(const void* a, Elt at, int64_t Ra, int64_t a_row, void* b, Elt bt,
                                  int64_t Rb, int64_t b_row, int64_t C, int64_t extent, int64_t n) {
  const float e = static_cast<float>(extent);
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t c = i % C, k = (i / C) % extent, o = i / (C * extent);
    const float wb = __fdiv_rn(static_cast<float>(k), e), wa = __fsub_rn(1.0f, wb);
    const int64_t ib = (o * Rb + b_row + k) * C + c;
    const float x = __fmul_rn(load_elt(a, at, (o * Ra + a_row + k) * C + c), wa);
    const float y = __fmul_rn(load_elt(b, bt, ib), wb);
    store_elt(b, bt, ib, __fadd_rn(x, y));
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void copy_window(CudaContext& c, const Tensor& src, const Window& from, Tensor& dst, int64_t row,
                 int64_t col) {
  c.require_here(src, "copy_window src");
  c.require_here(dst, "copy_window dst");
  check_copy_window(src, from, dst, row, col);
  const int64_t n = src.size(0) * from.rows * from.cols;
  if (n == 0) return;
  copy_window_kernel<<<grid_for(n), kThreads, 0, c.stream()>>>(
      src.raw(), elt_of(src, "copy_window src"), src.size(1), src.size(2), from.row, from.col,
      device_ptr(dst), elt_of(dst, "copy_window dst"), dst.size(1), dst.size(2), row, col,
      from.rows, from.cols, n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void blend_rows(CudaContext& c, const Tensor& a, int64_t a_row, Tensor& b, int64_t b_row,
                int64_t extent) {
  c.require_here(a, "blend_rows a");
  c.require_here(b, "blend_rows b");
  check_blend_rows(a, a_row, b, b_row, extent);
  const int64_t n = a.size(0) * extent * a.size(2);
  if (n == 0) return;
  blend_rows_kernel<<<grid_for(n), kThreads, 0, c.stream()>>>(
      a.raw(), elt_of(a, "blend_rows a"), a.size(1), a_row, device_ptr(b),
      elt_of(b, "blend_rows b"), b.size(1), b_row, a.size(2), extent, n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
