// The fp16 recipe on the GPU against the CPU's fp16 emulation: each fp16 op on fresh random inputs
// at odd and real sizes (NMSE per case, tests/testing/backend_ops.h), the row scaling bit-exact on
// the device too, and the H3 model that breaks naive fp16 (tests/testing/h3_fp16_model.h): naive
// non-finite, the recipe finite and no farther from the CPU fp32 oracle than the bf16 run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/h3/model.h"
#include "ops/activation.h"
#include "ops/linear_f16.h"
#include "ops/modulation.h"
#include "ops/random.h"
#include "ops/rows.h"
#include "testing/backend_ops.h"
#include "testing/h3_fp16_model.h"

namespace avdit::ops {
namespace {

using test_util::indices;
using test_util::kBf16;
using test_util::random_tensor;

class Fp16BackendOps : public test_util::BackendOpsTest {};

// fp16 results: one fp16 rounding on either side is ~1e-7 of NMSE; fused kernels and GEMM orders
// differ in fp32.
constexpr double kF16 = 1e-5;

// Rows of magnitude up to `big` (some past fp16's range when big > 65,504).
Tensor big_rows(int64_t M, int64_t K, float big, uint32_t seed) {
  Tensor x = random_tensor({M, K}, DType::F32, seed, 1.f);
  for (int64_t r = 0; r < M; ++r) {
    const float s = r % 3 == 0 ? big : r % 3 == 1 ? big / 50 : 1.f;
    for (int64_t c = 0; c < K; ++c) x.f32()[r * K + c] *= s;
  }
  return x;
}

TEST_F(Fp16BackendOps, LinearF16) {
  for (auto [M, K, N] : {std::tuple{5, 40, 24}, {130, 256, 96}, {1031, 1536, 512}}) {
    const Tensor w = random_tensor({N, K}, DType::F32, 31, 1.f / std::sqrt(static_cast<float>(K)))
                         .to(DType::F16);
    const Tensor x16 = random_tensor({M, K}, DType::F16, 32, 2.f);
    const Tensor x32 = big_rows(M, K, 3.0e5f, 33);
    for (DType out : {DType::F32, DType::F16}) {
      const std::string tag = fmt::format("[{}, {}] x [{}, {}] -> {}", M, K, N, K, dtype_name(out));
      check({"linear_f16 F16 in " + tag, out == DType::F32 ? 1e-9 : kF16, [&](Context& c) {
               return std::vector<Tensor>{linear_f16(c, c.upload(x16), c.upload(w), out, {})};
             }});
      if (out == DType::F32)
        check({"linear_f16 F32 rows past 65504, rowscale " + tag, 1e-9, [&](Context& c) {
                 return std::vector<Tensor>{
                     linear_f16(c, c.upload(x32), c.upload(w), out, {true, true})};
               }});
    }
  }
}

// The device's row scaling against its own unscaled product: the same bits where unscaled is
// finite.
TEST_F(Fp16BackendOps, RowScaleBitExactOnTheDevice) {
  CudaContext& g = gpu();
  const int64_t M = 64, K = 512, N = 128;
  Tensor x = random_tensor({M, K}, DType::F32, 41, 1.f);
  for (int64_t r = 0; r < M; ++r) {
    float mx = 0;
    for (int64_t c = 0; c < K; ++c) mx = std::max(mx, std::fabs(x.f32()[r * K + c]));
    // row max in (2^15, 65504]: finite in fp16, halved under rowscale; values kept fp16-exact and
    // above 2^-6 of the max so that halving never reaches fp16's subnormals.
    const float target = 33000.f + 500.f * static_cast<float>(r);
    for (int64_t c = 0; c < K; ++c) {
      float v = x.f32()[r * K + c] / mx * target;
      if (std::fabs(v) < target / 64) v = v < 0 ? -target / 64 : target / 64;
      x.f32()[r * K + c] = f16_to_f32(f32_to_f16(v));
    }
  }
  const Tensor w = random_tensor({N, K}, DType::F32, 42, 0.05f).to(DType::F16);
  const Tensor xd = g.upload(x), wd = g.upload(w);
  const Tensor on = g.download(linear_f16(g, xd, wd, DType::F32, {true, true}));
  const Tensor off = g.download(linear_f16(g, xd, wd, DType::F32, {false, true}));
  int64_t finite = 0;
  for (int64_t i = 0; i < M * N; ++i)
    if (std::isfinite(off.f32()[i])) {
      ++finite;
      ASSERT_EQ(std::memcmp(&on.f32()[i], &off.f32()[i], 4), 0) << "element " << i;
    }
  EXPECT_EQ(finite, M * N);
}

TEST_F(Fp16BackendOps, ResidualNormModulateF16) {
  for (auto [S, H] : {std::pair{7, 48}, {130, 256}, {64, 5376}}) {
    const int64_t M = 3;
    const Tensor f16 = random_tensor({S, H}, DType::F16, 22),
                 table = random_tensor({3 * M, 6 * H}, DType::F16, 23, 0.3f),
                 w = random_tensor({H}, DType::F16, 24, 0.1f, 1.f);
    std::vector<int64_t> rows(S);
    for (int64_t r = 0; r < S; ++r) rows[r] = (r * 5) % (3 * M);
    const Tensor row = indices(rows);
    for (DType xd : {DType::F16, DType::F32}) {
      const std::string tag = fmt::format("x {} [{}, {}]", dtype_name(xd), S, H);
      // The widened residual holds values past fp16's range.
      const Tensor x = random_tensor({S, H}, xd, 21, xd == DType::F32 ? 1.0e5f : 4.f);
      const Tensor f = xd == DType::F32 ? random_tensor({S, H}, DType::F32, 22, 3.0e4f) : f16;
      for (bool guard : {false, true})
        check({fmt::format("residual + gate, norm, modulation, fp16 act, guard {} {}", guard, tag),
               kF16, [&](Context& c) {
                 Tensor xc = ops::clone(c, c.upload(x));
                 const Tensor fc = c.upload(f), tc = c.upload(table), rc = c.upload(row);
                 Tensor out = c.empty({S, H}, DType::F16), out32 = c.empty({S, H}, DType::F32);
                 ResidualNormModulate a{&fc, {tc, 5 * H}, &rc, c.upload(w), 1e-5f, {tc, 3 * H}, {tc, 4 * H},
                                        &rc, DType::F16, guard};
                 residual_norm_modulate(c, xc, a, &out);
                 Tensor xc2 = ops::clone(c, xc);
                 ResidualNormModulate fin{nullptr, {}, nullptr, c.upload(w), 1e-6f, {tc, 0}, {tc, H}, &rc,
                                          DType::F16, false};
                 residual_norm_modulate(c, xc2, fin, &out32);
                 return std::vector<Tensor>{xc, out, out32};
               }});
    }
  }
}

TEST_F(Fp16BackendOps, QkNormRopeAndSwigluF16) {
  for (auto [S, heads] : {std::pair{5, 1}, {77, 3}, {256, 40}}) {
    const int64_t D = 128, half = 48;
    const Tensor qkv = random_tensor({S, heads, 3, D}, DType::F16, 26, 2.f);
    const Tensor qw = random_tensor({D}, DType::F16, 27, 0.1f, 1.f),
                 kw = random_tensor({D}, DType::F16, 28, 0.1f, 1.f);
    Tensor cs = Tensor::empty({S, half}, DType::F32), sn = Tensor::empty({S, half}, DType::F32);
    for (int64_t i = 0; i < S * half; ++i)
      cs.f32()[i] = std::cos(0.01f * i), sn.f32()[i] = std::sin(0.01f * i);
    check({fmt::format("qk_norm_rope_per_head F16 S {} heads {}", S, heads), kF16, [&](Context& c) {
             Tensor q = c.empty({S, heads, D}, DType::F16), k = c.empty({S, heads, D}, DType::F16),
                    v = c.empty({S, heads, D}, DType::F16);
             const Tensor cc = c.upload(cs), sc = c.upload(sn);
             qk_norm_rope_per_head(c, c.upload(qkv), c.upload(qw), c.upload(kw), 1e-5f, &cc, &sc, q,
                                   k, v);
             return std::vector<Tensor>{q, k, v};
           }});
  }
  for (auto [S, F] : {std::pair{3, 13}, {130, 256}, {1000, 3584}}) {
    // fc1 outputs of a few hundred: the product passes 65,504 (infinite in fp16, kept in fp32).
    const Tensor u = random_tensor({S, 2 * F}, DType::F16, 29, 300.f);
    for (DType out : {DType::F16, DType::F32})
      check({fmt::format("swiglu F16 -> {} [{}, {}]", dtype_name(out), S, F),
             out == DType::F32 ? 1e-9 : kF16, [&](Context& c) {
               Tensor uc = c.upload(u);
               Tensor y = gated(c, Gated::Swiglu, uc, nullptr, out);
               if (out ==
                   DType::F16) {  // compare the finite values; infinities must match in place
                 Tensor y32 = c.download(y).to_f32();
                 for (int64_t i = 0; i < y32.numel(); ++i)
                   if (!std::isfinite(y32.f32()[i]))
                     y32.f32()[i] = y32.f32()[i] > 0 ? 1.0e6f : -1.0e6f;
                 return std::vector<Tensor>{y32};
               }
               return std::vector<Tensor>{y};
             }});
  }
}

}  // namespace
}  // namespace avdit::ops

namespace avdit::models::h3 {
namespace {

TensorMap forward_on(ops::Context& ctx, DType act, const Fp16Fixes& fixes,
                     std::string* first_non_finite) {
  const Checkpoint ckpt = Checkpoint::open(test_util::h3_fp16_breaking_model());
  H3Model model(ctx, ckpt, act);
  model.set_fp16_fixes(fixes);
  test_util::FirstNonFinite first;
  TensorMap out;
  {
    const ProbeScope scope(ctx.observer(), &first);
    out = forward_from_inputs(model, read_all(test_util::h3_fp16_inputs()), false);
  }
  if (first_non_finite) *first_non_finite = first.where;
  return out;
}

TEST(H3Fp16Cuda, RecipeOnTheDeviceMatchesTheEmulation) {
  ops::CpuContext cpu;
  ops::CudaContext gpu;
  const TensorMap oracle = forward_on(cpu, DType::F32, {}, nullptr);
  const TensorMap bf16 = forward_on(gpu, DType::BF16, {}, nullptr);
  std::string naive_where, recipe_where;
  forward_on(gpu, DType::F16, Fp16Fixes::none(), &naive_where);
  const TensorMap recipe = forward_on(gpu, DType::F16, {}, &recipe_where);
  const TensorMap emulated = forward_on(cpu, DType::F16, {}, nullptr);
  const double d_gpu = test_util::h3_output_distance(recipe, oracle),
               d_bf16 = test_util::h3_output_distance(bf16, oracle),
               d_emu = test_util::h3_output_distance(recipe, emulated);
  std::printf(
      "GPU: naive fp16 first non-finite at %s; recipe vs fp32 %.3e, bf16 vs fp32 %.3e, recipe vs "
      "CPU "
      "emulation %.3e\n",
      naive_where.c_str(), d_gpu, d_bf16, d_emu);
  EXPECT_FALSE(naive_where.empty());
  EXPECT_TRUE(recipe_where.empty()) << recipe_where;
  EXPECT_LE(d_gpu, d_bf16);
  EXPECT_LE(d_emu, d_bf16);
}

}  // namespace
}  // namespace avdit::models::h3
