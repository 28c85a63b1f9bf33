// Pieces shared by the MoE kernel files (moe.cu, grouped.cu); not part of the interface.
#pragma once

#include <cuda_bf16.h>

#include <cub/block/block_scan.cuh>

#include "ops/cuda/moe/moe.h"

namespace avdit::cuda::moe {

constexpr int kMaxExperts = 256;  // experts per head the top-K kernel holds (8 per lane of a warp)
constexpr int kMaxTopK = 16;      // <= 32: one lane per choice in the top-K and combine warps

// swiglu7 as the CPU (ops/cpu/activation.cpp): g' = min(g, 7), l' = clamp(l, -7, 7), g'
// sigmoid(1.702 g') (l' + 1); accurate expf so that the fp32 path tracks the CPU.
__device__ __forceinline__ float swiglu7_f(float g, float l) {
  const float gc = fminf(g, 7.0f);
  const float lc = fminf(fmaxf(l, -7.0f), 7.0f);
  return gc * (1.0f / (1.0f + expf(-(1.702f * gc)))) * (lc + 1.0f);
}

// swiglu7 for the Hopper kernels' epilogues (bf16 output only), in few instructions: exp(-1.702 g)
// as one ex2.approx (MUFU, relative error near 2^-22, far below the bf16 rounding of h that
// follows) of g times the folded constant -1.702 log2(e); the reciprocal by rcp.approx; no
// underflow branch (g <= 7 after the clamp puts the argument above -17.2, and a very negative g
// gives ex2 = +inf, rcp = +0, h = 0 as the accurate form); g (l + 1) as one fma.
__device__ __forceinline__ float swiglu7_lean_f(float g, float l) {
  const float gc = fminf(g, 7.0f);
  const float lc = fminf(fmaxf(l, -7.0f), 7.0f);
  float e, sig;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(gc * -2.4554669595930157f));  // -1.702 * log2(e)
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(sig) : "f"(1.0f + e));
  return fmaf(gc, lc, gc) * sig;
}

// A read-only device pointer. Tensor::data<T>() on a non-const handle asks for write access, which
// the device tensors (wrapped read-only, see device.h) refuse; kernels write through device_ptr().
template <class T>
inline const T* cptr(const Tensor& t) {
  return static_cast<const T*>(t.raw());
}

// Row tiles of BM rows over the groups' row ranges [offsets[g], offsets[g+1]) in group order, in
// two steps (moe.cu's permutation table, BM 64; the fused experts kernel's units, BM 128): one
// block scans the per-group tile counts into tile_base [G + 1] (tile_base[G] = the total, also into
// *count), then every thread writes tiles at once - tile j finds its group by a binary search in
// tile_base (a one-block table that also wrote the tiles, each thread its groups' tiles one by one,
// was slow at large T).
constexpr int kTileScanThreads = 1024;
__global__ void __launch_bounds__(kTileScanThreads)
    tile_scan_kernel(const int* offsets, int G, int BM, int* tile_base, int* count);
// out(j, g, m): tile j is tile m of group g (its first row offsets[g] + m * BM); j < max_tiles.
template <class Out>
__global__ void tile_fill_kernel(const int* offsets, const int* tile_base, int G, int64_t max_tiles,
                                 Out out) {
  const int64_t total = tile_base[G];
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < max_tiles && j < total;
       j += int64_t{gridDim.x} * blockDim.x) {
    int lo = 0,
        hi = G -
             1;  // the last group whose first tile is <= j: empty groups before it share its base
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (tile_base[mid] <= j)
        lo = mid;
      else
        hi = mid - 1;
    }
    out(j, lo, static_cast<int>(j - tile_base[lo]));
  }
}

void check_config(const RouterConfig& cfg);
// The fused router kernel (router.cu) on checked operands: indices and weights [T, heads, K], and
// the [T, heads, E] logits when `logits` is not null. BF16 x on sm_80+ takes the tensor-core kernel
// unless `allow_tensor_cores` is false (the tests compare the two); returns whether it did. gap
// (not null): [T, heads], the K-th minus the (K+1)-th biased score of each (token, head).
bool launch_router(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias,
                   const RouterConfig& cfg, int64_t T, int* idx, float* w, float* logits,
                   float* gap, bool allow_tensor_cores);
bool launch_router(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias,
                   const RouterConfig& cfg, int64_t T, int* idx, float* w, float* logits,
                   bool allow_tensor_cores = true);
void check_weights(const ExpertWeights& w, const RouterConfig& cfg);
int64_t expert_inter(const ExpertWeights& w);

}  // namespace avdit::cuda::moe
