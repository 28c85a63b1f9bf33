// 8 elements at once as fp32: 16-byte loads and stores of BF16 / F16 (one vector) or F32 (two), for
// the memory-bound element-wise kernels, whose 2-byte scalar accesses leave most of each
// transaction's width unused. `i` counts vectors of 8; the pointer must be 16-byte aligned. Stores
// round to nearest even, as store_elt does.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace avdit::cuda {

template <class T>
__device__ __forceinline__ void load8(const T* p, int64_t i, float (&v)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 x = reinterpret_cast<const float4*>(p)[2 * i];
    const float4 z = reinterpret_cast<const float4*>(p)[2 * i + 1];
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = z.x, v[5] = z.y, v[6] = z.z, v[7] = z.w;
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>);
    const uint4 x = reinterpret_cast<const uint4*>(p)[i];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 f;
      if constexpr (std::is_same_v<T, __nv_bfloat16>)
        f = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(&x)[k]);
      else
        f = __half22float2(reinterpret_cast<const __half2*>(&x)[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  }
}

template <class T>
__device__ __forceinline__ void store8(T* p, int64_t i, const float (&v)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(p)[2 * i] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[2 * i + 1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>);
    uint4 x;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>)
        reinterpret_cast<__nv_bfloat162*>(&x)[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
      else
        reinterpret_cast<__half2*>(&x)[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
    }
    reinterpret_cast<uint4*>(p)[i] = x;
  }
}

}  // namespace avdit::cuda
