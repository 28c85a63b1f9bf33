// Emulated bf16 production precision on the CPU, shared by the model families: activations are
// rounded to bf16 (nearest even) exactly where a reference's production dtypes hold bf16; compute
// and accumulation stay fp32 as in its matmuls and norms. Off (the default) = the fp32 oracle,
// every call an identity. Each family decides where it rounds.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"

namespace avdit::models {

struct Rounding {
  bool bf16 = false;

  // Rounds an owned F32 tensor in place and returns it (no copy, no change when off).
  Tensor operator()(Tensor t) const {
    if (bf16) {
      float* p = t.f32();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
    }
    return t;
  }
  float operator()(float x) const { return bf16 ? bf16_to_f32(f32_to_bf16(x)) : x; }
};

}  // namespace avdit::models
