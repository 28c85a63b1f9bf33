// Shared kernel helpers: fp32 loads and stores of F32 / BF16 / F16 elements chosen at run time
// (one uniform branch per access, instead of a template instantiation per dtype combination),
// launch sizing, and the host-side checks every op makes on its operands.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.h"

namespace avdit::cuda {

enum class Elt : int { F32 = 0, BF16 = 1, F16 = 2 };

__device__ __forceinline__ float load_elt(const void* p, Elt t, int64_t i) {
  switch (t) {
    case Elt::F32: return static_cast<const float*>(p)[i];
    case Elt::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return __half2float(static_cast<const __half*>(p)[i]);
  }
}

__device__ __forceinline__ void store_elt(void* p, Elt t, int64_t i, float v) {
  switch (t) {
    case Elt::F32: static_cast<float*>(p)[i] = v; break;
    case Elt::BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
  }
}

// Accurate (not __expf) so that the fp32 kernels track the CPU oracle closely.
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

// The dtype code of a float operand; BadInput for other dtypes.
inline Elt elt_of(const Tensor& t, const char* what) {
  switch (t.dtype()) {
    case DType::F32: return Elt::F32;
    case DType::BF16: return Elt::BF16;
    case DType::F16: return Elt::F16;
    default:
      throw BadInput(fmt::format("{}: dtype {} not supported on CUDA (F32, BF16, F16)", what,
                                 dtype_name(t.dtype())));
  }
}

inline void require_i32(const Tensor& t, const char* what) {
  require_cuda(t, what);
  AVDIT_REQUIRE(t.dtype() == DType::I32, "{}: expected an I32 index tensor, got {}", what,
                dtype_name(t.dtype()));
}

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (capped: each thread then loops).
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20));
}

#ifdef __CUDACC__
// The first index and the stride of a grid-stride loop.
__device__ __forceinline__ int64_t first_of() {
  return blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
}
__device__ __forceinline__ int64_t stride_of() { return int64_t{gridDim.x} * blockDim.x; }
#endif

}  // namespace avdit::cuda
