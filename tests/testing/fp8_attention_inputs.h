// q, k, v for the FP8 attention tests (the op's and cuDNN's FP8 graph's): normal values rounded to
// bf16, held as F32 so both sides see the same numbers. Anchored: q's first component 1 and the
// rest N(0, 0.25), and every 16th key of each document one vector b e_0 with b = 3.5 sqrt(D), whose
// logit tops every other for every query (7 sigma), so each key tile holds its row's max and a
// kernel's running max equals the row max from the tile's start.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace avdit::testing {

inline std::vector<Tensor> fp8_attention_inputs(std::mt19937& gen, int64_t S, int64_t Hq, int64_t Hkv,
                                                int64_t D, const std::vector<int64_t>& cu, bool anchored) {
  std::normal_distribution<float> nd(0.f, 1.f);
  auto host = [&](Shape s, float sd) {
    Tensor t = Tensor::empty(std::move(s), DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = sd * nd(gen);
    return t;
  };
  Tensor q = host({S, Hq, D}, anchored ? 0.5f : 1.f), k = host({S, Hkv, D}, 1.f), v = host({S, Hkv, D}, 1.f);
  if (anchored) {
    for (int64_t i = 0; i < S * Hq; ++i) q.f32()[i * D] = 1.f;
    const float b = 3.5f * std::sqrt(float(D));
    for (size_t g = 0; g + 1 < cu.size(); ++g)
      for (int64_t j = cu[g]; j < cu[g + 1]; j += 16)
        for (int64_t h = 0; h < Hkv; ++h) {
          float* row = k.f32() + (j * Hkv + h) * D;
          std::fill(row, row + D, 0.f);
          row[0] = b;
        }
  }
  return {q.to(DType::BF16).to_f32(), k.to(DType::BF16).to_f32(), v.to(DType::BF16).to_f32()};
}

}  // namespace avdit::testing
