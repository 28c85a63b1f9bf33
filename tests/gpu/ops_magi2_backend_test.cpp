// The MAGI-2 ops, CPU (the oracle) against CUDA, on fresh random inputs at odd and real sizes, per
// dtype, with a stated NMSE tolerance per case (tests/testing/backend_ops.h; the generic ops are in
// ops_backend_test.cpp). Moves are bit-exact; fp32 math within 1e-9 (the GPU avoids FMA contraction
// where the CPU rounds step by step, so only libm's last bits and GEMM orders differ); results
// stored in bf16 within 1e-4 (one bf16 rounding landing on either side is ~1e-6 of NMSE). The
// routed experts in bf16 run the Hopper kernels (fused, or the two-GEMM fallback at De <= 48) where
// the GPU has them, whose fp32 sums come in wgmma's order: 1e-4 too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/context.h"
#include "ops/attention_prologue.h"
#include "ops/cuda/mhc_logits_tc.h"
#include "ops/embedding.h"
#include "ops/mhc.h"
#include "ops/moe.h"
#include "ops/rows.h"
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

class Magi2BackendOps : public test_util::BackendOpsTest {};

// The modality-sorted order of L tokens with random modalities: perm (permuted row -> packed
// token), inv, and each permuted row's group.
struct Layout {
  Tensor perm, inv, group;
};
Layout layout(int64_t L, int64_t groups, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, static_cast<int>(groups) - 1);
  std::vector<int> m(L);
  for (int& x : m) x = d(rng);
  std::vector<int64_t> perm(L), inv(L), group(L);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return m[a] < m[b]; });
  for (int64_t r = 0; r < L; ++r) {
    inv[perm[r]] = r;
    group[r] = m[perm[r]];
  }
  return {indices(perm), indices(inv), indices(group)};
}

TEST_F(Magi2BackendOps, MhcCoefficientsAndMixing) {
  struct Case {
    int64_t L, hidden, n;
  };
  for (const Case cs : {Case{37, 128, 4}, Case{5, 3072, 4}, Case{17, 65, 3}, Case{9, 64, 8}}) {
    const int64_t cols = 2 * cs.n + cs.n * cs.n;
    const Tensor logits = random_tensor({cs.L, cols}, DType::F32, 1, 2.f);
    MhcParams p;
    p.a_pre = 0.9f, p.a_post = 1.3f, p.a_res = 2.1f;  // a Sinkhorn far from uniform
    p.bias_pre = random_tensor({cs.n}, DType::F32, 2, 0.5f);
    p.bias_post = random_tensor({cs.n}, DType::F32, 3, 0.5f);
    p.bias_res = random_tensor({cs.n, cs.n}, DType::F32, 4);
    for (DType d : {DType::F32, DType::BF16}) {
      const std::string tag =
          fmt::format("L {} hidden {} n {} {}", cs.L, cs.hidden, cs.n, dtype_name(d));
      check({"mhc_coefficients " + tag, tol_for(d), [&](Context& c) {
               MhcParams q = p;
               q.bias_pre = c.upload(p.bias_pre), q.bias_post = c.upload(p.bias_post);
               q.bias_res = c.upload(p.bias_res);
               const MhcCoefficients co = mhc_coefficients(c, c.upload(logits), q, cs.n, d);
               return std::vector<Tensor>{co.h_pre, co.h_post, co.h_res};
             }});
      const Tensor s = random_tensor({cs.L, cs.n * cs.hidden}, d, 5),
                   o = random_tensor({cs.L, cs.hidden}, d, 6);
      const Tensor h_pre = random_tensor({cs.L, cs.n}, DType::F32, 7, 0.5f, 0.5f);
      const Tensor h_post = random_tensor({cs.L, cs.n}, DType::F32, 8, 0.5f, 1.f);
      const Tensor h_res = random_tensor({cs.L, cs.n, cs.n}, DType::F32, 9, 0.3f, 0.25f);
      check({"mhc_apply_pre " + tag, tol_for(d), [&](Context& c) {
               Tensor out = c.empty({cs.L, cs.hidden}, d);
               mhc_apply_pre(c, c.upload(s), c.upload(h_pre), cs.n, out);
               return std::vector<Tensor>{out};
             }});
      check({"mhc_hyper_connect_ " + tag, tol_for(d), [&](Context& c) {
               Tensor x = clone(c, c.upload(s));
               mhc_hyper_connect_(c, x, c.upload(o), c.upload(h_post), c.upload(h_res), cs.n);
               return std::vector<Tensor>{x};
             }});
    }
  }
}

// The coefficient logits: the fused kernels (BF16 / F16 streams, K a multiple of 64, 2n + n^2 of 8,
// 15 or 24; BF16 with 24 on the tensor cores, MhcLogitsTensorCores below, F16 or more than 32
// weight rows on the SIMT kernel) at the preview's real width and at small odd token counts, per
// weight dtype and with per-modality weight rows; the CPU's two steps (norm, then product) for the
// other cases.
TEST_F(Magi2BackendOps, MhcLogits) {
  struct Case {
    int64_t L, hidden, n, groups;
    DType s, w;
    bool weight = true;
  };
  for (const Case cs :
       {Case{37, 128, 4, 3, DType::BF16, DType::F32},
        Case{300, 3072, 4, 3, DType::BF16, DType::F32},
        Case{257, 3072, 4, 1, DType::BF16, DType::BF16}, Case{5, 64, 3, 2, DType::F16, DType::F32},
        Case{9, 16, 2, 1, DType::BF16, DType::F32, false},
        Case{17, 65, 4, 3, DType::BF16, DType::F32},       // K not a multiple of 64
        Case{11, 128, 4, 3, DType::F32, DType::F32},       // fp32 streams
        Case{29, 256, 4, 3, DType::F16, DType::BF16},      // SIMT: F16 streams, 24 logits
        Case{45, 128, 4, 33, DType::BF16, DType::F32}}) {  // SIMT: 33 weight rows
    const int64_t K = cs.n * cs.hidden, C = 2 * cs.n + cs.n * cs.n;
    const Layout lay = layout(cs.L, cs.groups, 21);
    const Tensor s = random_tensor({cs.L, K}, cs.s, 22, 1.5f);
    const Tensor w = cs.weight ? random_tensor({cs.groups, K}, cs.w, 23, 0.2f) : Tensor();
    const Tensor phi = random_tensor({K, C}, DType::F32, 24, 0.05f);
    check({fmt::format("mhc_logits L {} K {} C {} groups {} s {} w {}", cs.L, K, C, cs.groups,
                       dtype_name(cs.s), w.defined() ? dtype_name(cs.w) : "none"),
           kF32, [&](Context& c) {
             const Tensor grp = c.upload(lay.group), wd = w.defined() ? c.upload(w) : Tensor();
             const RmsNormWeight nw{wd, true, cs.groups > 1 ? &grp : nullptr};
             return std::vector<Tensor>{mhc_logits(c, c.upload(s), nw, 1e-6f, c.upload(phi))};
           }});
  }
}

// The tensor-core logits (ops/cuda/mhc_logits_tc.cu: BF16 streams, 24 logits) at odd token counts
// (rows past L in the last 16-row tile), the preview's width K = 12,288 and a small K of three
// 64-chunks, with weight rows chosen per row in sorted ranges (boundaries inside tiles) or
// interleaved (every tile holds all three), BF16 and F32 weights, one_plus on and off, no weight, a
// large eps. kF32 as for the SIMT kernel: the bf16 streams are exact as the A operand and the three
// bf16 terms carry all 24 bits of each fp32 g * phi, so the products are exact; the sums differ
// from the CPU's in order, and in the MMA's truncating accumulation, kept to one 64-k chunk (over
// all 12,288 k in one accumulator the H200 gave NMSE 1.3-1.7e-9, over this bar).
TEST_F(Magi2BackendOps, MhcLogitsTensorCores) {
  struct Case {
    int64_t L, K, groups;
    bool interleaved;
    DType w;
    bool one_plus;
    float eps = 1e-6f;
    bool weight = true;
  };
  const auto groups_of = [](int64_t L, int64_t groups, bool interleaved) {
    if (!interleaved) return layout(L, groups, 31).group;
    std::vector<int64_t> g(L);
    for (int64_t r = 0; r < L; ++r) g[r] = r % groups;
    return indices(g);
  };
  constexpr int64_t C = 24;
  const bool hopper = gpu().dev().props().major == 9;
  for (const Case cs :
       {Case{1, 12288, 3, false, DType::F32, true}, Case{77, 12288, 3, true, DType::BF16, true},
        Case{1003, 12288, 3, false, DType::BF16, true},
        Case{1003, 12288, 3, true, DType::F32, false}, Case{77, 192, 3, false, DType::F32, false},
        Case{1005, 192, 3, true, DType::BF16, true, 0.5f},
        Case{77, 192, 1, false, DType::F32, true, 1e-6f, false},  // no weight
        Case{33, 192, 1, false, DType::BF16, false}}) {           // one row, no group ids
    const Tensor s = random_tensor({cs.L, cs.K}, DType::BF16, 32, 1.5f);
    const Tensor w = cs.weight ? random_tensor({cs.groups, cs.K}, cs.w, 33, 0.2f) : Tensor();
    const Tensor phi = random_tensor({cs.K, C}, DType::F32, 34, 0.05f);
    const Tensor group = groups_of(cs.L, cs.groups, cs.interleaved);
    bool tc = false;
    const std::string name =
        fmt::format("mhc_logits tc L {} K {} groups {} {} w {} one_plus {} eps {}", cs.L, cs.K,
                    cs.groups, cs.interleaved ? "interleaved" : "sorted",
                    cs.weight ? dtype_name(cs.w) : "none", cs.one_plus, cs.eps);
    check({name, kF32, [&](Context& c) {
             const Tensor g = c.upload(group), sd = c.upload(s), pd = c.upload(phi);
             const RmsNormWeight nw{w.defined() ? c.upload(w) : Tensor(), cs.one_plus,
                                    cs.groups > 1 ? &g : nullptr};
             if (c.is_cuda())
               tc = cuda::mhc_logits_tc_takes(static_cast<CudaContext&>(c), sd, nw, pd);
             return std::vector<Tensor>{mhc_logits(c, sd, nw, cs.eps, pd)};
           }});
    // The default build's portable architectures include sm_90a: there the tensor cores run it.
    if (hopper) {
      EXPECT_TRUE(tc) << name;
    }
  }
  // A group index outside the weight gives a NaN row, as rms_norm does (the CPU rejects it): those
  // rows all NaN, the others as the CPU computes them with every index in range.
  for (int64_t K : {192, 12288}) {
    const int64_t L = 77;
    std::vector<int64_t> ok(L);
    for (int64_t r = 0; r < L; ++r) ok[r] = (r / 5) % 3;
    std::vector<int64_t> ids = ok;
    const std::vector<std::pair<int64_t, int64_t>> bad = {
        {0, 3}, {15, -1}, {16, 7}, {40, 3}, {76, -2}};
    for (auto [r, id] : bad) ids[r] = id;
    const Tensor s = random_tensor({L, K}, DType::BF16, 35, 1.5f);
    const Tensor w = random_tensor({3, K}, DType::F32, 36, 0.2f);
    const Tensor phi = random_tensor({K, C}, DType::F32, 37, 0.05f);
    const Tensor ok_ids = indices(ok);
    Tensor want = mhc_logits(cpu(), s, RmsNormWeight{w, true, &ok_ids}, 1e-6f, phi);
    const Tensor bad_ids = gpu().upload(indices(ids));
    Tensor got = gpu().download(mhc_logits(gpu(), gpu().upload(s),
                                           RmsNormWeight{gpu().upload(w), true, &bad_ids}, 1e-6f,
                                           gpu().upload(phi)));
    for (auto [r, id] : bad) {
      for (int64_t c = 0; c < C; ++c) {
        EXPECT_TRUE(std::isnan(got.f32()[r * C + c]))
            << "K " << K << " row " << r << " group " << id;
        got.f32()[r * C + c] = want.f32()[r * C + c] = 0.f;
      }
    }
    const double e = test_util::nmse(got, want);
    std::printf("  %-58s NMSE %.2e (tol %.0e)\n",
                fmt::format("mhc_logits bad groups L {} K {}", L, K).c_str(), e, kF32);
    EXPECT_LE(e, kF32) << "K " << K;
  }
}

TEST_F(Magi2BackendOps, EmbeddingAndTables) {
  for (auto [L, R, tc] : {std::tuple{7, 33, 5}, {300, 12288, 64}}) {
    const Layout lay = layout(L, 3, 10);
    const Tensor y = random_tensor({L, R}, DType::F32, 11),
                 bias = random_tensor({3, R}, DType::F32, 12, 0.1f);
    const Tensor time = random_tensor({L, tc}, DType::F32, 13);
    for (DType d : {DType::F32, DType::BF16})
      check({fmt::format("embed_epilogue [{}, {}] tc {} -> {}", L, R, tc, dtype_name(d)), kExact,
             [&](Context& c) {
               Tensor s = c.empty({L, R}, d), pre = c.empty({L, R}, DType::F32);
               const Tensor t = c.upload(time);
               embed_epilogue(c, c.upload(y), c.upload(bias), c.upload(lay.group), &t,
                              c.upload(lay.perm), s);
               embed_epilogue(c, c.upload(y), c.upload(bias), c.upload(lay.group), nullptr,
                              c.upload(lay.perm), pre);
               return std::vector<Tensor>{s, pre};
             }});
  }
  std::mt19937 rng(14);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Tensor t = Tensor::empty({257}, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = i % 7 == 0 ? 0.f : u(rng);
  for (int64_t dim : {1, 64, 65, 256})
    check({fmt::format("time_embedding [257] dim {}", dim), kF32, [&](Context& c) {
             Tensor out = c.empty({257, dim}, DType::F32);
             time_embedding(c, c.upload(t), c.upload(time_frequencies(dim)), out);
             return std::vector<Tensor>{out};
           }});
  // Coordinates as packing makes them: video (t, h, w) on grids, audio on time only, text at
  // negative times.
  for (int64_t B : {3, 16}) {
    const int64_t L = 211;
    Tensor coords = Tensor::empty({L, 9}, DType::F32);
    for (int64_t l = 0; l < L; ++l) {
      float* r = coords.f32() + l * 9;
      const float T = 3, H = 5, W = 7;
      if (l < 105) {
        const float row[9] = {float(l / 35), float((l / 7) % 5), float(l % 7), T, H, W, T, 32, 32};
        std::copy(row, row + 9, r);
      } else if (l < 180) {
        const float row[9] = {float(l - 105), 0, 0, 75, 1, 1, 10, 1, 1};
        std::copy(row, row + 9, r);
      } else {
        const float row[9] = {float(l - 211), 0, 0, 31, 1, 1, 1, 1, 1};
        std::copy(row, row + 9, r);
      }
    }
    Tensor bands = Tensor::empty({B}, DType::F32);
    for (int64_t b = 0; b < B; ++b) bands.f32()[b] = 1.0f / std::pow(10000.0f, float(b) / float(B));
    check({fmt::format("rope_table [{}, 9] bands {}", L, B), kF32, [&](Context& c) {
             Tensor out = c.empty({L, 6 * B}, DType::F32);
             rope_table(c, c.upload(coords), c.upload(bands), out);
             return std::vector<Tensor>{out};
           }});
  }
}

TEST_F(Magi2BackendOps, AttentionPrologueAndGate) {
  struct Case {
    int64_t L, Hq, Hkv, D, half, groups;
  };
  for (const Case cs :
       {Case{41, 2, 2, 64, 24, 3}, Case{29, 4, 2, 40, 15, 1}, Case{300, 24, 24, 128, 48, 3}}) {
    const int64_t heads = cs.Hq + 2 * cs.Hkv;
    const Layout lay = layout(cs.L, cs.groups, 20);
    const Tensor qn = random_tensor({cs.groups, cs.D}, DType::F32, 21, 0.3f);
    const Tensor kn = random_tensor({cs.groups, cs.D}, DType::F32, 22, 0.3f);
    const Tensor rope = random_tensor({cs.L, 2 * cs.half + 5}, DType::F32, 23);
    for (DType d : {DType::F32, DType::BF16}) {
      const std::string tag = fmt::format("L {} Hq {} Hkv {} D {} half {} G {} {}", cs.L, cs.Hq,
                                          cs.Hkv, cs.D, cs.half, cs.groups, dtype_name(d));
      const Tensor qkv = random_tensor({cs.L, heads * cs.D}, d, 24, 2.f);
      check({"qkv_prologue " + tag, tol_for(d), [&](Context& c) {
               Tensor q = c.empty({cs.L, cs.Hq, cs.D}, d), k = c.empty({cs.L, cs.Hkv, cs.D}, d),
                      v = c.empty({cs.L, cs.Hkv, cs.D}, d);
               const Tensor g = c.upload(lay.group);
               qkv_prologue(c, c.upload(qkv), c.upload(qn), c.upload(kn),
                            cs.groups > 1 ? &g : nullptr, c.upload(lay.inv), c.upload(rope),
                            cs.half, q, k, v);
               return std::vector<Tensor>{q, k, v};
             }});
      const Tensor o = random_tensor({cs.L, cs.Hq, cs.D}, d, 25),
                   gate = random_tensor({cs.L, cs.Hq}, d, 26, 2.f);
      check({"gate_unpermute " + tag, tol_for(d), [&](Context& c) {
               Tensor out = c.empty({cs.L, cs.Hq * cs.D}, d);
               gate_unpermute(c, c.upload(o), c.upload(gate), c.upload(lay.perm), out);
               return std::vector<Tensor>{out};
             }});
    }
  }
}

// The router's logits (both backends' fp32 products; BF16 x on the GPU: its tensor cores on the
// exact three-way split of the gate), and its choices: identical sets where no near-tie decides
// them (at most one (token, head) in 500 may differ).
TEST_F(Magi2BackendOps, Router) {
  struct Case {
    int64_t T, H, E, K, D;
  };
  for (const Case cs : {Case{77, 3, 33, 5, 40}, Case{512, 12, 256, 6, 256}}) {
    MoeConfig mc;
    mc.heads = cs.H, mc.experts = cs.E, mc.top_k = cs.K, mc.head_dim = cs.D, mc.route_scale = 4.9f;
    const Tensor gate =
        random_tensor({cs.H * cs.E, cs.D}, DType::F32, 30, 1.5f / std::sqrt(float(cs.D)));
    const Tensor bias = random_tensor({cs.H * cs.E}, DType::F32, 31, 0.15f);
    for (DType d : {DType::F32, DType::BF16}) {
      const Tensor x = random_tensor({cs.T, cs.H * cs.D}, d, 32);
      const std::string tag =
          fmt::format("T {} {} x {} top-{} D {} {}", cs.T, cs.H, cs.E, cs.K, cs.D, dtype_name(d));
      check({"route logits " + tag, d == DType::F32 ? kF32 : 1e-10, [&](Context& c) {
               const Routing r = route(c, c.upload(x), c.upload(gate), c.upload(bias), mc, true);
               return std::vector<Tensor>{r.logits};
             }});
      const Routing a = route(cpu(), x, gate, bias, mc, false);
      const Routing b =
          route(gpu(), gpu().upload(x), gpu().upload(gate), gpu().upload(bias), mc, false);
      const Tensor bi = gpu().download(b.indices), bw = gpu().download(b.weights);
      int64_t differ = 0;
      double worst = 0;
      for (int64_t s = 0; s < cs.T * cs.H; ++s) {
        std::vector<int32_t> x1(a.indices.data<int32_t>() + s * cs.K,
                                a.indices.data<int32_t>() + (s + 1) * cs.K);
        std::vector<int32_t> x2(bi.data<int32_t>() + s * cs.K, bi.data<int32_t>() + (s + 1) * cs.K);
        if (x1 != x2) {
          ++differ;
          continue;
        }
        for (int64_t k = 0; k < cs.K; ++k)
          worst = std::max(
              worst, double(std::abs(a.weights.f32()[s * cs.K + k] - bw.f32()[s * cs.K + k])));
      }
      std::printf(
          "  route choices %-50s %lld of %lld (token, head) differ; weights max |diff| %.2e\n",
          tag.c_str(), static_cast<long long>(differ), static_cast<long long>(cs.T * cs.H), worst);
      EXPECT_LE(differ * 500, cs.T * cs.H) << tag;
      EXPECT_LE(worst, 1e-6 * mc.route_scale) << tag;
    }
  }
}

// The routed experts on one routing (the CPU's, given to both): odd sizes with the fallback (De 48)
// and the fused kernel's widths (De 128), and the real widths (2 of the 12 heads).
TEST_F(Magi2BackendOps, RoutedExpertsAndOutput) {
  struct Case {
    int64_t T, H, E, K, D, De;
  };
  for (const Case cs : {Case{77, 2, 9, 3, 64, 48}, Case{129, 3, 16, 4, 128, 128},
                        Case{1000, 2, 256, 6, 256, 1280}}) {
    MoeConfig mc;
    mc.heads = cs.H, mc.experts = cs.E, mc.top_k = cs.K, mc.head_dim = cs.D, mc.route_scale = 2.5f;
    const int64_t G = cs.H * cs.E, W = cs.H * cs.D, Is = 96, hidden = 200;
    const Tensor gate = random_tensor({G, cs.D}, DType::F32, 40, 1.5f / std::sqrt(float(cs.D)));
    const Tensor bias = random_tensor({G}, DType::F32, 41, 0.15f);
    const Tensor wg =
        random_tensor({G, cs.D, cs.De}, DType::BF16, 42, 2.5f / std::sqrt(float(cs.D)));
    const Tensor wu =
        random_tensor({G, cs.D, cs.De}, DType::BF16, 43, 2.5f / std::sqrt(float(cs.D)));
    const Tensor wd =
        random_tensor({G, cs.De, cs.D}, DType::BF16, 44, 0.3f / std::sqrt(float(cs.De)));
    const Tensor merge = random_tensor({hidden, W}, DType::BF16, 45, 0.5f / std::sqrt(float(W)));
    const Tensor fc2 = random_tensor({hidden, Is}, DType::BF16, 46, 0.3f / std::sqrt(float(Is)));
    for (DType d : {DType::F32, DType::BF16}) {
      const std::string tag = fmt::format("T {} {} x {} top-{} D {} De {} {}", cs.T, cs.H, cs.E,
                                          cs.K, cs.D, cs.De, dtype_name(d));
      const Tensor x = random_tensor({cs.T, W}, d, 47);
      const Routing r = route(cpu(), x, gate, bias, mc, false);
      check({"routed_experts " + tag, tol_for(d), [&](Context& c) {
               ExpertWeights w;
               w.inter = cs.De, w.begin = 0, w.end = cs.E;
               w.gate = {wg}, w.up = {wu}, w.down = {wd};
               w = prepare_experts(c, w, mc, d);
               const Routing rc{c.upload(r.indices), c.upload(r.weights), Tensor(), Tensor()};
               Tensor cat = c.zeros({cs.T, W + Is}, d);
               routed_experts(c, c.upload(x), rc, w, mc, cat);
               return std::vector<Tensor>{cat};
             }});
      const Tensor cat = random_tensor({cs.T, W + Is}, d, 48),
                   specific = random_tensor({cs.T, hidden}, d, 49);
      check({"moe_output " + tag, tol_for(d), [&](Context& c) {
               const MoeOutputWeights w = prepare_moe_output(c, merge, fc2, d);
               Tensor out = c.empty({cs.T, hidden}, d), m = c.empty({cs.T, hidden}, d),
                      s = c.empty({cs.T, hidden}, d);
               moe_output(c, c.upload(cat), c.upload(specific), w, out, &m, &s);
               return std::vector<Tensor>{out, m, s};
             }});
    }
  }
}

}  // namespace
}  // namespace avdit::ops
