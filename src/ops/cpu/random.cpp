// Deterministic pseudo-normal fill on the CPU, the same counter hash as the CUDA kernel.
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "ops/cpu/common.h"
#include "ops/random.h"

namespace avdit::ops::cpu {

void fill_normal(Tensor& t, uint64_t seed, float mean, float std) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint64_t z = splitmix64(seed * 0x632be59bd9b4e019ull + static_cast<uint64_t>(i));
    const float u1 = (static_cast<float>(z >> 40) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>((z >> 8) & 0xffffffu) * (1.0f / 16777216.0f);
    v[i] = mean + std * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
  }
  store(t, v.data());
}

}  // namespace avdit::ops::cpu
