// NVFP4 fake quantisation of activations (see nvfp4_activations.h).
#include "quant/nvfp4_activations.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "quant/nvfp4.h"

namespace avdit::quant {

float nvfp4_tensor_scale(const float* x, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return nvfp4_global_scale(amax);
}

void fake_quantize_nvfp4_rows(float* x, int64_t rows, int64_t k, float s) {
  AVDIT_CHECK(k % kNvfp4Block == 0, "NVFP4 activations: rows of {} values, not a multiple of {}", k,
              kNvfp4Block);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < k; b += kNvfp4Block) {
      float* v = x + r * k + b;
      float amax = 0;
      for (int64_t i = 0; i < kNvfp4Block; ++i) amax = std::max(amax, std::fabs(v[i]));
      const uint8_t bs = nvfp4_block_scale(amax, s);
      const float inv = nvfp4_block_encode_scale(bs, s);
      for (int64_t i = 0; i < kNvfp4Block; ++i) v[i] = nvfp4_decode(nvfp4_encode(v[i], inv), bs, s);
    }
}

}  // namespace avdit::quant
