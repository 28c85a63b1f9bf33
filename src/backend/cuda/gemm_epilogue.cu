// The epilogue of the GEMM fallback (cublasGemmEx into fp32): bias, C and the output cast.
#include "backend/cuda/gemm.h"
#include "ops/cuda/common.cuh"

namespace avdit::cuda {
namespace {

__global__ void epilogue_kernel(const float* y, const void* bias, const void* c, void* d, Elt t,
                                int64_t M, int64_t N, int64_t ldd) {
  const int64_t n = M * N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / N, j = i % N;
    float v = y[i];
    if (bias) v += load_elt(bias, t, j);
    if (c) v += load_elt(c, t, m * ldd + j);
    store_elt(d, t, m * ldd + j, v);
  }
}

}  // namespace

void gemm_epilogue(cudaStream_t st, const float* y, const void* bias, const void* c, void* d,
                   DType dtype, int64_t M, int64_t N, int64_t ldd) {
  const Elt t = dtype == DType::F32 ? Elt::F32 : dtype == DType::BF16 ? Elt::BF16 : Elt::F16;
  if (M * N == 0) return;
  epilogue_kernel<<<grid_for(M * N), kThreads, 0, st>>>(y, bias, c, d, t, M, N, ldd);
}

}  // namespace avdit::cuda
