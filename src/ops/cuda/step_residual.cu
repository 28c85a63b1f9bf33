// Step-cache residual arithmetic on the device (see ops/step_residual.h). The L1 sums: one float64
// partial per block of a grid fixed by the element count, added on the host in block order, so
// the answer is the same every run.
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/step_residual.h"

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;
namespace {

constexpr unsigned kMaxL1Blocks = 1024;

__global__ void residual_sub_kernel(const void* a, Elt ta, const void* b, Elt tb, float* out,
                                    int64_t n) {
  for (int64_t i = first_of(); i < n; i += stride_of())
    out[i] = __fsub_rn(load_elt(a, ta, i), load_elt(b, tb, i));
}

__global__ void residual_add_kernel(const void* a, Elt ta, const float* r, void* out, Elt to,
                                    int64_t n) {
  for (int64_t i = first_of(); i < n; i += stride_of())
    store_elt(out, to, i, __fadd_rn(load_elt(a, ta, i), r[i]));
}

__global__ void l1_sums_kernel(const void* a, Elt ta, const void* b, Elt tb, int64_t n,
                               double* partial) {
  __shared__ double diff[kThreads], base[kThreads];
  double d = 0, s = 0;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const double y = load_elt(b, tb, i);
    d += fabs(double(load_elt(a, ta, i)) - y);
    s += fabs(y);
  }
  diff[threadIdx.x] = d;
  base[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      diff[threadIdx.x] += diff[threadIdx.x + half];
      base[threadIdx.x] += base[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = diff[0];
    partial[2 * blockIdx.x + 1] = base[0];
  }
}

void require_operand(CudaContext& c, const Tensor& t, int64_t n, const char* what) {
  c.require_here(t, what);
  AVDIT_CHECK(t.numel() == n, "{}: {} elements, expected {}", what, t.numel(), n);
}

}  // namespace

void residual_sub(CudaContext& c, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  require_operand(c, a, n, "residual_sub a");
  require_operand(c, b, n, "residual_sub b");
  require_operand(c, out, n, "residual_sub out");
  AVDIT_CHECK(out.dtype() == DType::F32, "residual_sub: the residual is F32, found {}",
              dtype_name(out.dtype()));
  if (n == 0) return;
  residual_sub_kernel<<<grid_for(n), kThreads, 0, c.stream()>>>(
      a.raw(), elt_of(a, "residual_sub a"), b.raw(), elt_of(b, "residual_sub b"),
      static_cast<float*>(out.mutable_raw()), n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void residual_add(CudaContext& c, const Tensor& a, const Tensor& r, Tensor& out) {
  const int64_t n = out.numel();
  require_operand(c, a, n, "residual_add a");
  require_operand(c, r, n, "residual_add r");
  require_operand(c, out, n, "residual_add out");
  AVDIT_CHECK(r.dtype() == DType::F32, "residual_add: the residual is F32, found {}",
              dtype_name(r.dtype()));
  if (n == 0) return;
  residual_add_kernel<<<grid_for(n), kThreads, 0, c.stream()>>>(
      a.raw(), elt_of(a, "residual_add a"), static_cast<const float*>(r.raw()), out.mutable_raw(),
      elt_of(out, "residual_add out"), n);
  AVDIT_CUDA_CHECK_LAUNCH();
}

L1Sums l1_sums(CudaContext& c, const Tensor& a, const Tensor& b) {
  const int64_t n = b.numel();
  require_operand(c, a, n, "l1_sums a");
  require_operand(c, b, n, "l1_sums b");
  L1Sums s;
  if (n == 0) return s;
  const unsigned blocks = std::min(grid_for(n), kMaxL1Blocks);
  StreamBuffer buf(c.stream(), 2 * sizeof(double) * blocks);
  l1_sums_kernel<<<blocks, kThreads, 0, c.stream()>>>(a.raw(), elt_of(a, "l1_sums a"), b.raw(),
                                                      elt_of(b, "l1_sums b"), n,
                                                      static_cast<double*>(buf.p));
  AVDIT_CUDA_CHECK_LAUNCH();
  std::vector<double> partial(2 * blocks);
  AVDIT_CUDA_CHECK(cudaMemcpyAsync(partial.data(), buf.p, partial.size() * sizeof(double),
                                   cudaMemcpyDeviceToHost, c.stream()));
  AVDIT_CUDA_CHECK(cudaStreamSynchronize(c.stream()));
  for (unsigned k = 0; k < blocks; ++k) {
    s.diff += partial[2 * k];
    s.base += partial[2 * k + 1];
  }
  return s;
}

}  // namespace avdit::ops::cuda
