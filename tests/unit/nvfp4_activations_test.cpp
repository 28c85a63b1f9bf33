// NVFP4 fake quantisation of activations (quant/nvfp4_activations.h) against the weights' path
// (quant::fake_quantize_nvfp4 on the transposed matrix: blocks along K, one global scale), bit for
// bit after its bf16 rounding; and the MoE op with MoeConfig::nvfp4_inputs: a bounded change.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "ops/context.h"
#include "ops/moe.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_activations.h"

namespace avdit {
namespace {

Tensor randn(Shape shape, uint32_t seed, float std = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, std);
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t;
}

TEST(Nvfp4Activations, MatchesTheWeightRecipeOnTheTransposedMatrix) {
  const int64_t rows = 7, k = 48;
  Tensor x = randn({rows, k}, 3, 2.f);
  x.f32()[5] = 40.f;                                 // an outlier sets the tensor's scale
  Tensor xt = Tensor::empty({k, rows}, DType::F32);  // [K, N]: blocks along K
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) xt.f32()[i * rows + r] = x.f32()[r * k + i];
  const Tensor want = quant::fake_quantize_nvfp4(xt, 0).to(DType::F32);  // bf16 values
  Tensor got = x.clone();
  quant::fake_quantize_nvfp4_rows(got.f32(), rows, k,
                                  quant::nvfp4_tensor_scale(got.f32(), rows * k));
  int changed = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const float g = got.f32()[r * k + i];
      ASSERT_EQ(bf16_to_f32(f32_to_bf16(g)), want.f32()[i * rows + r]) << r << " " << i;
      changed += g != x.f32()[r * k + i];
    }
  EXPECT_GT(changed, rows * k / 2);
}

TEST(Nvfp4Activations, MoeInputsChangeTheOutputBoundedly) {
  ops::CpuContext ctx;
  ops::MoeConfig c;
  c.heads = 2, c.experts = 5, c.top_k = 2, c.head_dim = 16;
  const Tensor x = randn({11, 32}, 1), gate = randn({10, 16}, 2, 0.3f), bias = randn({10}, 3, 0.1f);
  ops::ExpertWeights w;
  w.inter = 32, w.begin = 0, w.end = 5;
  w.gate = {randn({10, 16, 32}, 4, 0.4f).to(DType::BF16)};
  w.up = {randn({10, 16, 32}, 5, 0.4f).to(DType::BF16)};
  w.down = {randn({10, 32, 16}, 6, 0.3f).to(DType::BF16)};
  const ops::Routing r = ops::route(ctx, x, gate, bias, c);
  auto run = [&](bool q) {
    ops::MoeConfig cq = c;
    cq.nvfp4_inputs = q;
    Tensor y = Tensor::zeros({11, 32}, DType::F32);
    ops::routed_experts(ctx, x, r, ops::prepare_experts(ctx, w, cq, DType::F32), cq, y);
    return y;
  };
  const Tensor a = run(false), b = run(true), b2 = run(true);
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_EQ(b.f32()[i], b2.f32()[i]);
    num += std::pow(double(b.f32()[i]) - a.f32()[i], 2);
    den += std::pow(double(a.f32()[i]), 2);
  }
  const double rel = std::sqrt(num / den);
  EXPECT_GT(rel, 0.01);  // 4-bit inputs: a few percent
  EXPECT_LT(rel, 0.3);
}

}  // namespace
}  // namespace avdit
