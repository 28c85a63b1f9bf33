// Shared test helper: the fake-quantised twin of loaded MAGI-2 weights (each routed expert matrix
// replaced by the bf16 values of quantise -> dequantise), which the packed NVFP4 path must match bit for
// bit on the CPU (tests/unit/nvfp4_moe_test.cpp) and on the GPU (tests/gpu/nvfp4_moe_cuda_test.cpp).
#pragma once

#include "models/magi2/weights.h"
#include "quant/nvfp4.h"

namespace avdit::test_util {

inline models::magi2::Magi2Weights fake_quantised(models::magi2::Magi2Weights w) {
  for (models::magi2::LayerWeights& L : w.layers)
    for (models::magi2::MoeHeadExperts& h : L.moe_mlp.heads) {
      h.W_gate = quant::fake_quantize_nvfp4(h.W_gate);
      h.W_up = quant::fake_quantize_nvfp4(h.W_up);
      h.W_down = quant::fake_quantize_nvfp4(h.W_down);
    }
  return w;
}

}  // namespace avdit::test_util
