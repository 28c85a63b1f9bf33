// Block-wide reductions in a fixed order (the same bits every run); every thread of a block of
// kThreads (a multiple of 32, at most 1024) gets the result, scratch holds kThreads / 32 values.
// block_sum: the float sum of the row kernels (modulation.cu, modulation_f16.cu): a warp
// butterfly, then warp 0 over the warp sums. block_reduce: any associative op (a max, a float64
// sum; attention_gemm.cu, attention_mass.cu): the warp butterfly, then every thread folds the warp
// results in warp order.
#pragma once

namespace avdit::cuda {

template <int kThreads>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

template <int kThreads, class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T* scratch, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // the scratch may still be read by a previous reduction
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) v = op(v, scratch[w]);
  return v;
}

}  // namespace avdit::cuda
