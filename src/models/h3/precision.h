// Emulated bf16 production precision on the CPU: activations are rounded to bf16 wherever the
// reference's bf16 model holds them in bf16 (compute and accumulation stay fp32, as in its
// matmuls and RMSNorms); the fp32 islands are left alone. Off = the fp32 oracle.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"

namespace avdit::models::h3 {

struct Rounding {
  bool bf16 = false;

  // Rounds an owned F32 tensor in place (round to nearest even) and returns it.
  Tensor operator()(Tensor t) const {
    if (bf16) {
      float* p = t.f32();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
    }
    return t;
  }
  float operator()(float x) const { return bf16 ? bf16_to_f32(f32_to_bf16(x)) : x; }
};

}  // namespace avdit::models::h3
