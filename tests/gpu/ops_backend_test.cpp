// Every op of the generic and adaLN op set, CPU (the oracle) against CUDA, on fresh random inputs
// at odd and real sizes, per dtype, with a stated NMSE tolerance per case
// (tests/testing/backend_ops.h). Data movement, casts and the samplers' element-wise steps must be
// bit-exact; fp32 math within 1e-9 (GEMM and reduction orders differ); results stored in bf16
// within 1e-4 (one bf16 rounding that may land on either side is ~1e-6 of NMSE; fused kernels round
// the same points in another order). The MAGI-2 ops have their cases in ops_magi2_backend_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/attention_mass.h"
#include "ops/linear.h"
#include "ops/linear_fp8.h"
#include "ops/modulation.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/rows.h"
#include "ops/sample.h"
#include "sample/unipc.h"
#include "testing/backend_ops.h"

namespace avdit::ops {
namespace {

using test_util::check_case;
using test_util::OpCase;
using test_util::random_tensor;

using test_util::indices;
using test_util::kBf16;
using test_util::kExact;
using test_util::kF32;
using test_util::tol_for;

class BackendOps : public test_util::BackendOpsTest {};

// A permutation of [0, n) (fixed, not the identity).
std::vector<int64_t> permutation(int64_t n, uint32_t seed) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

TEST_F(BackendOps, RowsAndCasts) {
  for (DType d : {DType::F32, DType::BF16}) {
    for (auto [rows, width] : {std::pair{1, 7}, {33, 129}, {300, 1024}}) {
      const std::string tag = fmt::format("{} [{}, {}]", dtype_name(d), rows, width);
      const Tensor x = random_tensor({rows, width}, d, 1);
      const Tensor perm = indices(permutation(rows, 2));
      check({"gather_rows " + tag, kExact, [&](Context& c) {
               return std::vector<Tensor>{gather_rows(c, c.upload(x), c.upload(perm))};
             }});
      check({"scatter_rows F32 -> " + tag, kExact, [&](Context& c) {
               Tensor dst = c.zeros({rows + 3, width}, d);
               scatter_rows(c, c.upload(x.to(DType::F32)), c.upload(perm), dst);
               return std::vector<Tensor>{dst};
             }});
      std::vector<uint8_t> m(rows);
      for (int i = 0; i < rows; ++i) m[i] = (i % 3) != 1;
      const Tensor mask = Tensor::from_data({rows}, DType::U8, m.data());
      check({"gather_rows_masked " + tag, kExact, [&](Context& c) {
               Tensor out = c.empty({rows, width}, d);
               gather_rows_masked(c, c.upload(x), c.upload(perm), c.upload(mask), out);
               return std::vector<Tensor>{out};
             }});
      check({"take_columns / concat_columns / concat_rows " + tag, kExact, [&](Context& c) {
               const Tensor xc = c.upload(x);
               const Tensor a = take_columns(c, xc, width / 3, width),
                            b = take_columns(c, xc, 0, width / 3);
               return std::vector<Tensor>{concat_columns(c, a, b),
                                          concat_rows(c, {xc, take_columns(c, xc, 0, width)})};
             }});
      for (DType to : {DType::F32, DType::BF16, DType::F16})
        check({fmt::format("cast {} -> {}", tag, dtype_name(to)), kExact,
               [&](Context& c) { return std::vector<Tensor>{cast(c, c.upload(x), to)}; }});
      check({"copy_columns into BF16 " + tag, kExact, [&](Context& c) {
               Tensor dst = c.zeros({rows, width + 5}, DType::BF16);
               copy_columns(c, c.upload(x), 0, dst, 5, width);
               return std::vector<Tensor>{dst};
             }});
      const Tensor eidx = indices(permutation(rows * width, 3));
      check({"gather_elements " + tag, kExact, [&](Context& c) {
               Tensor out = c.empty({rows * width}, d);
               gather_elements(c, c.upload(x), c.upload(eidx), out);
               return std::vector<Tensor>{out};
             }});
    }
  }
}

TEST_F(BackendOps, LinearAndMatmul) {
  struct Shape3 {
    int64_t m, k, n;
  };
  for (Shape3 s : {Shape3{1, 7, 3}, {33, 64, 129}, {77, 300, 1100}, {64, 3072, 256}}) {
    for (DType d : {DType::F32, DType::BF16}) {
      const std::string tag =
          fmt::format("{} [{}, {}] x [{}, {}]", dtype_name(d), s.m, s.k, s.n, s.k);
      const Tensor x = random_tensor({s.m, s.k}, d, 4), w = random_tensor({s.n, s.k}, d, 5, 0.05f);
      const Tensor b = random_tensor({s.n}, DType::F32, 6), acc = random_tensor({s.m, s.n}, d, 7);
      check({"linear " + tag, tol_for(d), [&](Context& c) {
               return std::vector<Tensor>{linear(c, c.upload(x), c.upload(w), nullptr, d)};
             }});
      check({"linear + bias + acc " + tag, tol_for(d), [&](Context& c) {
               const Tensor bc = c.upload(b.to(d)), ac = c.upload(acc);
               return std::vector<Tensor>{linear(c, c.upload(x), c.upload(w), &bc, d, &ac)};
             }});
      check({"linear F32 out " + tag, kF32, [&](Context& c) {
               return std::vector<Tensor>{linear(c, c.upload(x), c.upload(w), nullptr, DType::F32)};
             }});
      check({"linear into a row range " + tag, tol_for(d), [&](Context& c) {
               Tensor y = c.zeros({s.m + 4, s.n}, d);
               Tensor rows = y.slice_rows(2, 2 + s.m);
               linear_into(c, c.upload(x), c.upload(w), nullptr, rows);
               return std::vector<Tensor>{y};
             }});
      const Tensor bkn = random_tensor({s.k, s.n}, d, 8, 0.05f);
      check({"matmul " + tag, kF32, [&](Context& c) {
               return std::vector<Tensor>{matmul(c, c.upload(x), c.upload(bkn))};
             }});
    }
    // Mixed dtypes (F32 activations, BF16 weights: the fp32 islands' inputs) widen exactly.
    const Tensor x = random_tensor({s.m, s.k}, DType::F32, 9),
                 w = random_tensor({s.n, s.k}, DType::BF16, 10, 0.05f);
    check({fmt::format("linear F32 x BF16 w [{}, {}, {}]", s.m, s.k, s.n), kF32,
           [&](Context& c) { return std::vector<Tensor>{linear(c, c.upload(x), c.upload(w))}; }});
  }
}

TEST_F(BackendOps, RmsNorm) {
  for (DType d : {DType::F32, DType::BF16}) {
    for (auto [tokens, heads, dim] :
         {std::tuple{5, 1, 7}, {33, 1, 256}, {17, 3, 128}, {64, 1, 3072},
          // Short rows, several a warp (the video VAEs' channels): 4 rows of 64, 8 lanes for 40.
          {1001, 1, 64}, {37, 1, 40}}) {
      const Shape shape = heads == 1 ? Shape{tokens, dim} : Shape{tokens, heads, dim};
      const std::string tag = fmt::format("{} {}", dtype_name(d), shape_str(shape));
      const Tensor x = random_tensor(shape, d, 11, 3.f);
      const Tensor w1 = random_tensor({dim}, DType::F32, 12, 0.1f, 1.f);
      const Tensor w3 = random_tensor({3, dim}, DType::F32, 13, 0.1f);
      std::vector<int64_t> g(tokens);
      for (int t = 0; t < tokens; ++t) g[t] = (t * 7) % 3;
      const Tensor group = indices(g);
      check({"rms_norm " + tag, tol_for(d), [&](Context& c) {
               return std::vector<Tensor>{rms_norm(c, c.upload(x), c.upload(w1), 1e-6f)};
             }});
      check({"rms_norm (1 + w), 3 grouped rows " + tag, tol_for(d), [&](Context& c) {
               const Tensor gc = c.upload(group);
               return std::vector<Tensor>{
                   rms_norm(c, c.upload(x), RmsNormWeight{c.upload(w3), true, &gc}, 1e-6f)};
             }});
      check({"rms_norm no weight, F32 out " + tag, kF32, [&](Context& c) {
               return std::vector<Tensor>{
                   rms_norm(c, c.upload(x), RmsNormWeight{}, 1e-5f, DType::F32)};
             }});
    }
  }
}

TEST_F(BackendOps, ElementWiseAndGated) {
  for (DType d : {DType::F32, DType::BF16}) {
    for (auto [rows, width] : {std::pair{1, 6}, {37, 130}, {128, 2560}}) {
      const std::string tag = fmt::format("{} [{}, {}]", dtype_name(d), rows, width);
      const Tensor a = random_tensor({rows, width}, d, 14, 3.f),
                   b = random_tensor({rows, width}, d, 15);
      check({"silu / sigmoid " + tag, tol_for(d), [&](Context& c) {
               return std::vector<Tensor>{silu(c, c.upload(a)), sigmoid(c, c.upload(a))};
             }});
      check({"add / mul / add_ " + tag, tol_for(d), [&](Context& c) {
               Tensor acc = clone(c, c.upload(a));
               add_(c, acc, c.upload(b));
               return std::vector<Tensor>{add(c, c.upload(a), c.upload(b)),
                                          mul(c, c.upload(a), c.upload(b)), acc};
             }});
      check({"swiglu (gate first) " + tag, tol_for(d), [&](Context& c) {
               return std::vector<Tensor>{gated(c, Gated::Swiglu, c.upload(a))};
             }});
      check({"swiglu7 interleaved " + tag, tol_for(d), [&](Context& c) {
               return std::vector<Tensor>{gated(c, Gated::Swiglu7Interleaved, c.upload(a))};
             }});
      check({"swiglu7 interleaved into columns " + tag, tol_for(d), [&](Context& c) {
               Tensor y = c.zeros({rows, width / 2 + 16}, d);
               gated_into(c, Gated::Swiglu7Interleaved, c.upload(a), nullptr, y, 8);
               return std::vector<Tensor>{y};
             }});
      check({"swiglu7 split " + tag, tol_for(d), [&](Context& c) {
               const Tensor bc = c.upload(b);
               return std::vector<Tensor>{gated(c, Gated::Swiglu7Split, c.upload(a), &bc)};
             }});
    }
  }
}

TEST_F(BackendOps, Attention) {
  struct Case {
    int64_t hq, hkv, dim;
    std::vector<int64_t> cu;
    bool sinks, gate;
  };
  const std::vector<Case> cases = {
      {2, 2, 64, {0, 77}, false, false},             // one odd-length document
      {4, 2, 128, {0, 50, 50, 123}, true, true},     // GQA, an empty document, sinks and gate
      {3, 1, 128, {0, 300, 364}, true, false},       // H3-like: a live document and a pad one
      {24, 24, 128, {0, 1024, 2048}, true, true},    // MAGI-2 width, cond + uncond items
      {4, 2, 128, {0, 257, 514, 771, 800}, true, true},  // three equal documents + a short one
      {2, 2, 64, {0, 129, 258, 387}, false, true},   // equal odd documents only
      {1, 1, 1024, {0, 96, 96, 179}, false, false},  // Wan2.2 VAE: one head of 1,024 (by GEMMs)
      {4, 2, 320, {0, 33, 70}, false, false},        // GQA beyond 256 (by GEMMs)
  };
  for (const Case& k : cases) {
    const int64_t S = k.cu.back();
    for (DType d : {DType::F32, DType::BF16}) {
      const std::string tag =
          fmt::format("{} S {} Hq {} Hkv {} D {}{}{}", dtype_name(d), S, k.hq, k.hkv, k.dim,
                      k.sinks ? " sinks" : "", k.gate ? " gate" : "");
      const Tensor q = random_tensor({S, k.hq, k.dim}, d, 16),
                   kk = random_tensor({S, k.hkv, k.dim}, d, 17),
                   v = random_tensor({S, k.hkv, k.dim}, d, 18);
      const Tensor sinks = random_tensor({k.hq}, DType::F32, 19),
                   gate = random_tensor({S, k.hq}, d, 20);
      check({"attention " + tag, d == DType::F32 ? kF32 : 2e-4, [&](Context& c) {
               const Segments seg = plan_segments(c, k.cu, k.hq, k.dim, d);
               const Tensor sc = c.upload(sinks), gc = c.upload(gate);
               return std::vector<Tensor>{attention(c, c.upload(q), c.upload(kk), c.upload(v),
                                                    1.0f / std::sqrt(static_cast<float>(k.dim)),
                                                    seg, k.sinks ? &sc : nullptr,
                                                    k.gate ? &gc : nullptr)};
             }});
    }
  }
}

// ops::attention's Own plan: the project's Hopper kernel (FlashAttention-3's arrangement over the
// documents, the sink and gate in its epilogue) against the CPU reference, bf16 q, k, v of head dim
// 128, bf16 and f32 outputs; and not cuDNN's bits (the Split plan's), so the kernel itself ran.
TEST_F(BackendOps, AttentionOwnHopperKernel) {
  const auto& props = gpu().dev().props();
  if (props.major != 9 || props.minor != 0) GTEST_SKIP() << "the Own plan's kernel is sm_90 only";
  struct Case {
    int64_t hq, hkv;
    std::vector<int64_t> cu;
    bool sinks, gate;
  };
  const std::vector<Case> cases = {
      {2, 2, {0, 77}, false, false},                   // one odd document, one partial tile
      {4, 2, {0, 50, 50, 123}, true, true},            // GQA, an empty document, sinks and gate
      {3, 1, {0, 300, 364}, true, false},              // H3-like: a live document and a pad one
      {24, 24, {0, 1024, 2048}, true, true},           // MAGI-2 width, cond + uncond items
      {8, 2, {0, 1000, 2333, 2500}, false, true},      // documents ending inside query and key tiles
      {2, 2, {0, 353, 529}, true, true},               // 2 key tiles + 1 key; exactly one tile
  };
  const int64_t D = 128;
  for (const Case& k : cases) {
    const int64_t S = k.cu.back();
    for (DType out : {DType::BF16, DType::F32}) {
      const std::string tag = fmt::format("S {} Hq {} Hkv {}{}{} -> {}", S, k.hq, k.hkv,
                                          k.sinks ? " sinks" : "", k.gate ? " gate" : "", dtype_name(out));
      const Tensor q = random_tensor({S, k.hq, D}, DType::BF16, 21),
                   kk = random_tensor({S, k.hkv, D}, DType::BF16, 22),
                   v = random_tensor({S, k.hkv, D}, DType::BF16, 23);
      const Tensor sinks = random_tensor({k.hq}, DType::F32, 24, 3.f),
                   gate = random_tensor({S, k.hq}, DType::BF16, 25);
      const float scale = 1.0f / std::sqrt(static_cast<float>(D));
      auto run = [&](Context& c, SegmentPlan plan) {
        const Tensor sc = c.upload(sinks), gc = c.upload(gate);
        auto* cc = dynamic_cast<CudaContext*>(&c);
        const Segments seg = cc ? cuda::plan_segments_as(*cc, k.cu, plan) : plan_segments(c, k.cu);
        return attention(c, c.upload(q), c.upload(kk), c.upload(v), scale, seg, k.sinks ? &sc : nullptr,
                         k.gate ? &gc : nullptr, out);
      };
      check({"attention, Own plan " + tag, 2e-4, [&](Context& c) {
               return std::vector<Tensor>{run(c, SegmentPlan::Own)};
             }});
      const Tensor own = gpu().download(run(gpu(), SegmentPlan::Own));
      const Tensor split = gpu().download(run(gpu(), SegmentPlan::Split));
      EXPECT_NE(0, std::memcmp(own.raw(), split.raw(), static_cast<size_t>(own.nbytes())))
          << tag << ": the Own plan gave cuDNN's bits; its kernel did not run";
    }
  }
}

// The untimed default plan (ops/attention.h): Own where the longest document has 32,768 rows or
// more and is not a multiple of 128 (measured: cuDNN slows there) or has 65,536 or more, Split
// elsewhere; only where the kernel serves (sm_90, bf16, head dim 128).
TEST_F(BackendOps, DefaultPlanTakesOwnWhereCudnnSlows) {
  const auto& props = gpu().dev().props();
  if (props.major != 9 || props.minor != 0) GTEST_SKIP() << "the Own plan's kernel is sm_90 only";
  auto own = [&](std::vector<int64_t> cu, int64_t d, DType dt) {
    return plan_segments(gpu(), std::move(cu), 24, d, dt).plan == SegmentPlan::Own;
  };
  EXPECT_TRUE(own({0, 58594, 117188}, 128, DType::BF16));  // MAGI-2's cond + uncond at 896x512, 10 s
  EXPECT_TRUE(own({0, 40128, 40200}, 128, DType::BF16));   // a long live document + a pad one
  EXPECT_FALSE(own({0, 32768}, 128, DType::BF16));         // a multiple of 128 under 65,536
  EXPECT_TRUE(own({0, 65536}, 128, DType::BF16));          // from 65,536 the Own kernel leads anyway
  EXPECT_TRUE(own({0, 131072}, 128, DType::BF16));
  EXPECT_FALSE(own({0, 16385}, 128, DType::BF16));         // short
  EXPECT_FALSE(own({0, 58594}, 128, DType::F16));          // the kernel is bf16 only
  EXPECT_FALSE(own({0, 58594}, 64, DType::BF16));          // and head dim 128 only
}

TEST_F(BackendOps, ResidualNormModulate) {
  for (DType d : {DType::F32, DType::BF16}) {
    for (auto [S, H] : {std::pair{7, 48}, {130, 256}, {64, 5376}}) {
      const std::string tag = fmt::format("{} [{}, {}]", dtype_name(d), S, H);
      const int64_t M = 3;
      const Tensor x = random_tensor({S, H}, d, 21, 4.f), f = random_tensor({S, H}, d, 22);
      const Tensor table = random_tensor({3 * M, 6 * H}, d, 23, 0.3f),
                   w = random_tensor({H}, d, 24, 0.1f, 1.f);
      const Tensor final_table = random_tensor({M, 2 * H}, d, 25, 0.3f);
      std::vector<int64_t> rows(S), inv(S);
      for (int64_t r = 0; r < S; ++r) rows[r] = (r * 5) % (3 * M), inv[r] = r % M;
      const Tensor row = indices(rows), row_t = indices(inv);
      check({"residual + gate, norm, modulation " + tag, tol_for(d), [&](Context& c) {
               Tensor xc = clone(c, c.upload(x));
               const Tensor fc = c.upload(f), tc = c.upload(table), rc = c.upload(row);
               Tensor out = c.empty({S, H}, d);
               residual_norm_modulate(
                   c, xc,
                   {&fc, {tc, 5 * H}, &rc, c.upload(w), 1e-5f, {tc, 3 * H}, {tc, 4 * H}, &rc},
                   &out);
               return std::vector<Tensor>{xc, out};
             }});
      check({"plain residual + norm (refiner) " + tag, tol_for(d), [&](Context& c) {
               Tensor xc = clone(c, c.upload(x));
               const Tensor fc = c.upload(f);
               Tensor out = c.empty({S, H}, d);
               residual_norm_modulate(c, xc, {&fc, {}, nullptr, c.upload(w), 1e-5f}, &out);
               return std::vector<Tensor>{xc, out};
             }});
      check({"final layer: modulation by timestep, F32 out " + tag, tol_for(d), [&](Context& c) {
               Tensor xc = clone(c, c.upload(x));
               const Tensor tc = c.upload(final_table), rc = c.upload(row_t);
               Tensor out = c.empty({S, H}, DType::F32);
               residual_norm_modulate(
                   c, xc, {nullptr, {}, nullptr, c.upload(w), 1e-6f, {tc, 0}, {tc, H}, &rc}, &out);
               return std::vector<Tensor>{out};
             }});
    }
  }
}

TEST_F(BackendOps, QkNormRopePerHead) {
  for (DType d : {DType::F32, DType::BF16}) {
    // D 128 (the DiTs), 64 and 16 (the H3 video VAE's release and tiny heads: lanes past D idle).
    for (auto [S, heads, D, half] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{5, 1, 128, 48},
                                     {77, 3, 128, 48}, {256, 56, 128, 48}, {261, 32, 64, 24},
                                     {37, 2, 16, 6}}) {
      const std::string tag = fmt::format("{} S {} heads {} D {}", dtype_name(d), S, heads, D);
      const Tensor qkv = random_tensor({S, heads, 3, D}, d, 26, 2.f);
      const Tensor qw = random_tensor({D}, d, 27, 0.1f, 1.f),
                   kw = random_tensor({D}, d, 28, 0.1f, 1.f);
      Tensor cs = Tensor::empty({S, half}, DType::F32), sn = Tensor::empty({S, half}, DType::F32);
      for (int64_t i = 0; i < S * half; ++i)
        cs.f32()[i] = std::cos(0.01f * i), sn.f32()[i] = std::sin(0.01f * i);
      for (bool rope : {false, true})
        check({"qk_norm_rope_per_head " + tag + (rope ? " rope" : ""), tol_for(d), [&](Context& c) {
                 Tensor q = c.empty({S, heads, D}, d), k = c.empty({S, heads, D}, d),
                        v = c.empty({S, heads, D}, d);
                 const Tensor cc = c.upload(cs), sc = c.upload(sn);
                 qk_norm_rope_per_head(c, c.upload(qkv), c.upload(qw), c.upload(kw), 1e-5f,
                                       rope ? &cc : nullptr, rope ? &sc : nullptr, q, k, v);
                 return std::vector<Tensor>{q, k, v};
               }});
    }
  }
}

TEST_F(BackendOps, RandomFill) {
  for (DType d : {DType::F32, DType::BF16})
    check({fmt::format("fill_normal {} [1000, 37]", dtype_name(d)), d == DType::F32 ? 1e-12 : 1e-5,
           [&](Context& c) {
             Tensor t = c.empty({1000, 37}, d);
             fill_normal(c, t, 99, 0.5f, 2.f);
             return std::vector<Tensor>{t};
           }});
}

// The samplers' element-wise steps are bit-exact across backends (sample/elementwise.h, no FMA).
TEST_F(BackendOps, SamplerSteps) {
  for (int64_t n : {1, 777, 100000}) {
    const Tensor x = random_tensor({n}, DType::F32, 29), v = random_tensor({n}, DType::F32, 30),
                 u = random_tensor({n}, DType::F32, 31);
    check({fmt::format("unipc_step x 4 steps, n {}", n), kExact, [&](Context& c) {
             sample::UniPCPlanner plan({0.99f, 0.8f, 0.55f, 0.2f, 0.0f});
             Tensor hist = c.zeros({3, n}, DType::F32), lat = c.upload(x);
             for (int s = 0; s < 4; ++s) {
               Tensor out = c.empty({n}, DType::F32);
               unipc_step(c, plan.next(), c.upload(v), lat, hist, out);
               lat = out;
             }
             return std::vector<Tensor>{lat, hist};
           }});
    check({fmt::format("h3_euler n {}", n), kExact, [&](Context& c) {
             Tensor out = c.empty({n}, DType::F32);
             h3_euler(c, c.upload(x), c.upload(v), 1.0f - 0.83f, 0.71f, 1.0f - 0.71f, out);
             return std::vector<Tensor>{out};
           }});
    check({fmt::format("cfg one scale and per-frame scales, n {}", n), kExact, [&](Context& c) {
             Tensor a = c.empty({n}, DType::F32), b = c.empty({n}, DType::F32);
             cfg(c, c.upload(x), c.upload(u), {5.0f}, 1, a);
             cfg(c, c.upload(x), c.upload(u), {2.0f, 3.5f, 7.0f}, 7, b);
             return std::vector<Tensor>{a, b};
           }});
  }
}

// The attention sparsity probe's masses on the GPU (ops::attention_mass: float32 scores, float64
// sums, a radix select for the top-k) against the CPU's float64 reference, on fresh random q and k
// at odd sizes and at a full-width H3 head (128 dims, ~3k keys here), per dtype, for the pattern's
// k, a fixed k, k = 1 and k = every key; within 1e-5 as the probe's brute-force test.
Tensor i32(const std::vector<int32_t>& v) {
  return Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I32, v.data());
}

TEST_F(BackendOps, AttentionMassEqualsTheCpuReference) {
  struct Case {
    int64_t S, H, D, begin, end, frames;
    DType dt;
    float std;
  };
  for (const Case cs :
       {Case{61, 3, 24, 0, 55, 4, DType::F32, 1.5f}, Case{300, 2, 64, 20, 290, 7, DType::BF16, 1.f},
        Case{3100, 2, 128, 0, 3100, 12, DType::BF16, 1.f},
        Case{777, 1, 128, 5, 770, 5, DType::F16, 2.f}}) {
    // Rows: a text head, `frames` equal frames of video, an audio tail.
    const int64_t n_doc = cs.end - cs.begin, per = (n_doc - 20) / cs.frames;
    std::vector<int32_t> frame(cs.S, -1);
    for (int64_t f = 0; f < cs.frames; ++f)
      for (int64_t r = 0; r < per; ++r)
        frame[cs.begin + 10 + f * per + r] = static_cast<int32_t>(f);
    std::vector<int32_t> rows;
    for (int64_t r = cs.begin; r < cs.end; r += 3)
      if (frame[r] >= 0) rows.push_back(static_cast<int32_t>(r));
    const Tensor q = random_tensor({cs.S, cs.H, cs.D}, cs.dt, 31, cs.std),
                 k = random_tensor({cs.S, cs.H, cs.D}, cs.dt, 32, cs.std);
    const int64_t pattern_k = per + (n_doc - cs.frames * per);
    for (const int64_t fixed : {pattern_k, int64_t{7}, int64_t{1}, n_doc}) {
      const std::vector<int32_t> top_k(rows.size(), static_cast<int32_t>(fixed));
      for (int64_t head = 0; head < cs.H; ++head) {
        auto run = [&](Context& c) {
          const MassQueries m{c.upload(i32(rows)), c.upload(i32(top_k)), c.upload(i32(frame)),
                              cs.begin, cs.end};
          const auto n = static_cast<int64_t>(rows.size());
          Tensor topk = c.empty({n}, DType::F64), pattern = c.empty({n}, DType::F64);
          attention_mass(c, c.upload(q), c.upload(k), head, 1.0 / std::sqrt(double(cs.D)), m, topk,
                         pattern);
          return std::pair{c.download(topk), c.download(pattern)};
        };
        const auto [ct, cp] = run(cpu());
        const auto [gt, gp] = run(gpu());
        const std::string tag = fmt::format("S {} H {} D {} {} k {} head {}", cs.S, cs.H, cs.D,
                                            dtype_name(cs.dt), fixed, head);
        for (size_t i = 0; i < rows.size(); ++i) {
          ASSERT_NEAR(gt.data<double>()[i], ct.data<double>()[i], 1e-5) << tag << " query " << i;
          ASSERT_NEAR(gp.data<double>()[i], cp.data<double>()[i], 1e-5) << tag << " query " << i;
        }
        if (fixed == n_doc) {  // every key: the whole mass
          for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(gt.data<double>()[i], 1.0, 1e-9);
        }
      }
    }
  }
}

// The FP8 linear (ops/linear_fp8.h): the GPU's codes and scales are the CPU's bits (weight and, per
// call, activation quantization: the same fp32 scale and round-to-nearest-even saturating e4m3);
// the products through cuBLASLt's e4m3 GEMM (K and N multiples of 16) or the plain kernel (the
// others) within what the accumulation leaves: Hopper's FP8 MMA adds with fewer than fp32's bits
// between cuBLASLt's promotions to fp32 (NMSE at most 1.65e-8 measured, at K 5376, against the
// CPU's fp32; the bar is 3x that; a wrong code, scale or row is 1e-4 and above), and one bf16
// rounding for BF16 outputs.
TEST_F(BackendOps, LinearFp8) {
  struct Shape3 {
    int64_t m, k, n;
  };
  for (Shape3 s : {Shape3{5, 40, 7}, {33, 64, 48}, {77, 320, 1104}, {300, 5376, 1024}}) {
    for (Fp8Scaling sc : {Fp8Scaling::Tensor, Fp8Scaling::Row}) {
      for (DType d : {DType::F32, DType::BF16}) {
        const std::string tag =
            fmt::format("{} {} [{}, {}] x [{}, {}]", dtype_name(d),
                        sc == Fp8Scaling::Row ? "row" : "tensor", s.m, s.k, s.n, s.k);
        Tensor x = random_tensor({s.m, s.k}, DType::F32, 11, 2.f);
        for (int64_t k = 0; k < s.k; ++k) x.f32()[k] *= 40.f;  // one wide row
        x = x.to(d);
        const Tensor w = random_tensor({s.n, s.k}, d, 12, 0.05f);
        check({"fp8 weight codes, scales " + tag, kExact, [&](Context& c) {
                 const Fp8Weight q = quantize_fp8(c, c.upload(w), sc);
                 return std::vector<Tensor>{q.codes, q.scales, q.dequant};
               }});
        check({"fp8 linear " + tag, 5e-8, [&](Context& c) {
                 const Fp8Weight q = quantize_fp8(c, c.upload(w), sc);
                 return std::vector<Tensor>{linear_fp8(c, c.upload(x), q, DType::F32)};
               }});
        check({"fp8 linear BF16 out " + tag, kBf16, [&](Context& c) {
                 const Fp8Weight q = quantize_fp8(c, c.upload(w), sc);
                 return std::vector<Tensor>{linear_fp8(c, c.upload(x), q, DType::BF16)};
               }});
      }
    }
  }
}

}  // namespace
}  // namespace avdit::ops
