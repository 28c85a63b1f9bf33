// range_stats on the GPU (see ops/range_stats.h): a grid-stride pass over x in 16-byte loads, each
// block reducing its largest finite |x|, its non-finite count and its smallest non-finite index,
// then one atomic each into the slot's scratch words (a max of non-negative float bits, a 64-bit
// add, a 64-bit max of the complemented index: all commute, so every run gives the same answer);
// the last block to finish turns the scratch into the slot's floats. No host synchronisation.
// Plain CUDA (16-bit values widened by bit shifts and __half2float), so it builds for sm_70.
#include <cuda_fp16.h>

#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/range_stats.h"

namespace avdit::cuda {
namespace {

using u64 = unsigned long long;

// The slot's words while the kernel runs: [0] max |x| bits, [2..3] non-finite count, [4..5] ~(first
// non-finite flat index) (0: none yet), [6] blocks done.
constexpr int kMaxWord = 0, kCountWord = 2, kFirstWord = 4, kDoneWord = 6;

struct Acc {
  float max_abs = 0.f;
  u64 count = 0, first = ~0ull;
};

__device__ __forceinline__ void take(Acc& a, float v, int64_t i) {
  if (isfinite(v)) {
    a.max_abs = fmaxf(a.max_abs, fabsf(v));
  } else {
    ++a.count;
    a.first = min(a.first, static_cast<u64>(i));
  }
}

// One element from its bits: F32 (kind 0), BF16 (1: the high half of a float), F16 (2).
template <int kKind>
__device__ __forceinline__ float widen(uint32_t bits) {
  if constexpr (kKind == 0) return __uint_as_float(bits);
  if constexpr (kKind == 1) return __uint_as_float(bits << 16);
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

template <int kKind>
__device__ __forceinline__ float load_one(const void* x, int64_t i) {
  if constexpr (kKind == 0) return static_cast<const float*>(x)[i];
  return widen<kKind>(static_cast<const unsigned short*>(x)[i]);
}

__device__ __forceinline__ void merge(Acc& a, float m, u64 c, u64 f) {
  a.max_abs = fmaxf(a.max_abs, m);
  a.count += c;
  a.first = min(a.first, f);
}

// vectors: how many 16-byte vectors to read as such (0 when x is not 16-byte aligned); the rest
// element by element.
template <int kKind>
__global__ void range_stats_kernel(const void* x, int64_t n, int64_t vectors, int64_t width,
                                   uint32_t* slot) {
  constexpr int kPer = kKind == 0 ? 4 : 8;
  Acc a;
  const uint4* xv = static_cast<const uint4*>(x);
  for (int64_t v = first_of(); v < vectors; v += stride_of()) {
    const uint4 q = xv[v];
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    const int64_t base = v * kPer;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (kKind == 0) {
        take(a, widen<0>(w[k]), base + k);
      } else {
        take(a, widen<kKind>(w[k] & 0xffffu), base + 2 * k);
        take(a, widen<kKind>(w[k] >> 16), base + 2 * k + 1);
      }
    }
  }
  for (int64_t i = vectors * kPer + first_of(); i < n; i += stride_of())
    take(a, load_one<kKind>(x, i), i);

  // The block's answer: within each warp, then across the warps through shared memory.
  for (int off = 16; off > 0; off >>= 1)
    merge(a, __shfl_down_sync(0xffffffffu, a.max_abs, off),
          __shfl_down_sync(0xffffffffu, a.count, off), __shfl_down_sync(0xffffffffu, a.first, off));
  __shared__ float s_max[32];
  __shared__ u64 s_count[32], s_first[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  if (lane == 0) s_max[warp] = a.max_abs, s_count[warp] = a.count, s_first[warp] = a.first;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < warps; ++w) merge(a, s_max[w], s_count[w], s_first[w]);

  u64* count = reinterpret_cast<u64*>(slot + kCountWord);
  u64* first = reinterpret_cast<u64*>(slot + kFirstWord);
  if (a.max_abs > 0.f) atomicMax(slot + kMaxWord, __float_as_uint(a.max_abs));
  if (a.count) {
    atomicAdd(count, a.count);
    atomicMax(first, ~a.first);
  }
  __threadfence();
  if (atomicAdd(slot + kDoneWord, 1u) != gridDim.x - 1) return;
  // The last block: every other block's atomics are done; read them back atomically.
  __threadfence();
  const float max_abs = __uint_as_float(atomicOr(slot + kMaxWord, 0u));
  const u64 total = atomicAdd(count, 0ull);
  const u64 first_index = ~atomicAdd(first, 0ull);
  float* out = reinterpret_cast<float*>(slot);
  out[0] = max_abs;
  out[1] = static_cast<float>(total);
  out[2] = total ? static_cast<float>(first_index / static_cast<u64>(width)) : -1.f;
  for (int k = 3; k < avdit::ops::kRangeSlotWidth; ++k) out[k] = 0.f;
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void range_stats(CudaContext& c, const Tensor& x, Tensor& slot) {
  check_range_stats(x, slot);
  // An empty tensor has no device memory (upload keeps it undefined): the kernel runs over no
  // element and writes the slot's empty answer.
  const bool empty = x.numel() == 0;
  if (!empty) c.require_here(x, "range_stats x");
  c.require_here(slot, "range_stats slot");
  AVDIT_CHECK(reinterpret_cast<uintptr_t>(slot.raw()) % 8 == 0,
              "range_stats: the slot is not 8-byte aligned (take a row of an [n, {}] tensor)",
              kRangeSlotWidth);
  const int64_t n = x.numel();
  const int64_t width = std::max<int64_t>(1, x.ndim() == 0 ? 1 : x.shape().back());
  const int kind = x.dtype() == DType::F32 ? 0 : x.dtype() == DType::BF16 ? 1 : 2;
  const int64_t per = kind == 0 ? 4 : 8;
  const void* xp = empty ? nullptr : x.raw();
  const bool aligned = reinterpret_cast<uintptr_t>(xp) % 16 == 0;
  const int64_t vectors = aligned ? n / per : 0;
  // Enough blocks to fill the device (8 of 256 threads per SM), no more: each block makes one
  // atomic per word, and a thread reads many vectors.
  const int64_t cap = int64_t{8} * c.dev().props().multiProcessorCount;
  const unsigned blocks = static_cast<unsigned>(
      std::clamp<int64_t>((std::max(vectors, n - vectors * per) + kThreads - 1) / kThreads, 1,
                          std::max<int64_t>(cap, 1)));
  auto* s = static_cast<uint32_t*>(device_ptr(slot));
  switch (kind) {
    case 0:
      range_stats_kernel<0><<<blocks, kThreads, 0, c.stream()>>>(xp, n, vectors, width, s);
      break;
    case 1:
      range_stats_kernel<1><<<blocks, kThreads, 0, c.stream()>>>(xp, n, vectors, width, s);
      break;
    default:
      range_stats_kernel<2><<<blocks, kThreads, 0, c.stream()>>>(xp, n, vectors, width, s);
      break;
  }
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
