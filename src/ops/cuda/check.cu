// Non-finite values on the device (see ops/check.h): a grid-stride count with integer atomics (the
// same answer every run) and the smallest flat index by atomicMin.
#include "backend/cuda/context.h"
#include "ops/check.h"
#include "ops/cuda/common.cuh"

namespace avdit::ops::cuda {
namespace {

__global__ void nonfinite_kernel(const void* x, ::avdit::cuda::Elt t, int64_t n,
                                 unsigned long long* out) {
  unsigned long long count = 0, first = ~0ull;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    if (!isfinite(::avdit::cuda::load_elt(x, t, i))) {
      ++count;
      first = min(first, static_cast<unsigned long long>(i));
    }
  if (count) {
    atomicAdd(out, count);
    atomicMin(out + 1, first);
  }
}

}  // namespace

NonFinite count_nonfinite(CudaContext& c, const Tensor& t) {
  c.require_here(t, "count_nonfinite");
  NonFinite r;
  if (t.numel() == 0) return r;
  ::avdit::cuda::StreamBuffer buf(c.stream(), 2 * sizeof(unsigned long long));
  const unsigned long long init[2] = {0, ~0ull};
  AVDIT_CUDA_CHECK(cudaMemcpyAsync(buf.p, init, sizeof init, cudaMemcpyHostToDevice, c.stream()));
  nonfinite_kernel<<<::avdit::cuda::grid_for(t.numel()), ::avdit::cuda::kThreads, 0, c.stream()>>>(
      t.raw(), ::avdit::cuda::elt_of(t, "count_nonfinite"), t.numel(),
      static_cast<unsigned long long*>(buf.p));
  AVDIT_CUDA_CHECK_LAUNCH();
  unsigned long long got[2];
  AVDIT_CUDA_CHECK(cudaMemcpyAsync(got, buf.p, sizeof got, cudaMemcpyDeviceToHost, c.stream()));
  AVDIT_CUDA_CHECK(cudaStreamSynchronize(c.stream()));
  r.count = static_cast<int64_t>(got[0]);
  r.first = r.count ? static_cast<int64_t>(got[1]) : -1;
  return r;
}

}  // namespace avdit::ops::cuda
