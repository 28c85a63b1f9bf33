// The GPU multi-head MoE's stages (ops/cuda/moe/moe.h) against CPU references on fresh random
// inputs:
// - the router against a float64 loop (logits, sigmoid / softmax, + bias, top-K with the lower
// index
//   winning ties, L1 normalisation, route_scale): identical expert sets wherever the reference's
//   biased scores are not within 1e-5 of a tie, weights within 1e-6 x route_scale;
// - the routed experts against the CPU oracle (ops/cpu/moe.cpp routed_experts: a matmul per expert,
//   swiglu7 rounded to the output dtype, the per-(token, head) sum in ascending expert order): F32
//   NMSE
//   <= 1e-10, BF16 within a bf16 bound; both kernel paths (SIMT reference and the Hopper path where
//   the GPU has it), both weight layouts ([in, out] and K-major);
// - small odd shapes and the real MAGI-2 widths (12 heads x 256 experts, top-6, D 256, De 1280),
//   skewed expert loads with empty groups, determinism (two runs, same bits);
// - the Hopper path (grouped.h: the fused experts kernel, and its CUTLASS two-GEMM fallback at
// expert
//   widths <= 48) against the same reference at small shapes (partial M and N tiles, empty groups,
//   both weight layouts) and the real widths, chunked by heads or not (same bits), determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "ops/cuda/moe/grouped.h"
#include "ops/cuda/moe/moe.h"
#include "ops/moe.h"

namespace avdit::cuda::moe {
namespace {

// NMSE bounds. F32: fp32 on both sides, only the order of sums differs (~1e-14 in practice).
constexpr double kNmseF32 = 1e-10;
// BF16: the activations h and each weighted expert output are rounded to bf16 on both sides, but
// from fp32 accumulators summed in a different order, so a rounding can land one ulp (2^-8
// relative) apart; the measured NMSE is ~1e-6..1e-5. A wrong row, expert or weight gives >= 1e-2.
constexpr double kNmseBf16 = 1e-4;

double nmse(const Tensor& got, const Tensor& ref) {
  const Tensor g = got.to_f32(), r = ref.to_f32();
  EXPECT_EQ(g.numel(), r.numel());
  const float *pg = g.f32(), *pr = r.f32();
  double num = 0, den = 0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (!std::isfinite(pg[i])) return INFINITY;
    const double e = double(pg[i]) - pr[i];
    num += e * e;
    den += double(pr[i]) * pr[i];
  }
  return den > 0 ? num / den : num;
}

// Deterministic hash-based uniform values in [-a, a), filled on all cores (the real-width expert
// stacks hold 1e9 values each), stored as `dtype`.
Tensor hash_uniform(Shape shape, DType dtype, float a, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  const int64_t n = t.numel();
  const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < nt; ++w) {
    pool.emplace_back([&, w] {
      for (int64_t i = n * w / nt; i < n * (w + 1) / nt; ++i) {
        uint64_t z = (uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float v = (float((z >> 40) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f) * a;
        if (dtype == DType::F32)
          t.f32()[i] = v == 0.0f ? a * 1e-3f : v;
        else
          static_cast<uint16_t*>(t.mutable_raw())[i] = f32_to_bf16(v == 0.0f ? a * 1e-3f : v);
      }
    });
  }
  for (auto& th : pool) th.join();
  return t;
}

Tensor normal(std::mt19937& gen, Shape shape, float scale = 1.f, float mean = 0.f) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  std::normal_distribution<float> d(mean, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(gen);
  return t;
}

Tensor ints(const std::vector<int32_t>& v, Shape shape) {
  return Tensor::from_data(std::move(shape), DType::I32, v.data());
}

// ---- router reference (float64) -----------------------------------------------------------------
struct RefRoute {
  std::vector<int32_t> idx;
  std::vector<double> w;
  std::vector<double> gap;  // per (t, h): the smallest gap between consecutive biased scores 0..K
  std::vector<double> top;  // per (t, h): |largest biased score|
  std::vector<double> logits;  // [T, H, E]
};

RefRoute ref_route(const Tensor& x, const Tensor& gate, const Tensor& bias, const RouterConfig& c) {
  const int64_t T = x.size(0), H = c.heads, E = c.experts, K = c.top_k, D = c.head_dim;
  RefRoute r;
  r.idx.resize(T * H * K);
  r.w.resize(T * H * K);
  r.gap.resize(T * H);
  r.top.resize(T * H);
  r.logits.resize(T * H * E);
  const float *xv = x.f32(), *gv = gate.f32(), *bv = bias.f32();
  std::vector<double> score(E), biased(E);
  std::vector<int> order(E);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double mx = -INFINITY;
      for (int64_t e = 0; e < E; ++e) {
        double s = 0;
        for (int64_t k = 0; k < D; ++k)
          s += double(xv[t * H * D + h * D + k]) * gv[(h * E + e) * D + k];
        r.logits[(t * H + h) * E + e] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) {
        const double l = r.logits[(t * H + h) * E + e];
        score[e] = c.softmax ? std::exp(l - mx) : 1.0 / (1.0 + std::exp(-l));
        sum += score[e];
      }
      for (int64_t e = 0; e < E; ++e) {
        if (c.softmax) score[e] /= sum;
        biased[e] = score[e] + bv[h * E + e];
      }
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return biased[a] > biased[b]; });
      double norm = 0, gap = INFINITY;
      for (int64_t k = 0; k < K; ++k) {
        norm += std::fabs(score[order[k]]);
        if (k + 1 < E) gap = std::min(gap, biased[order[k]] - biased[order[k + 1]]);
      }
      r.gap[t * H + h] = gap;
      r.top[t * H + h] = std::fabs(biased[order[0]]);
      const double denom = c.route_norm ? std::max(norm, 1e-12) : 1.0;
      for (int64_t k = 0; k < K; ++k) {
        r.idx[(t * H + h) * K + k] = order[k];
        r.w[(t * H + h) * K + k] = score[order[k]] / denom * c.route_scale;
      }
    }
  return r;
}

void check_route(Device& dev, const Tensor& x_host, DType xd, const Tensor& gate,
                 const Tensor& bias, const RouterConfig& c, const char* what) {
  const Tensor xr = x_host.to(xd).to_f32();  // the values the device sees
  const Routing r =
      route(dev, to_device(dev, xr.to(xd)), to_device(dev, gate), to_device(dev, bias), c, true);
  const RefRoute ref = ref_route(xr, gate, bias, c);
  const Tensor idx = to_host(dev, r.indices), w = to_host(dev, r.weights),
               lg = to_host(dev, r.logits);
  const int64_t pairs = xr.size(0) * c.heads, K = c.top_k;
  int64_t near_ties = 0, mismatches = 0;
  double max_dw = 0, max_dl = 0;
  for (int64_t i = 0; i < pairs * c.experts; ++i)
    max_dl = std::max(
        max_dl, std::fabs(lg.f32()[i] - ref.logits[i]) / std::max(1.0, std::fabs(ref.logits[i])));
  for (int64_t p = 0; p < pairs; ++p) {
    // A float32 logit is ~1e-6 (relative) off the float64 one: only a reference gap under 1e-5 of
    // the scores' size may reorder (relative, so that softmax scores of ~1/E are judged fairly).
    if (ref.gap[p] < 1e-5 * ref.top[p]) {
      ++near_ties;
      continue;
    }
    for (int64_t k = 0; k < K; ++k) {
      if (idx.data<int32_t>()[p * K + k] != ref.idx[p * K + k]) {
        ++mismatches;
        break;
      }
      max_dw = std::max(max_dw, std::fabs(w.f32()[p * K + k] - ref.w[p * K + k]));
    }
  }
  // Writing the logits is the only difference between the two modes: the choices must not change.
  const Routing r2 =
      route(dev, to_device(dev, xr.to(xd)), to_device(dev, gate), to_device(dev, bias), c, false);
  const Tensor idx2 = to_host(dev, r2.indices), w2 = to_host(dev, r2.weights);
  EXPECT_EQ(std::memcmp(idx.raw(), idx2.raw(), size_t(idx.nbytes())), 0)
      << what << " keep_logits changed the indices";
  EXPECT_EQ(std::memcmp(w.raw(), w2.raw(), size_t(w.nbytes())), 0)
      << what << " keep_logits changed the weights";
  std::printf(
      "  route %-46s pairs %ld near-ties %ld mismatches %ld  max|dw| %.2e  max rel dlogit %.2e\n",
      what, long(pairs), long(near_ties), long(mismatches), max_dw, max_dl);
  EXPECT_EQ(mismatches, 0) << what;
  EXPECT_LE(near_ties, pairs / 100 + 1) << what;
  EXPECT_LE(max_dw, 1e-6 * std::max(1.0f, c.route_scale)) << what;
  EXPECT_LE(max_dl, 1e-5) << what;
}

TEST(CudaMoe, RouterSmallShapes) {
  Device dev;
  std::mt19937 gen(11);
  struct Case {
    int64_t T, H, E, K, D;
    bool softmax, norm;
    float scale;
  };
  for (const Case& cs :
       {Case{37, 3, 16, 4, 40, false, true, 2.5f}, Case{5, 1, 7, 7, 3, false, true, 1.f},
        Case{50, 2, 100, 6, 64, true, true, 1.f}, Case{33, 4, 256, 8, 20, true, false, 3.f},
        Case{17, 3, 33, 2, 17, false, false, 4.9f}}) {
    RouterConfig c{cs.H, cs.E, cs.K, cs.D, cs.softmax, cs.norm, cs.scale};
    const Tensor x = normal(gen, {cs.T, cs.H * cs.D});
    const Tensor gate = normal(gen, {cs.H * cs.E, cs.D}, 1.0f / std::sqrt(float(cs.D)));
    const Tensor bias = normal(gen, {cs.H * cs.E}, cs.softmax ? 0.01f : 0.1f);
    for (DType xd : {DType::F32, DType::BF16}) {
      const std::string what = "T" + std::to_string(cs.T) + " H" + std::to_string(cs.H) + " E" +
                               std::to_string(cs.E) + " K" + std::to_string(cs.K) + " D" +
                               std::to_string(cs.D) + (cs.softmax ? " softmax " : " sigmoid ") +
                               std::string(dtype_name(xd));
      check_route(dev, x, xd, gate, bias, c, what.c_str());
    }
  }
}

TEST(CudaMoe, RouterRealWidths) {
  Device dev;
  std::mt19937 gen(12);
  const RouterConfig c{12, 256, 6, 256, false, true, 4.9f};
  const Tensor x = normal(gen, {1500, 12 * 256});
  const Tensor gate = normal(gen, {12 * 256, 256}, 1.0f / 16);
  const Tensor bias = normal(gen, {12 * 256}, 0.05f);
  check_route(dev, x, DType::BF16, gate, bias, c, "T1500 12x256 top-6 D256 bf16");
  check_route(dev, x, DType::F32, gate, bias, c, "T1500 12x256 top-6 D256 f32");
}

// The router kernel loads BF16 x 16 bytes at a time when head_dim % 8 == 0 and x is 16-byte
// aligned, else element by element: the same x through both loaders (a fresh allocation, and a view
// one element into a larger buffer) must give the same logits, indices and weights, bit for bit.
TEST(CudaMoe, RouterVectorLoadsMatchElementLoads) {
  Device dev;
  std::mt19937 gen(14);
  const RouterConfig c{3, 64, 6, 64, false, true, 4.9f};
  const int64_t T = 201, W = c.heads * c.head_dim;
  const Tensor x = normal(gen, {T * W + 1}).to(DType::BF16);
  const Tensor gate = normal(gen, {c.heads * c.experts, c.head_dim}, 0.125f);
  const Tensor bias = normal(gen, {c.heads * c.experts}, 0.05f);
  const Tensor gd = to_device(dev, gate), bd = to_device(dev, bias);
  const Tensor x_al = to_device(dev, x.slice_rows(1, T * W + 1).clone().reshape({T, W}));
  const Tensor x_mis = to_device(dev, x).slice_rows(1, T * W + 1).reshape({T, W});
  const Routing a = route(dev, x_al, gd, bd, c, true), b = route(dev, x_mis, gd, bd, c, true);
  for (auto [ta, tb, name] :
       {std::tuple{a.indices, b.indices, "indices"}, std::tuple{a.weights, b.weights, "weights"},
        std::tuple{a.logits, b.logits, "logits"}}) {
    const Tensor ha = to_host(dev, ta), hb = to_host(dev, tb);
    EXPECT_EQ(std::memcmp(ha.raw(), hb.raw(), size_t(ha.nbytes())), 0)
        << name << ": vector and element loads differ";
  }
  check_route(dev, x.slice_rows(1, T * W + 1).clone().reshape({T, W}).to_f32(), DType::BF16, gate,
              bias, c, "T201 H3 E64 K6 D64 bf16 (vector loads)");
}

// Equal biased scores: experts 2, 5, 9 have the same gate row and bias, far above the rest, so
// every token must pick exactly 2, 5, 9 in that order (the CPU's lower-index-first rule).
TEST(CudaMoe, RouterTieRule) {
  Device dev;
  std::mt19937 gen(13);
  const RouterConfig c{2, 12, 3, 32, false, true, 1.f};
  const Tensor x = normal(gen, {40, 64});
  Tensor gate = normal(gen, {24, 32}, 0.2f);
  Tensor bias = normal(gen, {24}, 0.01f);
  for (int h = 0; h < 2; ++h)
    for (int e : {5, 9}) {
      std::memcpy(gate.f32() + (h * 12 + e) * 32, gate.f32() + (h * 12 + 2) * 32,
                  32 * sizeof(float));
      bias.f32()[h * 12 + e] = bias.f32()[h * 12 + 2] = 10.0f;
    }
  const Routing r = route(dev, to_device(dev, x), to_device(dev, gate), to_device(dev, bias), c);
  const Tensor idx = to_host(dev, r.indices), w = to_host(dev, r.weights);
  for (int64_t p = 0; p < 80; ++p) {
    EXPECT_EQ(idx.data<int32_t>()[p * 3 + 0], 2);
    EXPECT_EQ(idx.data<int32_t>()[p * 3 + 1], 5);
    EXPECT_EQ(idx.data<int32_t>()[p * 3 + 2], 9);
    EXPECT_FLOAT_EQ(w.f32()[p * 3], 1.0f / 3);
  }
}

TEST(CudaMoe, BadInputs) {
  Device dev;
  const RouterConfig c{2, 8, 2, 16, false, true, 1.f};
  const Tensor x = to_device(dev, hash_uniform({4, 32}, DType::F32, 1.f, 1));
  const Tensor gate = to_device(dev, hash_uniform({16, 16}, DType::F32, 1.f, 2));
  const Tensor bias = to_device(dev, hash_uniform({16}, DType::F32, 1.f, 3));
  EXPECT_THROW(route(dev, x, gate, to_device(dev, hash_uniform({15}, DType::F32, 1.f, 3)), c),
               BadInput);
  EXPECT_THROW(route(dev, to_device(dev, hash_uniform({4, 31}, DType::F32, 1.f, 1)), gate, bias, c),
               BadInput);
  RouterConfig big = c;
  big.top_k = 9;
  EXPECT_THROW(route(dev, x, gate, bias, big), BadInput);
  const Routing r = route(dev, x, gate, bias, c);
  ExpertWeights w{to_device(dev, hash_uniform({16, 16, 24}, DType::F32, 1.f, 4)),
                  to_device(dev, hash_uniform({16, 16, 24}, DType::F32, 1.f, 5)),
                  to_device(dev, hash_uniform({16, 16, 24}, DType::F32, 1.f,
                                              6))};  // down should be [16, 24, 16]
  EXPECT_THROW(routed_experts(dev, x, r, w, c, DType::F32), BadInput);
}

// ---- experts reference: the CPU oracle (ops/cpu/moe.cpp)
// ---------------------------------------------
struct Problem {
  RouterConfig c;
  int64_t T = 0, De = 0;
  Tensor x;                  // F32 host [T, H*D] (values exactly representable in the device dtype)
  std::vector<int32_t> idx;  // [T, H, K]
  std::vector<float> w;      // [T, H, K]
  Tensor gate, up, down;     // host, [in, out], F32 or BF16
};

// Expert choices skewed towards low indices (some experts get ~5x the mean, some none), distinct
// per (token, head), weights in [0.1, 1.1).
Problem make_problem(int64_t T, int64_t H, int64_t E, int64_t K, int64_t D, int64_t De, DType wd,
                     uint32_t seed) {
  Problem p;
  p.c = RouterConfig{H, E, K, D, false, true, 1.f};
  p.T = T;
  p.De = De;
  std::mt19937 gen(seed);
  p.x = normal(gen, {T, H * D});
  if (wd == DType::BF16) p.x = p.x.to(DType::BF16).to_f32();
  std::uniform_real_distribution<float> u(0.f, 1.f);
  p.idx.resize(T * H * K);
  p.w.resize(T * H * K);
  for (int64_t th = 0; th < T * H; ++th) {
    std::vector<int> chosen;
    while (int64_t(chosen.size()) < K) {
      const float r = u(gen);
      const int e = std::min<int>(int(E - 1), int(r * r * E));
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    }
    for (int64_t k = 0; k < K; ++k) {
      p.idx[th * K + k] = chosen[k];
      p.w[th * K + k] = 0.1f + u(gen);
    }
  }
  p.gate = hash_uniform({H * E, D, De}, wd, std::sqrt(3.0f / D), seed * 3 + 1);
  p.up = hash_uniform({H * E, D, De}, wd, std::sqrt(3.0f / D), seed * 3 + 2);
  p.down = hash_uniform({H * E, De, D}, wd, std::sqrt(3.0f / De), seed * 3 + 3);
  return p;
}

Tensor ref_experts(const Problem& p, bool bf16) {
  const int64_t T = p.T, H = p.c.heads, K = p.c.top_k, W = H * p.c.head_dim;
  ops::MoeConfig mc;
  mc.heads = H, mc.experts = p.c.experts, mc.top_k = K, mc.head_dim = p.c.head_dim;
  ops::Routing r;
  r.indices = Tensor::from_data({T, H, K}, DType::I32, p.idx.data());
  r.weights = Tensor::from_data({T, H, K}, DType::F32, p.w.data());
  ops::ExpertWeights w;
  w.inter = p.De, w.begin = 0, w.end = p.c.experts;
  w.gate = {p.gate}, w.up = {p.up}, w.down = {p.down};
  Tensor out = Tensor::empty({T, W}, bf16 ? DType::BF16 : DType::F32);
  ops::cpu::routed_experts(p.x, r, w, mc, out);
  return out.to_f32();
}

// [G, a, b] -> [G, b, a]
Tensor transpose_stack(const Tensor& t) {
  const int64_t G = t.size(0), a = t.size(1), b = t.size(2);
  const size_t es = t.dtype() == DType::F32 ? 4 : 2;
  Tensor o = Tensor::empty({G, b, a}, t.dtype());
  const char* s = static_cast<const char*>(t.raw());
  char* d = static_cast<char*>(o.mutable_raw());
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        std::memcpy(d + ((g * b + j) * a + i) * es, s + ((g * a + i) * b + j) * es, es);
  return o;
}

struct DeviceProblem {
  Tensor x;
  Routing r;
  ExpertWeights w, wk;  // [in, out] and K-major
};

DeviceProblem upload(Device& dev, const Problem& p, DType xd, bool with_k_major) {
  DeviceProblem d;
  d.x = to_device(dev, p.x.to(xd));
  d.r.indices = to_device(dev, ints(p.idx, {p.T, p.c.heads, p.c.top_k}));
  d.r.weights =
      to_device(dev, Tensor::from_data({p.T, p.c.heads, p.c.top_k}, DType::F32, p.w.data()));
  d.w = ExpertWeights{to_device(dev, p.gate), to_device(dev, p.up), to_device(dev, p.down)};
  if (with_k_major)
    d.wk = ExpertWeights{to_device(dev, transpose_stack(p.gate)),
                         to_device(dev, transpose_stack(p.up)),
                         to_device(dev, transpose_stack(p.down)), true};
  return d;
}

void check_experts(Device& dev, const Problem& p, DType dt, bool with_k_major,
                   const std::string& what) {
  const bool bf16 = dt == DType::BF16;
  const Tensor ref = ref_experts(p, bf16);
  const DeviceProblem d = upload(dev, p, dt, with_k_major);
  std::vector<std::pair<ExpertPath, const char*>> paths = {{ExpertPath::Simt, "simt"}};
  if (grouped_supported(dev, dt, p.c, p.De, dt)) paths.push_back({ExpertPath::Grouped, "grouped"});
  for (auto [path, pname] : paths) {
    for (bool km : {false, true}) {
      if (km && !with_k_major) continue;
      const Tensor got = routed_experts(dev, d.x, d.r, km ? d.wk : d.w, p.c, dt, path);
      const double e = nmse(to_host(dev, got), ref);
      const double bound = bf16 ? kNmseBf16 : kNmseF32;
      std::printf("  experts %-52s %-5s %-7s nmse %.2e (bound %.0e)\n", what.c_str(), pname,
                  km ? "k-major" : "in,out", e, bound);
      EXPECT_LE(e, bound) << what << " " << pname << (km ? " k-major" : "");
      // Deterministic: a second run gives the same bits.
      const Tensor again =
          to_host(dev, routed_experts(dev, d.x, d.r, km ? d.wk : d.w, p.c, dt, path));
      const Tensor first = to_host(dev, got);
      EXPECT_EQ(std::memcmp(first.raw(), again.raw(), size_t(first.nbytes())), 0)
          << what << " determinism";
    }
  }
}

TEST(CudaMoe, ExpertsSmallShapes) {
  Device dev;
  struct Case {
    int64_t T, H, E, K, D, De;
  };
  uint32_t seed = 100;
  for (const Case& cs : {Case{50, 3, 8, 2, 48, 80}, Case{7, 1, 5, 5, 17, 33},
                         Case{130, 2, 16, 3, 64, 128}, Case{200, 2, 32, 6, 128, 192}}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      const Problem p = make_problem(cs.T, cs.H, cs.E, cs.K, cs.D, cs.De, dt, ++seed);
      const std::string what = "T" + std::to_string(cs.T) + " H" + std::to_string(cs.H) + " E" +
                               std::to_string(cs.E) + " K" + std::to_string(cs.K) + " D" +
                               std::to_string(cs.D) + " De" + std::to_string(cs.De) + " " +
                               std::string(dtype_name(dt));
      check_experts(dev, p, dt, true, what);
    }
  }
}

// The real widths: D 256, De 1280, top-6. F32 with 2 heads (the fp32 stacks of 12 heads are 12 GB);
// BF16 with all 12 heads x 256 experts (6 GB of expert weights).
TEST(CudaMoe, ExpertsRealWidths) {
  Device dev;
  {
    const Problem p = make_problem(300, 2, 256, 6, 256, 1280, DType::F32, 7);
    check_experts(dev, p, DType::F32, false, "T300 2x256 top-6 D256 De1280 F32");
  }
  {
    const Problem p = make_problem(400, 12, 256, 6, 256, 1280, DType::BF16, 8);
    check_experts(dev, p, DType::BF16, false, "T400 12x256 top-6 D256 De1280 BF16");
  }
}

// A real-width problem (12 x 256 experts, top-6, D 256, De 1280, bf16) at T tokens whose routing is
// the GPU router's own on random x: the reference is then fed that routing, so routing flips cannot
// blur an expert check (the router has its own tests). xd, r: the device x and routing.
struct RoutedProblem {
  Problem p;
  Tensor xd;
  Routing r;
};
RoutedProblem routed_real_widths(Device& dev, int64_t T, uint32_t x_seed, uint32_t weight_seed) {
  std::mt19937 gen(x_seed);
  const int64_t H = 12, E = 256, K = 6, D = 256, De = 1280;
  const RouterConfig c{H, E, K, D, false, true, 4.9f};
  RoutedProblem rp{
      make_problem(1, H, E, K, D, De, DType::BF16, weight_seed), {}, {}};  // weights only
  Problem& p = rp.p;
  p.c = c;
  p.T = T;
  p.x = normal(gen, {T, H * D}).to(DType::BF16).to_f32();
  const Tensor gate = normal(gen, {H * E, D}, 1.0f / 16), bias = normal(gen, {H * E}, 0.05f);
  rp.xd = to_device(dev, p.x.to(DType::BF16));
  rp.r = route(dev, rp.xd, to_device(dev, gate), to_device(dev, bias), c);
  const Tensor idx = to_host(dev, rp.r.indices), w = to_host(dev, rp.r.weights);
  p.idx.assign(idx.data<int32_t>(), idx.data<int32_t>() + idx.numel());
  p.w.assign(w.f32(), w.f32() + w.numel());
  return rp;
}

// Router -> permutation -> experts -> combine as the model runs it, at the real widths with T in
// the thousands, against the reference fed the GPU's own routing.
TEST(CudaMoe, RouteThenExpertsRealWidths) {
  Device dev;
  const int64_t T = 2048;
  const RoutedProblem rp = routed_real_widths(dev, T, 21, 9);
  const Problem& p = rp.p;
  const RouterConfig& c = p.c;
  const Tensor& xd = rp.xd;
  const Routing& r = rp.r;
  const Tensor ref = ref_experts(p, true);
  const ExpertWeights ew{to_device(dev, p.gate), to_device(dev, p.up), to_device(dev, p.down)};
  std::vector<ExpertPath> paths = {ExpertPath::Simt};
  if (grouped_supported(dev, DType::BF16, c, p.De, DType::BF16))
    paths.push_back(ExpertPath::Grouped);
  for (ExpertPath path : paths) {
    const Tensor got = routed_experts(dev, xd, r, ew, c, DType::BF16, path);
    const double e = nmse(to_host(dev, got), ref);
    std::printf("  route+experts T%ld 12x256 top-6 BF16 %-5s nmse %.2e (bound %.0e)\n", long(T),
                path == ExpertPath::Simt ? "simt" : "grouped", e, kNmseBf16);
    EXPECT_LE(e, kNmseBf16);
  }
}

// ---- the grouped path (grouped.h)
// ------------------------------------------------------------------ permute -> grouped_expert_rows
// -> combine, as moe.cu's routed_experts runs the other paths.
Tensor grouped_routed(Device& dev, const Tensor& x, const Routing& r, const GroupedWeights& gw,
                      const RouterConfig& c, int64_t scratch_bytes = int64_t{3} << 30) {
  const Permutation perm = permute(dev, r, c);
  GroupedOptions opt;
  opt.scratch_bytes = scratch_bytes;
  const Tensor rows = grouped_expert_rows(dev, x, r, perm, gw, c, DType::BF16, opt);
  return combine(dev, rows, r, perm, c, DType::BF16);
}

// Both weight layouts; the fused kernel where the expert width is above 48, else the two-GEMM
// fallback.
void check_grouped(Device& dev, const Problem& p, bool with_k_major, const std::string& what) {
  const Tensor ref = ref_experts(p, true);
  const DeviceProblem d = upload(dev, p, DType::BF16, with_k_major);
  for (bool km : {false, true}) {
    if (km && !with_k_major) continue;
    const GroupedWeights gw = pack_grouped_weights(dev, km ? d.wk : d.w, p.c);
    const Tensor got = to_host(dev, grouped_routed(dev, d.x, d.r, gw, p.c));
    const double e = nmse(got, ref);
    std::printf("  experts %-52s %-8s %-7s nmse %.2e (bound %.0e)\n", what.c_str(),
                p.De > 48 ? "fused" : "two-GEMM", km ? "k-major" : "in,out", e, kNmseBf16);
    EXPECT_LE(e, kNmseBf16) << what << (km ? " k-major" : "");
    // Deterministic, and chunking by heads (here one head per chunk) changes nothing.
    const Tensor again = to_host(dev, grouped_routed(dev, d.x, d.r, gw, p.c));
    EXPECT_EQ(std::memcmp(got.raw(), again.raw(), size_t(got.nbytes())), 0)
        << what << " grouped determinism";
    const Tensor chunked = to_host(dev, grouped_routed(dev, d.x, d.r, gw, p.c, 1));
    EXPECT_EQ(std::memcmp(got.raw(), chunked.raw(), size_t(got.nbytes())), 0)
        << what << " grouped chunked by head";
  }
}

bool has_grouped(Device& dev, const RouterConfig& c, int64_t De) {
  return grouped_supported(dev, DType::BF16, c, De, DType::BF16);
}

TEST(CudaMoe, ExpertsGroupedSmallShapes) {
  Device dev;
  struct Case {
    int64_t T, H, E, K, D, De;
  };
  uint32_t seed = 300;
  // Partial tiles in M (groups of a few rows up to > 128) and N (2 De and D below the 256-wide
  // tile), single-row problems with most groups empty, several heads per chunk.
  for (const Case& cs :
       {Case{50, 3, 8, 2, 48, 80}, Case{130, 2, 16, 3, 64, 128}, Case{200, 2, 32, 6, 128, 192},
        Case{1, 2, 16, 6, 64, 64}, Case{1000, 2, 4, 2, 32, 40}, Case{333, 3, 8, 3, 256, 136}}) {
    const Problem p = make_problem(cs.T, cs.H, cs.E, cs.K, cs.D, cs.De, DType::BF16, ++seed);
    if (!has_grouped(dev, p.c, cs.De))
      GTEST_SKIP() << "the grouped path needs a CUTLASS build and an sm_90 GPU";
    const std::string what = "T" + std::to_string(cs.T) + " H" + std::to_string(cs.H) + " E" +
                             std::to_string(cs.E) + " K" + std::to_string(cs.K) + " D" +
                             std::to_string(cs.D) + " De" + std::to_string(cs.De);
    check_grouped(dev, p, true, what);
  }
}

// The real widths, all 12 heads x 256 experts (BF16), with skewed loads and empty groups; then the
// GPU router's own routing at T = 2,048 and 4,096 (groups of up to a few hundred rows, several M
// tiles per group).
TEST(CudaMoe, ExpertsGroupedRealWidths) {
  Device dev;
  {
    const Problem p = make_problem(400, 12, 256, 6, 256, 1280, DType::BF16, 8);
    if (!has_grouped(dev, p.c, p.De))
      GTEST_SKIP() << "the grouped path needs a CUTLASS build and an sm_90 GPU";
    check_grouped(dev, p, false, "T400 12x256 top-6 D256 De1280 BF16");
  }
  for (const int64_t T : {int64_t{2048}, int64_t{4096}}) {
    const RoutedProblem rp = routed_real_widths(dev, T, uint32_t(21 + T), uint32_t(9 + T));
    const Problem& p = rp.p;
    const RouterConfig& c = p.c;
    const Tensor& xd = rp.xd;
    const Routing& r = rp.r;
    const Tensor ref = ref_experts(p, true);
    const ExpertWeights ew{to_device(dev, p.gate), to_device(dev, p.up), to_device(dev, p.down)};
    const GroupedWeights gw = pack_grouped_weights(dev, ew, c);
    // The fused kernel on the router's own routing (groups of a few to a few hundred rows, so units
    // of <= 64 rows, whose MMAs warp group 1 skips, beside full ones).
    const Tensor got = to_host(dev, grouped_routed(dev, xd, r, gw, c));
    const double e = nmse(got, ref);
    std::printf("  route+experts T%ld 12x256 top-6 BF16 fused nmse %.2e (bound %.0e)\n", long(T), e,
                kNmseBf16);
    EXPECT_LE(e, kNmseBf16);
    const Tensor chunked = to_host(dev, grouped_routed(dev, xd, r, gw, c, 1));
    EXPECT_EQ(std::memcmp(got.raw(), chunked.raw(), size_t(got.nbytes())), 0)
        << "T" << T << " chunked by head";
    // The one-call overload (packs ExpertWeights itself) gives the same bits.
    const Permutation perm = permute(dev, r, c);
    const Tensor rows1 = to_host(dev, grouped_expert_rows(dev, xd, r, perm, ew, c, DType::BF16));
    const Tensor rows2 = to_host(dev, grouped_expert_rows(dev, xd, r, perm, gw, c, DType::BF16));
    EXPECT_EQ(std::memcmp(rows1.raw(), rows2.raw(), size_t(rows1.nbytes())), 0)
        << "T" << T << " overloads";
  }
}

// Bad operands are refused with the tensor named.
TEST(CudaMoe, ExpertsGroupedRejects) {
  Device dev;
  const Problem p = make_problem(20, 2, 8, 2, 64, 64, DType::BF16, 5);
  const DeviceProblem d = upload(dev, p, DType::BF16, false);
  if (!has_grouped(dev, p.c, p.De))
    GTEST_SKIP() << "the grouped path needs a CUTLASS build and an sm_90 GPU";
  const GroupedWeights gw = pack_grouped_weights(dev, d.w, p.c);
  const Permutation perm = permute(dev, d.r, p.c);
  EXPECT_THROW(grouped_expert_rows(dev, d.x, d.r, perm, gw, p.c, DType::F32), BadInput);
  const Tensor x32 = to_device(dev, p.x);
  EXPECT_THROW(grouped_expert_rows(dev, x32, d.r, perm, gw, p.c, DType::BF16), BadInput);
  GroupedWeights bad = gw;
  bad.inter = 32;
  EXPECT_THROW(grouped_expert_rows(dev, d.x, d.r, perm, bad, p.c, DType::BF16), BadInput);
}

// ---- router top-K on integer logits, and the combine bit for bit
// ---------------------------------- Integer x and gate give exact integer logits (any summation
// order), so the expected routing is the CPU oracle's fp32 algorithm (moe.cpp route: sigmoid, +
// bias, partial_sort with the lower index first on equal scores, L1 norm, route_scale) applied to
// the same logits, with no near-tie excuse: logits >= 17 all give a sigmoid of exactly 1.0f, so
// most (token, head)s hold many exactly equal biased scores, across lanes and within a lane of the
// top-K warp.
TEST(CudaMoe, RouterIntegerLogitsExactTies) {
  Device dev;
  const int64_t T = 700, H = 12, E = 256, K = 6, D = 256;
  const RouterConfig c{H, E, K, D, false, true, 4.9f};
  std::mt19937 gen(31);
  std::uniform_int_distribution<int> tern(-1, 1);
  Tensor x = Tensor::empty({T, H * D}, DType::F32), gate = Tensor::empty({H * E, D}, DType::F32);
  // -2 .. 2. (gen() is unsigned and 64-bit: without the int cast, -1 * (1 + gen() % 2) wrapped to
  // ~2^64, and the "integer" logits were sums of +-2^64 and +-1 that only an in-order summation
  // reproduced exactly.)
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = float(tern(gen) * (1 + int(gen() % 2)));
  for (int64_t i = 0; i < gate.numel(); ++i) gate.f32()[i] = float(tern(gen));
  Tensor bias = Tensor::empty({H * E}, DType::F32);
  for (int64_t i = 0; i < H * E; ++i)
    bias.f32()[i] = 0.125f * float(int(gen() % 3) - 1);  // three classes
  for (DType xd : {DType::F32, DType::BF16}) {           // the integers are exact in bf16 too
    const Tensor xdev = to_device(dev, x.to(xd)), gdev = to_device(dev, gate),
                 bdev = to_device(dev, bias);
    const Routing r = route(dev, xdev, gdev, bdev, c, true);
    const Routing r2 = route(dev, xdev, gdev, bdev, c, false);  // the path without kept logits
    const Tensor idx = to_host(dev, r.indices), w = to_host(dev, r.weights),
                 lg = to_host(dev, r.logits);
    const Tensor idx2 = to_host(dev, r2.indices), w2 = to_host(dev, r2.weights);
    EXPECT_EQ(std::memcmp(idx.raw(), idx2.raw(), size_t(idx.nbytes())), 0);
    EXPECT_EQ(std::memcmp(w.raw(), w2.raw(), size_t(w.nbytes())), 0);
    int64_t bad_logits = 0, mismatches = 0, tied_pairs = 0;
    double max_dw = 0;
    std::vector<float> score(E), biased(E);
    std::vector<int> order(E);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t p = t * H + h;
        for (int64_t e = 0; e < E; ++e) {
          double s = 0;
          for (int64_t k = 0; k < D; ++k)
            s += double(x.f32()[t * H * D + h * D + k]) * gate.f32()[(h * E + e) * D + k];
          const float l = lg.f32()[p * E + e];
          if (double(l) != s && ++bad_logits <= 5)  // the first few, to say what went wrong
            std::printf("  bad logit: token %ld head %ld expert %ld: %.9g, want %.9g\n", long(t),
                        long(h), long(e), double(l), s);
          score[e] = 1.0f / (1.0f + std::exp(-l));
          biased[e] = score[e] + bias.f32()[h * E + e];
        }
        std::iota(order.begin(), order.end(), 0);
        // K + 1 sorted (the comparator is a strict total order, so the first K are moe.cpp's
        // top-K).
        std::partial_sort(order.begin(), order.begin() + K + 1, order.end(), [&](int a, int b) {
          return biased[a] > biased[b] || (biased[a] == biased[b] && a < b);
        });
        if (biased[order[K - 1]] == biased[order[K]]) ++tied_pairs;  // the tie rule decides the set
        float l1 = 0;
        for (int64_t k = 0; k < K; ++k) l1 += std::fabs(score[order[k]]);
        bool same = true;
        for (int64_t k = 0; k < K; ++k) {
          same = same && idx.data<int32_t>()[p * K + k] == order[k];
          const float want = score[order[k]] / std::max(l1, 1e-12f) * c.route_scale;
          max_dw = std::max(max_dw, double(std::fabs(w.f32()[p * K + k] - want)));
        }
        mismatches += same ? 0 : 1;
      }
    std::printf(
        "  route integer logits %s: pairs %ld, tie at the K-th choice %ld, mismatches %ld, max|dw| "
        "%.2e\n",
        std::string(dtype_name(xd)).c_str(), long(T * H), long(tied_pairs), long(mismatches),
        max_dw);
    EXPECT_EQ(bad_logits, 0);
    EXPECT_EQ(mismatches, 0);
    EXPECT_GT(tied_pairs, T * H / 10);        // the case does exercise the tie rule
    EXPECT_LE(max_dw, 4e-7 * c.route_scale);  // expf vs std::exp: an ulp or two of the scores
  }
}

// moe.h's combine contract, on the CPU: per (token, head) the K rows in ascending expert order
// (equal experts: the lower k first), summed from 0 in fp32, with BF16 out the running sum rounded
// to bf16 (round to nearest even) after each add; then stored in the out dtype.
Tensor ref_combine(const Tensor& rows, const std::vector<int32_t>& idx,
                   const std::vector<int32_t>& pos, int64_t TH, int64_t K, int64_t D, DType out) {
  const Tensor r = rows.to_f32();
  Tensor o = Tensor::empty({TH * D}, DType::F32);
  const bool bf16 = out == DType::BF16;
  auto rnd = [](float v) { return bf16_to_f32(f32_to_bf16(v)); };
  std::vector<int> ord(K);
  for (int64_t th = 0; th < TH; ++th) {
    std::iota(ord.begin(), ord.end(), 0);
    std::stable_sort(ord.begin(), ord.end(),
                     [&](int a, int b) { return idx[th * K + a] < idx[th * K + b]; });
    for (int64_t d = 0; d < D; ++d) {
      float sum = 0.f;
      for (int64_t k = 0; k < K; ++k) {
        const float v = r.f32()[int64_t(pos[th * K + ord[k]]) * D + d];
        sum = bf16 ? rnd(sum + v) : sum + v;
      }
      o.f32()[th * D + d] = sum;
    }
  }
  return o.to(out);
}

// permute against std::stable_sort of the slots by group h*E + e (the order the CPU's and the
// grouped kernels' rows follow): sorted_slot, its inverse slot_pos, the group offsets and the
// 64-row tile table, element for element. Shapes: a tail tile of tokens (T 1, 33, 1000, 4097
// against 32-token tiles), K 16 (every lane of the walk), E 256 (every counter), repeated experts
// in a (token, head) (their k order must hold) and most groups empty (E 200 with T 1).
TEST(CudaMoe, PermuteMatchesStableSort) {
  Device dev;
  std::mt19937 gen(61);
  // dup 0: distinct experts per (token, head); 1: K draws from experts 0-3 everywhere (repeats in
  // every warp: the walk); n > 1: every n-th (token, head) repeats its first expert (the walk only
  // in the warps holding one, the mask path in the rest of the tile).
  struct Case {
    int64_t T, H, E, K;
    int dup;
  };
  for (const Case& cs : {Case{1, 3, 200, 6, 0}, Case{33, 2, 16, 16, 0}, Case{1000, 12, 256, 6, 0},
                         Case{4097, 4, 64, 8, 0}, Case{300, 3, 12, 9, 1}, Case{77, 1, 16, 16, 1},
                         Case{2000, 2, 64, 6, 97}}) {
    const int64_t S = cs.T * cs.H * cs.K, G = cs.H * cs.E;
    std::vector<int32_t> idx(S);
    for (int64_t th = 0; th < cs.T * cs.H; ++th) {
      std::vector<int32_t> e(cs.E);
      std::iota(e.begin(), e.end(), 0);
      std::shuffle(e.begin(), e.end(), gen);
      for (int64_t k = 0; k < cs.K; ++k)
        idx[th * cs.K + k] = cs.dup == 1 ? int32_t(gen() % 4) : e[k];
      if (cs.dup > 1 && th % cs.dup == 0) idx[th * cs.K + cs.K - 1] = idx[th * cs.K];
    }
    Routing r;
    r.indices = to_device(dev, ints(idx, {cs.T, cs.H, cs.K}));
    r.weights = to_device(dev, hash_uniform({cs.T, cs.H, cs.K}, DType::F32, 1.f, 9));
    const RouterConfig c{cs.H, cs.E, cs.K, 64, false, true, 1.f};
    const Permutation p = permute(dev, r, c);
    std::vector<int32_t> want(S), want_pos(S), want_off(G + 1, 0);
    std::iota(want.begin(), want.end(), 0);
    auto group = [&](int32_t s) { return int64_t((s / cs.K) % cs.H) * cs.E + idx[s]; };
    std::stable_sort(want.begin(), want.end(),
                     [&](int32_t a, int32_t b) { return group(a) < group(b); });
    for (int64_t i = 0; i < S; ++i) want_pos[want[i]] = int32_t(i);
    for (int64_t s = 0; s < S; ++s) ++want_off[group(int32_t(s)) + 1];
    for (int64_t g = 0; g < G; ++g) want_off[g + 1] += want_off[g];
    auto same = [](const Tensor& got, const std::vector<int32_t>& v) {
      return got.numel() == int64_t(v.size()) &&
             std::memcmp(got.raw(), v.data(), v.size() * 4) == 0;
    };
    const Tensor got = to_host(dev, p.sorted_slot), pos = to_host(dev, p.slot_pos),
                 off = to_host(dev, p.offsets);
    // The tile table: per group, ceil(rows / 64) tiles of consecutive rows, in group order.
    std::vector<int32_t> tg, tr;
    for (int64_t g = 0; g < G; ++g)
      for (int32_t row = want_off[g]; row < want_off[g + 1]; row += p.tile_rows) {
        tg.push_back(int32_t(g));
        tr.push_back(row);
      }
    const Tensor count = to_host(dev, p.tile_count);
    const int32_t tiles = count.data<int32_t>()[0];
    const Tensor tgs = to_host(dev, p.tile_group), trs = to_host(dev, p.tile_row);
    const bool tiles_ok = tiles == int32_t(tg.size()) &&
                          std::memcmp(tgs.raw(), tg.data(), tg.size() * 4) == 0 &&
                          std::memcmp(trs.raw(), tr.data(), tr.size() * 4) == 0;
    std::printf("  permute T%ld H%ld E%ld K%ld%s: sorted %s, inverse %s, offsets %s, %d tiles %s\n",
                long(cs.T), long(cs.H), long(cs.E), long(cs.K), cs.dup ? " (repeated experts)" : "",
                same(got, want) ? "ok" : "DIFFER", same(pos, want_pos) ? "ok" : "DIFFER",
                same(off, want_off) ? "ok" : "DIFFER", tiles, tiles_ok ? "ok" : "DIFFER");
    EXPECT_TRUE(same(got, want));
    EXPECT_TRUE(same(pos, want_pos));
    EXPECT_TRUE(same(off, want_off));
    EXPECT_TRUE(tiles_ok);
    // tile_rows 0 (the grouped path): the same order, no tile table.
    const Permutation p0 = permute(dev, r, c, 0);
    EXPECT_TRUE(same(to_host(dev, p0.sorted_slot), want));
    EXPECT_TRUE(same(to_host(dev, p0.offsets), want_off));
    EXPECT_EQ(p0.max_tiles, 0);
    EXPECT_FALSE(p0.tile_group.defined());
  }
}

TEST(CudaMoe, CombineBitExact) {
  Device dev;
  std::mt19937 gen(41);
  struct Case {
    int64_t T, H, E, K, D;
    bool dup;
  };
  // D 256 / 48: the 16-byte path (one / a partial chunk per lane); D 17: the scalar path; K 16: two
  // batches of 8 rows; dup: repeated experts in a (token, head), so the stable order matters.
  for (const Case& cs : {Case{2000, 12, 256, 6, 256, false}, Case{37, 3, 16, 4, 48, false},
                         Case{29, 2, 40, 16, 64, false}, Case{31, 2, 12, 9, 17, true},
                         Case{50, 1, 8, 1, 8, false}, Case{40, 3, 8, 6, 32, true}}) {
    const int64_t TH = cs.T * cs.H, S = TH * cs.K;
    std::vector<int32_t> idx(S), pos(S);
    for (int64_t th = 0; th < TH; ++th) {
      std::vector<int32_t> e(cs.E);
      std::iota(e.begin(), e.end(), 0);
      std::shuffle(e.begin(), e.end(), gen);
      for (int64_t k = 0; k < cs.K; ++k) idx[th * cs.K + k] = cs.dup ? int32_t(gen() % 3) : e[k];
    }
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), gen);  // slot -> sorted row: any bijection
    Routing r;
    r.indices = to_device(dev, ints(idx, {cs.T, cs.H, cs.K}));
    r.weights = to_device(dev, hash_uniform({cs.T, cs.H, cs.K}, DType::F32, 1.f, 7));
    Permutation perm;
    perm.slot_pos = to_device(dev, ints(pos, {S}));
    const RouterConfig c{cs.H, cs.E, cs.K, cs.D, false, true, 1.f};
    // spread: each value times 2^(-20..20), so the running sums meet every exponent gap (the bf16
    // kernel adds in bf16x2 and relies on the fp32 sum of two bf16 values rounding as the exact one
    // does).
    for (bool spread : {false, true})
      for (DType rd : {DType::BF16, DType::F32})
        for (DType od : {DType::BF16, DType::F32}) {
          const size_t es = static_cast<size_t>(dtype_nbytes(od, 1));
          Tensor rows = hash_uniform({S, cs.D}, rd, 2.f, uint64_t(cs.T * 131 + cs.D));
          if (spread) {
            Tensor f = rows.to_f32();
            for (int64_t i = 0; i < f.numel(); ++i)
              f.f32()[i] = std::ldexp(f.f32()[i], int((i * 7919) % 41) - 20);
            rows = f.to(rd);  // exact: powers of two
          }
          const Tensor rows_d = to_device(dev, rows);
          const Tensor got = to_host(dev, combine(dev, rows_d, r, perm, c, od));
          const Tensor want = ref_combine(rows, idx, pos, TH, cs.K, cs.D, od);
          // Into the first H*D columns of a wider buffer (8 more columns: rows stay 16-byte
          // aligned, the vector kernel; 3 more: the scalar one): the same bits there, the rest
          // untouched.
          for (int64_t extra : {int64_t{8}, int64_t{3}}) {
            const int64_t HD = cs.H * cs.D, L = HD + extra;
            const Tensor fill = hash_uniform({cs.T, L}, od, 1.f, 5);
            Tensor into = to_device(dev, fill);
            combine(dev, rows_d, r, perm, c, od, &into);
            const Tensor gi = to_host(dev, into);
            int64_t bad = 0;
            for (int64_t t = 0; t < cs.T; ++t)
              for (int64_t j = 0; j < L; ++j) {
                const char* want_p = j < HD
                                         ? static_cast<const char*>(want.raw()) + (t * HD + j) * es
                                         : static_cast<const char*>(fill.raw()) + (t * L + j) * es;
                bad += std::memcmp(static_cast<const char*>(gi.raw()) + (t * L + j) * es, want_p,
                                   es) != 0;
              }
            EXPECT_EQ(bad, 0) << "combine into [T, H*D + " << extra << "]";
          }
          ASSERT_EQ(got.nbytes(), want.nbytes());
          int64_t diff = 0;
          for (int64_t i = 0; i < want.numel(); ++i)
            diff += std::memcmp(static_cast<const char*>(got.raw()) + i * es,
                                static_cast<const char*>(want.raw()) + i * es, es) != 0;
          std::printf(
              "  combine T%ld H%ld K%ld D%ld%s%s rows %s out %s: %ld of %ld elements differ\n",
              long(cs.T), long(cs.H), long(cs.K), long(cs.D), cs.dup ? " (repeated experts)" : "",
              spread ? " (spread exponents)" : "", std::string(dtype_name(rd)).c_str(),
              std::string(dtype_name(od)).c_str(), long(diff), long(want.numel()));
          EXPECT_EQ(diff, 0);
        }
  }
}

}  // namespace

// ---- the router's tensor-core kernel against its SIMT kernel
// ----------------------------------------- router.cu computes BF16 x's logits on sm_80+ with bf16
// MMAs on an exact three-way bf16 split of the gate (router_mma_kernel), else with fp32 FMA chains
// (router_kernel). launch_router (moe_internal.h; declared here so that these tests stay at the end
// of the file) can be told not to use the tensor cores and says whether it did.
bool launch_router(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias,
                   const RouterConfig& cfg, int64_t T, int* idx, float* w, float* logits,
                   bool allow_tensor_cores);

namespace {

struct RouterRun {
  Tensor idx, w, logits;  // on the host
  bool tensor_cores = false;
};

RouterRun run_router(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias,
                     const RouterConfig& c, bool allow_tensor_cores) {
  const int64_t T = x.size(0);
  const Tensor idx = cuda_empty(dev, {T, c.heads, c.top_k}, DType::I32);
  const Tensor w = cuda_empty(dev, {T, c.heads, c.top_k}, DType::F32);
  const Tensor lg = cuda_empty(dev, {T, c.heads, c.experts}, DType::F32);
  RouterRun r;
  r.tensor_cores = launch_router(dev, x, gate, bias, c, T, static_cast<int*>(device_ptr(idx)),
                                 static_cast<float*>(device_ptr(w)),
                                 static_cast<float*>(device_ptr(lg)), allow_tensor_cores);
  r.idx = to_host(dev, idx);
  r.w = to_host(dev, w);
  r.logits = to_host(dev, lg);
  return r;
}

// Both kernels on the same random BF16 x: the real widths, an odd small shape (E 33: one and a bit
// warp tiles of experts, the rest zero columns; D 40: a zero-padded k stage; T 77: a tail block; K
// 5) and one with element loads of x (D 19 is not a multiple of 8) and softmax scores. Logits: |tc
// - simt| <= bound x max(1, |float64 logit|), bound 2e-6 for D <= 64 and 1e-5 at D 256. Each kernel
// rounds in its own way: the fma chain to nearest once per k, the MMAs toward zero once per 16 k
// and plane (48 times at D 256, a bias). A float64 model of both (products exact, one truncation
// per MMA) gives max |tc - simt| 8e-7 at D 19 and 40 and 5.5e-6 at D 256 (over 2e5 logits; each
// kernel alone ~4e-6 off float64 at D 256, as the measured 2.5e-6 of the fma chain in
// bench/NOTES.md), and 1.2e-5 for a kernel that drops the lo plane: the small shapes catch that (6x
// over their bound), D 256 cannot (its own rounding is as large); a dropped mid plane, a wrong k,
// expert or token are >= 1e-3. The tensor-core logits are also held to check_route's 1e-5 against
// float64. Indices: identical wherever the float64 biased scores are not within 1e-5 of a tie;
// weights within 1e-6 x route_scale.
TEST(CudaMoe, RouterTensorCoresMatchSimt) {
  Device dev;
  std::mt19937 gen(51);
  struct Case {
    int64_t T, H, E, K, D;
    bool softmax;
    float scale;
  };
  for (const Case& cs :
       {Case{1000, 12, 256, 6, 256, false, 4.9f}, Case{77, 3, 33, 5, 40, false, 2.5f},
        Case{130, 2, 100, 4, 19, true, 1.f}}) {
    const RouterConfig c{cs.H, cs.E, cs.K, cs.D, cs.softmax, true, cs.scale};
    const Tensor xb = normal(gen, {cs.T, cs.H * cs.D}).to(DType::BF16);
    const Tensor gate = normal(gen, {cs.H * cs.E, cs.D}, 1.0f / std::sqrt(float(cs.D)));
    const Tensor bias = normal(gen, {cs.H * cs.E}, cs.softmax ? 0.01f : 0.05f);
    const Tensor xd = to_device(dev, xb), gd = to_device(dev, gate), bd = to_device(dev, bias);
    const RouterRun tc = run_router(dev, xd, gd, bd, c, true);
    if (!tc.tensor_cores)
      GTEST_SKIP() << "no tensor-core router on this GPU (sm_80+ with 104 KB of shared memory)";
    const RouterRun simt = run_router(dev, xd, gd, bd, c, false);
    EXPECT_FALSE(simt.tensor_cores);
    const RefRoute ref = ref_route(xb.to_f32(), gate, bias, c);
    const int64_t pairs = cs.T * cs.H, K = cs.K;
    double max_dl = 0, max_dl_tc = 0, max_dl_simt = 0, max_dw = 0;
    for (int64_t i = 0; i < pairs * cs.E; ++i) {
      const double lt = tc.logits.f32()[i], ls = simt.logits.f32()[i], lr = ref.logits[i],
                   n = std::max(1.0, std::fabs(lr));
      max_dl = std::max(max_dl, std::fabs(lt - ls) / n);
      max_dl_tc = std::max(max_dl_tc, std::fabs(lt - lr) / n);
      max_dl_simt = std::max(max_dl_simt, std::fabs(ls - lr) / n);
    }
    int64_t near_ties = 0, mismatches = 0;
    for (int64_t p = 0; p < pairs; ++p) {
      if (ref.gap[p] < 1e-5 * ref.top[p]) {
        ++near_ties;
        continue;
      }
      for (int64_t k = 0; k < K; ++k) {
        if (tc.idx.data<int32_t>()[p * K + k] != simt.idx.data<int32_t>()[p * K + k]) {
          ++mismatches;
          break;
        }
        max_dw =
            std::max(max_dw, double(std::fabs(tc.w.f32()[p * K + k] - simt.w.f32()[p * K + k])));
      }
    }
    const std::string what = "T" + std::to_string(cs.T) + " H" + std::to_string(cs.H) + " E" +
                             std::to_string(cs.E) + " K" + std::to_string(cs.K) + " D" +
                             std::to_string(cs.D) + (cs.softmax ? " softmax" : " sigmoid");
    std::printf(
        "  router tc vs simt %-32s pairs %ld near-ties %ld mismatches %ld  max|dw| %.2e  max rel "
        "dlogit %.2e"
        " (tc vs f64 %.2e, simt vs f64 %.2e)\n",
        what.c_str(), long(pairs), long(near_ties), long(mismatches), max_dw, max_dl, max_dl_tc,
        max_dl_simt);
    EXPECT_EQ(mismatches, 0) << what;
    EXPECT_LE(near_ties, pairs / 100 + 1) << what;
    EXPECT_LE(max_dw, 1e-6 * std::max(1.0f, cs.scale)) << what;
    EXPECT_LE(max_dl, cs.D <= 64 ? 2e-6 : 1e-5) << what;
    EXPECT_LE(max_dl_tc, 1e-5) << what;
  }
}

// RouterTieRule on the tensor-core kernel (that test's x is F32, which takes the SIMT kernel):
// experts 2, 37 and 200 (computed by warps 0, 1 and 6) share a gate row and a bias far above the
// rest, so their logits must be the same bits and every token must pick 2, 37, 200 in that order.
TEST(CudaMoe, RouterTensorCoresTieRule) {
  Device dev;
  std::mt19937 gen(52);
  const int64_t T = 70, H = 2, E = 256, D = 64;
  const RouterConfig c{H, E, 3, D, false, true, 1.f};
  const Tensor xb = normal(gen, {T, H * D}).to(DType::BF16);
  Tensor gate = normal(gen, {H * E, D}, 0.125f);
  Tensor bias = normal(gen, {H * E}, 0.01f);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t e : {37, 200})
      std::memcpy(gate.f32() + (h * E + e) * D, gate.f32() + (h * E + 2) * D, D * sizeof(float));
    for (int64_t e : {2, 37, 200}) bias.f32()[h * E + e] = 10.0f;
  }
  const RouterRun r =
      run_router(dev, to_device(dev, xb), to_device(dev, gate), to_device(dev, bias), c, true);
  if (!r.tensor_cores)
    GTEST_SKIP() << "no tensor-core router on this GPU (sm_80+ with 104 KB of shared memory)";
  int64_t unequal = 0;
  for (int64_t p = 0; p < T * H; ++p) {
    const float* l = r.logits.f32() + p * E;
    unequal += std::memcmp(&l[2], &l[37], sizeof(float)) != 0 ||
               std::memcmp(&l[2], &l[200], sizeof(float)) != 0;
    EXPECT_EQ(r.idx.data<int32_t>()[p * 3 + 0], 2);
    EXPECT_EQ(r.idx.data<int32_t>()[p * 3 + 1], 37);
    EXPECT_EQ(r.idx.data<int32_t>()[p * 3 + 2], 200);
    EXPECT_FLOAT_EQ(r.w.f32()[p * 3], 1.0f / 3);
  }
  EXPECT_EQ(unequal, 0);
}

}  // namespace
}  // namespace avdit::cuda::moe
