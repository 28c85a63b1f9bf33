// NVFP4 fake quantisation of activations, to measure what NVFP4 GEMM inputs would cost (generate
// --nvfp4-expert-inputs, scored by `avdit score`): a dynamic per-tensor scale (the global scale of
// the tensor's amax at run time) and one e4m3 scale per 16 consecutive values along the GEMM's
// reduction dimension, with the weights' scalar recipe (quant/nvfp4.h), decoded back to float32.
#pragma once

#include <cstdint>

namespace avdit::quant {

// The encode scale S of n values: nvfp4_global_scale of their amax.
float nvfp4_tensor_scale(const float* x, int64_t n);

// In place over `rows` rows of k values (k a multiple of 16): each block of 16 quantised with the
// global scale S and decoded, x' = (e2m1(q) * e4m3(block scale)) / S.
void fake_quantize_nvfp4_rows(float* x, int64_t rows, int64_t k, float global_scale);

}  // namespace avdit::quant
