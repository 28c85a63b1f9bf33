// Dtype conversion and row gathers on the device: the data movement the op set needs around the
// GEMMs (widening mixed-dtype GEMM operands, permuting tokens between packed and sorted order).
#include "backend/cuda/common.cuh"
#include "backend/cuda/ops_cuda.h"

namespace avdit::cuda {
namespace {

__global__ void cast_kernel(const void* x, Elt xt, void* y, Elt yt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    store_elt(y, yt, i, load_elt(x, xt, i));
}

__global__ void add_bias_kernel(const void* x, Elt xt, const void* bias, Elt bt, int64_t n_cols, void* y, Elt yt,
                                int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float b = bias ? load_elt(bias, bt, i % n_cols) : 0.f;
    store_elt(y, yt, i, load_elt(x, xt, i) + b);
  }
}

// Whole rows move as bytes: a gather never changes values.
__global__ void gather_rows_kernel(const char* x, const int* index, char* y, int64_t rows, int64_t src_rows,
                                   int64_t row_bytes, int* bad) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int src = index[r];
    if (src < 0 || src >= src_rows) {
      if (threadIdx.x == 0) *bad = 1;
      continue;
    }
    for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) y[r * row_bytes + b] = x[src * row_bytes + b];
  }
}

}  // namespace

Tensor cast(Device& dev, const Tensor& x, DType dtype) {
  require_cuda(x, "cast");
  const Elt xt = elt_of(x, "cast input");
  Tensor y = cuda_empty(dev, x.shape(), dtype);
  const Elt yt = elt_of(y, "cast output");
  if (x.numel() == 0) return y;
  cast_kernel<<<grid_for(x.numel()), kThreads, 0, dev.stream()>>>(x.raw(), xt, device_ptr(y), yt, x.numel());
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

Tensor add_bias(Device& dev, const Tensor& y, const Tensor* bias, DType out) {
  require_cuda(y, "add_bias");
  AVDIT_REQUIRE(y.ndim() >= 1, "add_bias: scalar input");
  const int64_t n_cols = y.size(-1);
  Elt bt = Elt::F32;
  if (bias) {
    require_cuda(*bias, "add_bias bias");
    AVDIT_REQUIRE(bias->numel() == n_cols, "add_bias: bias {} for rows of {}", bias->shape_str(), n_cols);
    bt = elt_of(*bias, "add_bias bias");
  }
  Tensor o = cuda_empty(dev, y.shape(), out);
  if (y.numel() == 0) return o;
  add_bias_kernel<<<grid_for(y.numel()), kThreads, 0, dev.stream()>>>(
      y.raw(), elt_of(y, "add_bias"), bias ? bias->raw() : nullptr, bt, n_cols, device_ptr(o), elt_of(o, "add_bias out"),
      y.numel());
  AVDIT_CUDA_CHECK_LAUNCH();
  return o;
}

Tensor gather_rows(Device& dev, const Tensor& x, const Tensor& index) {
  require_cuda(x, "gather_rows");
  require_i32(index, "gather_rows index");
  AVDIT_REQUIRE(x.ndim() >= 1, "gather_rows: x must have a row dimension");
  Shape shape = x.shape();
  const int64_t src_rows = shape[0];
  shape[0] = index.numel();
  Tensor y = cuda_empty(dev, shape, x.dtype());
  if (y.numel() == 0) return y;
  const int64_t row_bytes = src_rows ? x.nbytes() / src_rows : 0;
  // An out-of-range index is a caller bug; it is reported (a flag read back) rather than read
  // out of bounds. The read-back synchronises, acceptable for a permutation done once per layer.
  Tensor bad = cuda_empty(dev, {1}, DType::I32);
  AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(bad), 0, sizeof(int), dev.stream()));
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(index.numel(), 65535));
  gather_rows_kernel<<<blocks, kThreads, 0, dev.stream()>>>(
      static_cast<const char*>(x.raw()), index.data<int32_t>(), static_cast<char*>(device_ptr(y)),
      index.numel(), src_rows, row_bytes, static_cast<int*>(device_ptr(bad)));
  AVDIT_CUDA_CHECK_LAUNCH();
  const Tensor bad_h = to_host(dev, bad);
  AVDIT_CHECK(bad_h.data<int32_t>()[0] == 0, "gather_rows: an index is outside [0, {})", src_rows);
  return y;
}

}  // namespace avdit::cuda
