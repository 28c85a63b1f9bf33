// The MoE combine knob (ops/moe.h CombineSum) on the CPU oracle: ByOutput is the old contract bit
// for bit, a forced bf16 running sum puts every value on the bf16 grid (with one choice per pair it
// is exactly the fp32 result rounded once), a forced fp32 sum under bf16 activations rounds once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <random>
#include "core/dtype.h"
#include "ops/context.h"
#include "ops/moe.h"

namespace avdit::ops {
namespace {

Tensor random_tensor(Shape shape, DType dtype, uint32_t seed, float std = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, std);
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t.to(dtype);
}

struct Moe {
  MoeConfig cfg;
  Tensor x, gate, bias;
  ExpertWeights w;
};

Moe make_moe(int64_t K) {
  Moe m;
  m.cfg.heads = 2, m.cfg.experts = 5, m.cfg.top_k = K, m.cfg.head_dim = 16;
  const int64_t G = 10, D = 16, De = 24, T = 13;
  m.x = random_tensor({T, 2 * D}, DType::F32, 1);
  m.gate = random_tensor({G, D}, DType::F32, 2, 0.3f);
  m.bias = random_tensor({G}, DType::F32, 3, 0.1f);
  m.w.inter = De, m.w.begin = 0, m.w.end = 5;
  m.w.gate = {random_tensor({G, D, De}, DType::BF16, 4, 0.4f)};
  m.w.up = {random_tensor({G, D, De}, DType::BF16, 5, 0.4f)};
  m.w.down = {random_tensor({G, De, D}, DType::BF16, 6, 0.3f)};
  return m;
}

Tensor run(Context& ctx, const Moe& m, CombineSum sum, DType out) {
  MoeConfig c = m.cfg;
  c.combine = sum;
  const Routing r = route(ctx, m.x, m.gate, m.bias, c);
  Tensor y = Tensor::zeros({m.x.size(0), m.x.size(1)}, out);
  routed_experts(ctx, m.x.to(out), r, prepare_experts(ctx, m.w, c, out), c, y);
  return y.to(DType::F32);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

TEST(MoeCombine, Fp32SumUnderFp32IsTheDefault) {
  CpuContext ctx;
  const Moe m = make_moe(3);
  EXPECT_TRUE(same_bits(run(ctx, m, CombineSum::ByOutput, DType::F32),
                        run(ctx, m, CombineSum::F32, DType::F32)));
  EXPECT_TRUE(same_bits(run(ctx, m, CombineSum::ByOutput, DType::BF16),
                        run(ctx, m, CombineSum::Bf16, DType::BF16)));
}

TEST(MoeCombine, Bf16SumOfOneChoiceIsTheFp32ResultRounded) {
  CpuContext ctx;
  const Moe m = make_moe(1);
  const Tensor f = run(ctx, m, CombineSum::ByOutput, DType::F32);
  const Tensor b = run(ctx, m, CombineSum::Bf16, DType::F32);
  for (int64_t i = 0; i < f.numel(); ++i)
    ASSERT_EQ(b.f32()[i], bf16_to_f32(f32_to_bf16(f.f32()[i]))) << i;
}

TEST(MoeCombine, Bf16SumOfSeveralChoicesStaysOnTheGridAndNear) {
  CpuContext ctx;
  const Moe m = make_moe(3);
  const Tensor f = run(ctx, m, CombineSum::ByOutput, DType::F32);
  const Tensor b = run(ctx, m, CombineSum::Bf16, DType::F32);
  double num = 0, den = 0;
  int differ = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    ASSERT_EQ(b.f32()[i], bf16_to_f32(f32_to_bf16(b.f32()[i]))) << i;  // on the bf16 grid
    num += std::pow(double(b.f32()[i]) - f.f32()[i], 2);
    den += std::pow(double(f.f32()[i]), 2);
    differ += b.f32()[i] != f.f32()[i];
  }
  EXPECT_GT(differ, 0);
  EXPECT_LT(std::sqrt(num / den), 3 * 0.0039);  // a few bf16 roundings (2^-8 relative each)
}

TEST(MoeCombine, Fp32SumUnderBf16RoundsOnce) {
  CpuContext ctx;
  const Moe m = make_moe(3);
  const Tensor a = run(ctx, m, CombineSum::ByOutput, DType::BF16);
  const Tensor b = run(ctx, m, CombineSum::F32, DType::BF16);
  EXPECT_FALSE(same_bits(a, b));
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num += std::pow(double(b.f32()[i]) - a.f32()[i], 2);
    den += std::pow(double(a.f32()[i]), 2);
  }
  EXPECT_LT(num / den, 1e-4);
}

}  // namespace
}  // namespace avdit::ops
