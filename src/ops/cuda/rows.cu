// Row and column moves, casts and fills on the device (see ops/rows.h). Rows that move unchanged
// move as bytes; a change of dtype goes through fp32 with one rounding.
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/rows.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::grid_for;
using ::avdit::cuda::kThreads;
using ::avdit::cuda::load_elt;
using ::avdit::cuda::store_elt;

__global__ void cast_kernel(const void* x, Elt xt, void* y, Elt yt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    store_elt(y, yt, i, load_elt(x, xt, i));
}

// Row r of out = row index[r] of x (bytes); mask (may be null) zeroes rows whose mask byte is 0.
__global__ void gather_rows_kernel(const char* x, const int* index, const uint8_t* mask, char* y,
                                   int64_t rows, int64_t row_bytes) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bool keep = mask == nullptr || mask[r] != 0;
    const char* src = x + int64_t{index[r]} * row_bytes;
    char* dst = y + r * row_bytes;
    if (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
        reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
      for (int64_t b = threadIdx.x; b < row_bytes / 16; b += blockDim.x)
        reinterpret_cast<uint4*>(dst)[b] =
            keep ? reinterpret_cast<const uint4*>(src)[b] : make_uint4(0, 0, 0, 0);
    } else {
      for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) dst[b] = keep ? src[b] : 0;
    }
  }
}

// dst[index[i], c] = src[i, c] with a dtype change.
__global__ void scatter_rows_kernel(const void* src, Elt st, const int* index, void* dst, Elt dt,
                                    int64_t W) {
  const int64_t i = blockIdx.x, d = index[i];
  for (int64_t c = threadIdx.x; c < W; c += blockDim.x)
    store_elt(dst, dt, d * W + c, load_elt(src, st, i * W + c));
}

__global__ void copy_columns_kernel(const void* src, Elt st, int64_t sw, int64_t sc, void* dst,
                                    Elt dt, int64_t dw, int64_t dc, int64_t rows, int64_t width) {
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    store_elt(dst, dt, r * dw + dc + c, load_elt(src, st, r * sw + sc + c));
  }
}

template <int E>
struct Elem;
template <>
struct Elem<2> {
  using T = uint16_t;
};
template <>
struct Elem<4> {
  using T = uint32_t;
};
template <>
struct Elem<8> {
  using T = uint64_t;
};

template <int E>
__global__ void gather_elements_kernel(const void* x, const int* index, void* y, int64_t n) {
  using T = typename Elem<E>::T;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    static_cast<T*>(y)[i] = static_cast<const T*>(x)[index[i]];
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, int64_t{1} << 20));
}

void check_index(CudaContext& c, const Tensor& index, int64_t n, const char* what) {
  c.require_here(index, what);
  AVDIT_CHECK(index.dtype() == DType::I32 && index.numel() == n, "{}: expected I32 [{}], got {} {}",
              what, n, dtype_name(index.dtype()), index.shape_str());
}

}  // namespace

Tensor cast(CudaContext& c, const Tensor& x, DType dtype) {
  c.require_here(x, "cast");
  Tensor y = c.empty(x.shape(), dtype);
  const Elt xt = elt_of(x, "cast input"), yt = elt_of(y, "cast output");
  if (x.numel() == 0) return y;
  cast_kernel<<<grid_for(x.numel()), kThreads, 0, c.stream()>>>(
      x.raw(), xt, ::avdit::cuda::device_ptr(y), yt, x.numel());
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

void gather_rows(CudaContext& c, const Tensor& x, const Tensor& index, Tensor& out) {
  c.require_here(x, "gather_rows x");
  AVDIT_CHECK(out.dtype() == x.dtype() && out.numel() * x.size(0) == x.numel() * out.size(0),
              "gather_rows: out {} {} for x {} {}", dtype_name(out.dtype()), out.shape_str(),
              dtype_name(x.dtype()), x.shape_str());
  check_index(c, index, out.size(0), "gather_rows index");
  const int64_t rows = out.size(0);
  if (rows == 0 || out.numel() == 0) return;
  const int64_t rb = out.nbytes() / rows;
  gather_rows_kernel<<<row_grid(rows), 128, 0, c.stream()>>>(
      static_cast<const char*>(x.raw()), index.data<int32_t>(), nullptr,
      static_cast<char*>(::avdit::cuda::device_ptr(out)), rows, rb);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void scatter_rows(CudaContext& c, const Tensor& src, const Tensor& index, Tensor& dst) {
  c.require_here(src, "scatter_rows src");
  const int64_t n = src.size(0), W = n ? src.numel() / n : 0;
  AVDIT_CHECK(dst.numel() == dst.size(0) * W, "scatter_rows: src {} into dst {}", src.shape_str(),
              dst.shape_str());
  check_index(c, index, n, "scatter_rows index");
  if (n == 0 || W == 0) return;
  scatter_rows_kernel<<<static_cast<unsigned>(n), 256, 0, c.stream()>>>(
      src.raw(), elt_of(src, "scatter_rows src"), index.data<int32_t>(),
      ::avdit::cuda::device_ptr(dst), elt_of(dst, "scatter_rows dst"), W);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void gather_rows_masked(CudaContext& c, const Tensor& src, const Tensor& index, const Tensor& mask,
                        Tensor& out) {
  c.require_here(src, "gather_rows_masked src");
  const int64_t n = out.size(0);
  AVDIT_CHECK(
      out.dtype() == src.dtype() && n > 0 ? src.numel() * n == out.numel() * src.size(0) : true,
      "gather_rows_masked: src {} out {}", src.shape_str(), out.shape_str());
  check_index(c, index, n, "gather_rows_masked index");
  c.require_here(mask, "gather_rows_masked mask");
  AVDIT_CHECK(mask.dtype() == DType::U8 && mask.numel() == n,
              "gather_rows_masked: mask {} for {} rows", mask.shape_str(), n);
  if (n == 0 || out.numel() == 0) return;
  gather_rows_kernel<<<row_grid(n), 128, 0, c.stream()>>>(
      static_cast<const char*>(src.raw()), index.data<int32_t>(), mask.data<uint8_t>(),
      static_cast<char*>(::avdit::cuda::device_ptr(out)), n, out.nbytes() / n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void copy_columns(CudaContext& c, const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col,
                  int64_t width) {
  c.require_here(src, "copy_columns src");
  c.require_here(dst, "copy_columns dst");
  AVDIT_CHECK(src.ndim() == 2 && dst.ndim() == 2 && src.size(0) == dst.size(0) && src_col >= 0 &&
                  dst_col >= 0 && width >= 0 && src_col + width <= src.size(1) &&
                  dst_col + width <= dst.size(1),
              "copy_columns: {} columns from {} at {} into {} at {}", width, src.shape_str(),
              src_col, dst.shape_str(), dst_col);
  const int64_t rows = src.size(0);
  if (rows == 0 || width == 0) return;
  if (src.dtype() == dst.dtype()) {
    const size_t es = static_cast<size_t>(dtype_nbytes(src.dtype(), 1));
    AVDIT_CUDA_CHECK(cudaMemcpy2DAsync(
        static_cast<char*>(::avdit::cuda::device_ptr(dst)) + dst_col * es, dst.size(1) * es,
        static_cast<const char*>(src.raw()) + src_col * es, src.size(1) * es, width * es,
        static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, c.stream()));
    return;
  }
  copy_columns_kernel<<<grid_for(rows * width), kThreads, 0, c.stream()>>>(
      src.raw(), elt_of(src, "copy_columns src"), src.size(1), src_col,
      ::avdit::cuda::device_ptr(dst), elt_of(dst, "copy_columns dst"), dst.size(1), dst_col, rows,
      width);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void copy_(CudaContext& c, Tensor& dst, const Tensor& src) {
  c.require_here(src, "copy_ src");
  c.require_here(dst, "copy_ dst");
  AVDIT_CHECK(dst.numel() == src.numel(), "copy_: {} into {}", src.shape_str(), dst.shape_str());
  if (src.numel() == 0 || dst.raw() == src.raw()) return;
  if (src.dtype() == dst.dtype()) {
    AVDIT_CUDA_CHECK(cudaMemcpyAsync(::avdit::cuda::device_ptr(dst), src.raw(),
                                     static_cast<size_t>(src.nbytes()), cudaMemcpyDeviceToDevice,
                                     c.stream()));
    return;
  }
  cast_kernel<<<grid_for(src.numel()), kThreads, 0, c.stream()>>>(
      src.raw(), elt_of(src, "copy_ src"), ::avdit::cuda::device_ptr(dst), elt_of(dst, "copy_ dst"),
      src.numel());
  AVDIT_CUDA_CHECK_LAUNCH();
}

void zero_(CudaContext& c, Tensor& t) {
  c.require_here(t, "zero_");
  if (t.nbytes() > 0)
    AVDIT_CUDA_CHECK(cudaMemsetAsync(::avdit::cuda::device_ptr(t), 0,
                                     static_cast<size_t>(t.nbytes()), c.stream()));
}

void gather_elements(CudaContext& c, const Tensor& x, const Tensor& index, Tensor& out) {
  c.require_here(x, "gather_elements x");
  AVDIT_CHECK(out.dtype() == x.dtype(), "gather_elements: out {} for x {}", dtype_name(out.dtype()),
              dtype_name(x.dtype()));
  check_index(c, index, out.numel(), "gather_elements index");
  const int64_t n = out.numel();
  if (n == 0) return;
  void* y = ::avdit::cuda::device_ptr(out);
  switch (dtype_nbytes(x.dtype(), 1)) {
    case 2:
      gather_elements_kernel<2>
          <<<grid_for(n), kThreads, 0, c.stream()>>>(x.raw(), index.data<int32_t>(), y, n);
      break;
    case 4:
      gather_elements_kernel<4>
          <<<grid_for(n), kThreads, 0, c.stream()>>>(x.raw(), index.data<int32_t>(), y, n);
      break;
    case 8:
      gather_elements_kernel<8>
          <<<grid_for(n), kThreads, 0, c.stream()>>>(x.raw(), index.data<int32_t>(), y, n);
      break;
    default:
      throw RuntimeFailure(
          fmt::format("gather_elements: dtype {} not supported", dtype_name(x.dtype())));
  }
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
