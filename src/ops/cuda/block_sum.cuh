// The block-wide float sum of the row kernels (modulation.cu, modulation_f16.cu): a warp
// butterfly, then warp 0 over the warp sums, in a fixed order (the same bits every run). Every
// thread of a block of kThreads (a multiple of 32, at most 1024) gets the total; scratch holds
// kThreads / 32 floats.
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

}  // namespace avdit::cuda
