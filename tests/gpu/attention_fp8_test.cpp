// ops::attention_fp8 on the GPU (ops/attention_fp8.h): the Hopper kernel (head dim 128 on sm_90)
// and the portable one (other head dims) against the CPU emulation of the definition and against
// the exact attention, on fresh random inputs at odd lengths with several documents (1-row ones,
// ones not a multiple of 128), GQA and MAGI-2's sinks; the same bytes on a second call and from a
// CUDA graph; the refusals.
//
// Both sides quantize to the same codes; what differs is P's rounding: the Hopper kernel rounds
// 2^(y - running max + 8) per key tile, the CPU 2^(y - row max + 8), so a key seen before its row's
// max rounds independently on each side (random inputs: about half the keys, NMSE up to ~1.5e-3).
// "Anchored" inputs remove it: every 16th key of each document is one vector whose logit tops every
// other for every query, so each 128-key tile holds the row max and both sides round the same
// values; what remains is the order of fp32 sums and ex2's last bits. A wrong fragment, scale block
// or document boundary gives 1e-2 .. 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "ops/attention.h"
#include "ops/attention_fp8.h"
#include "ops/cuda/windowed_attention_tc.h"
#include "ops/rows.h"
#include "testing/fp8_attention_inputs.h"

namespace avdit::cuda {
namespace {

constexpr double kNmseRandom = 2.5e-3;    // GPU vs emulation, random inputs
constexpr double kNmseAnchored = 1e-4;    // GPU vs emulation, anchored inputs
constexpr double kNmseExactMin = 1e-4;    // FP8 ran: bf16 attention sits ~5e-6 from exact
constexpr double kNmseExactMax = 1e-2;    // and e4m3's 3 mantissa bits cost no more than this

struct Case {
  int64_t S, Hq, Hkv, D;
  std::vector<int64_t> cu;
  bool anchored, sinks;
};

std::string label(const Case& c, DType out) {
  std::string s = "S=" + std::to_string(c.S) + " H=" + std::to_string(c.Hq) + "/" + std::to_string(c.Hkv) +
                  " D=" + std::to_string(c.D) + " docs=" + std::to_string(c.cu.size() - 1) + " " +
                  std::string(dtype_name(out));
  return s + (c.anchored ? " anchored" : " random") + (c.sinks ? " sinks" : "");
}

std::vector<Tensor> inputs(std::mt19937& gen, const Case& c) {
  return testing::fp8_attention_inputs(gen, c.S, c.Hq, c.Hkv, c.D, c.cu, c.anchored);
}

double nmse(const Tensor& got, const Tensor& ref) {
  const Tensor g = got.to_f32(), r = ref.to_f32();
  EXPECT_EQ(g.numel(), r.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    const double a = std::as_const(g).f32()[i], b = std::as_const(r).f32()[i];
    if (!std::isfinite(a)) return INFINITY;
    num += (a - b) * (a - b);
    den += b * b;
  }
  return den > 0 ? num / den : num;
}

class Fp8AttentionCuda : public ::testing::Test {
 protected:
  Device dev;
  ops::CudaContext ctx{dev};
  bool hopper() { return windowed_attention_tc_device(dev.props()); }

  void check(std::mt19937& gen, const Case& c, DType out) {
    const std::vector<Tensor> x = inputs(gen, c);
    Tensor sinks = Tensor::empty({c.Hq}, DType::F32);
    std::normal_distribution<float> nd(0.f, 1.f);
    // Near the rows' log-sum-exp, so an ignored or misplaced sink moves every row by tens of percent.
    for (int64_t h = 0; h < c.Hq; ++h) sinks.f32()[h] = std::log(float(c.S) / float(c.cu.size() - 1)) + nd(gen);
    const Tensor* sk = c.sinks ? &sinks : nullptr;
    const float scale = 1.0f / std::sqrt(float(c.D));
    ops::Segments cpu_seg;
    cpu_seg.cu = c.cu;
    Tensor emu = Tensor::empty(x[0].shape(), DType::F32), exact = Tensor::empty(x[0].shape(), DType::F32);
    ops::cpu::attention_fp8(x[0], x[1], x[2], scale, cpu_seg, sk, emu);
    ops::cpu::attention(x[0], x[1], x[2], scale, cpu_seg, sk, nullptr, exact);
    const ops::Segments seg = ops::plan_segments(ctx, c.cu, c.Hq, c.D, DType::BF16);
    const Tensor q = to_device(dev, x[0].to(DType::BF16)), k = to_device(dev, x[1].to(DType::BF16)),
                 v = to_device(dev, x[2].to(DType::BF16));
    const Tensor dsinks = to_device(dev, sinks);
    const Tensor* dsk = c.sinks ? &dsinks : nullptr;
    const Tensor y = to_host(dev, ops::attention_fp8(ctx, q, k, v, scale, seg, dsk, out));
    EXPECT_EQ(y.dtype(), out);
    const Tensor y2 = to_host(dev, ops::attention_fp8(ctx, q, k, v, scale, seg, dsk, out));
    EXPECT_EQ(std::memcmp(y.raw(), y2.raw(), static_cast<size_t>(y.nbytes())), 0)
        << "two calls differ: " << label(c, out);
    const double e_emu = nmse(y, emu), e_exact = nmse(y, exact), bound = c.anchored ? kNmseAnchored : kNmseRandom;
    std::printf("  %-8s %-58s vs emulation %.2e (bound %.0e), vs exact %.2e\n",
                hopper() && c.D == 128 ? "hopper" : "portable", label(c, out).c_str(), e_emu, bound, e_exact);
    EXPECT_LE(e_emu, bound) << label(c, out);
    EXPECT_GT(e_exact, kNmseExactMin) << "as close to exact as bf16: did FP8 run? " << label(c, out);
    EXPECT_LT(e_exact, kNmseExactMax) << label(c, out);
  }
};

TEST_F(Fp8AttentionCuda, AgainstCpuEmulation) {
  std::mt19937 gen(401);
  const std::vector<Case> cases = {
      {1000, 24, 24, 128, {0, 1000}, false, true},                    // the preview's heads, sinks
      {1000, 24, 24, 128, {0, 1000}, true, true},
      {2100, 56, 56, 128, {0, 1200, 1201, 1530, 2100}, false, false},  // H3's heads, a 1-row doc
      {2100, 56, 56, 128, {0, 1200, 1201, 1530, 2100}, true, false},
      {1500, 8, 2, 128, {0, 10, 700, 700, 1500}, true, true},          // GQA, short and empty docs
      {777, 4, 2, 64, {0, 300, 777}, false, true},                     // the portable kernel
      {513, 2, 2, 32, {0, 1, 513}, true, false},
  };
  for (const Case& c : cases) check(gen, c, DType::BF16);
  check(gen, cases[1], DType::F32);
  check(gen, cases[5], DType::F16);
}

// One key block 64 times smaller than the others: its scale differs from theirs by 64, so a kernel
// reading another block's scale for a block of codes is off by 64 in its logits. (A block 64 times
// larger would also tell, but its logits carry e4m3's relative error into a near one-hot softmax:
// 5e-2 from exact attention, emulation and GPU alike, past the bound below.)
TEST_F(Fp8AttentionCuda, BlocksKeepTheirOwnScale) {
  std::mt19937 gen(402);
  const Case c{640, 4, 4, 128, {0, 640}, false, false};
  std::vector<Tensor> x = inputs(gen, c);
  for (int64_t i = 0; i < 128 * c.Hkv * c.D; ++i) x[1].f32()[i] /= 64.f;  // the first key block
  const float scale = 0.088f;
  ops::Segments cpu_seg;
  cpu_seg.cu = c.cu;
  Tensor emu = Tensor::empty(x[0].shape(), DType::F32), exact = Tensor::empty(x[0].shape(), DType::F32);
  ops::cpu::attention_fp8(x[0], x[1], x[2], scale, cpu_seg, nullptr, emu);
  ops::cpu::attention(x[0], x[1], x[2], scale, cpu_seg, nullptr, nullptr, exact);
  const ops::Segments seg = ops::plan_segments(ctx, c.cu, c.Hq, c.D, DType::BF16);
  const Tensor y = to_host(dev, ops::attention_fp8(ctx, to_device(dev, x[0].to(DType::BF16)),
                                                   to_device(dev, x[1].to(DType::BF16)),
                                                   to_device(dev, x[2].to(DType::BF16)), scale, seg,
                                                   nullptr, DType::F32));
  std::printf("  small first block: vs emulation %.2e, vs exact %.2e\n", nmse(y, emu), nmse(y, exact));
  EXPECT_LE(nmse(y, emu), kNmseRandom);
  EXPECT_LT(nmse(y, exact), kNmseExactMax);
}

// Nothing in the op waits for the host: captured in a CUDA graph and replayed, the same bytes.
TEST_F(Fp8AttentionCuda, CapturedAndReplayed) {
  std::mt19937 gen(403);
  const Case c{1124, 56, 56, 128, {0, 1100, 1124}, false, false};
  const std::vector<Tensor> x = inputs(gen, c);
  const Tensor q = to_device(dev, x[0].to(DType::BF16)), k = to_device(dev, x[1].to(DType::BF16)),
               v = to_device(dev, x[2].to(DType::BF16));
  const ops::Segments seg = ops::plan_segments(ctx, c.cu, c.Hq, c.D, DType::BF16);
  const Tensor eager = to_host(dev, ops::attention_fp8(ctx, q, k, v, 0.088f, seg));
  Tensor out = cuda_empty(dev, q.shape(), DType::BF16);
  const uint64_t captures = ctx.graph_stats().captures;
  for (int i = 0; i < 3; ++i) {  // eager, captured, replayed
    ops::copy_(ctx, out, ctx.zeros(out.shape(), DType::BF16));
    ctx.run_fixed(77, [&] { ops::attention_fp8_into(ctx, q, k, v, 0.088f, seg, out); });
    const Tensor got = to_host(dev, out);
    EXPECT_EQ(std::memcmp(got.raw(), eager.raw(), static_cast<size_t>(got.nbytes())), 0) << "run " << i;
  }
  EXPECT_EQ(ctx.graph_stats().captures, captures + 1);
}

TEST_F(Fp8AttentionCuda, RefusesWhatTheDefinitionExcludes) {
  const Tensor q = ctx.zeros({8, 2, 72}, DType::BF16);  // head dim not a multiple of 16
  EXPECT_THROW(ops::attention_fp8(ctx, q, q, q, 0.1f, ops::plan_segments(ctx, {0, 8})), BadInput);
  const Tensor q2 = ctx.zeros({8, 2, 64}, DType::BF16);
  ops::Segments causal = ops::plan_segments(ctx, {0, 8});
  causal.causal = true;
  EXPECT_THROW(ops::attention_fp8(ctx, q2, q2, q2, 0.1f, causal), BadInput);
}

}  // namespace
}  // namespace avdit::cuda
