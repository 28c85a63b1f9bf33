// The step cache's L1 sums on the device (see ops/step_residual.h): one float64
// partial per block of a grid fixed by the element count, added on the host in block order, so
// the answer is the same every run.
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/step_residual.h"

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;
namespace {

constexpr unsigned kMaxL1Blocks = 1024;

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
