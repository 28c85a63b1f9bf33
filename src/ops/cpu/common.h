// Helpers of the CPU ops: operands are widened to float32 (a copy only when they are not F32
// already), results rounded once into the output's dtype.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace avdit::ops::cpu {

// x as F32 on the host (x itself when it is F32).
inline Tensor f32(const Tensor& x) {
  AVDIT_CHECK(x.device() == Device::CPU, "a CUDA tensor reached a CPU op");
  return x.to_f32();
}

// Writes n float32 values into y (any float dtype), rounding to nearest even.
inline void store(Tensor& y, const float* src) {
  AVDIT_CHECK(y.device() == Device::CPU, "a CUDA tensor reached a CPU op");
  if (y.dtype() == DType::F32) {
    float* dst = y.f32();
    if (dst != src) std::copy(src, src + y.numel(), dst);
    return;
  }
  convert(src, DType::F32, y.mutable_raw(), y.dtype(), y.numel());
}

// The value v rounded to dtype (identity for F32): a rounding point of the reference's bf16 ops.
inline float round_to(DType dtype, float v) {
  switch (dtype) {
    case DType::BF16: return bf16_to_f32(f32_to_bf16(v));
    case DType::F16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

// I32 (or I64) index tensor as int64 values.
inline int64_t index_at(const Tensor& index, int64_t i) {
  return index.dtype() == DType::I32 ? index.data<int32_t>()[i] : index.data<int64_t>()[i];
}

}  // namespace avdit::ops::cpu
