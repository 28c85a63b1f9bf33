// The MAGI-2 ops' CPU references (the oracle the GPU kernels are held to) against direct float64
// computations on fresh random inputs at small odd sizes: the attention prologue (QK-norm + RoPE +
// packed order) and gate, mHC coefficients (Sinkhorn) and stream mixing, the embedder epilogue, the
// time and RoPE tables, the router (top-K with the lower-index tie rule), the routed experts (F32
// and the bf16 contract's rounding points) and the MoE output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "ops/activation.h"
#include "ops/attention_prologue.h"
#include "ops/embedding.h"
#include "ops/mhc.h"
#include "ops/moe.h"
#include "ops/rows.h"

namespace avdit::ops {
namespace {

Tensor random(Shape shape, std::mt19937& rng, float scale = 1.f, float mean = 0.f) {
  Tensor t = Tensor::empty(shape, DType::F32);
  std::normal_distribution<float> d(mean, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t;
}

const float* v(const Tensor& t) { return t.f32(); }

// max |a - b| / max |b|
double rel_err(const Tensor& a_any, const std::vector<double>& b) {
  const Tensor a = a_any.to_f32();
  EXPECT_EQ(a.numel(), static_cast<int64_t>(b.size()));
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(v(a)[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return den > 0 ? num / den : num;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double swiglu7(double g, double l) {
  g = std::min(g, 7.0);
  l = std::clamp(l, -7.0, 7.0);
  return g * sigmoid(1.702 * g) * (l + 1);
}

// The MAGI-2 attention prologue with per-group norm weights: RMSNorm of each q and k head ((1 + w)
// of the token's group), the rotate-half RoPE on its leading 2 half dims, the move into packed
// order; v moved unchanged.
TEST(Magi2Ops, QkvPrologueAgainstFloat64) {
  std::mt19937 rng(4);
  const int L = 7, hq = 3, hkv = 1, d = 20, half = 6, heads = hq + 2 * hkv, G = 3;
  const Tensor qkv = random({L, heads * d}, rng, 2.f), qn = random({G, d}, rng, 0.2f),
               kn = random({G, d}, rng, 0.2f);
  const Tensor ang = random({L, half}, rng, 3.f);
  Tensor table =
      Tensor::empty({L, 2 * half + 3}, DType::F32);  // [sin | cos | unused] per packed row
  for (int t = 0; t < L; ++t)
    for (int i = 0; i < half; ++i) {
      table.f32()[t * (2 * half + 3) + i] = std::sin(v(ang)[t * half + i]);
      table.f32()[t * (2 * half + 3) + half + i] = std::cos(v(ang)[t * half + i]);
    }
  std::vector<int32_t> inv(L), group(L);
  for (int p = 0; p < L; ++p) inv[p] = (p * 3) % L;  // packed token p sits at permuted row 3p mod 7
  for (int r = 0; r < L; ++r) group[r] = r % G;
  CpuContext ctx;
  Tensor q = Tensor::empty({L, hq, d}, DType::F32), k = Tensor::empty({L, hkv, d}, DType::F32),
         vv = k.clone();
  const Tensor gi = index_tensor(ctx, group);
  qkv_prologue(ctx, qkv, qn, kn, &gi, index_tensor(ctx, inv), table, half, q, k, vv);
  std::vector<double> rq(L * hq * d), rk(L * hkv * d), rv(L * hkv * d);
  for (int p = 0; p < L; ++p) {
    const int r = inv[p];
    for (int h = 0; h < hq + hkv; ++h) {
      const float* a = v(qkv) + (r * heads + h) * d;
      const float* w = v(h < hq ? qn : kn) + group[r] * d;
      double ss = 0;
      for (int i = 0; i < d; ++i) ss += double(a[i]) * a[i];
      const double s = 1 / std::sqrt(ss / d + 1e-6);
      std::vector<double> n(d);
      for (int i = 0; i < d; ++i) n[i] = a[i] * s * (1 + double(w[i]));
      double* o = h < hq ? &rq[(p * hq + h) * d] : &rk[(p * hkv + h - hq) * d];
      for (int i = 0; i < d; ++i) {
        // Dims past 2 * half are not rotated and have no angle: read one only where it is used.
        const double th = i < 2 * half ? v(ang)[p * half + (i < half ? i : i - half)] : 0.0;
        o[i] = i < half       ? n[i] * std::cos(th) - n[i + half] * std::sin(th)
               : i < 2 * half ? n[i] * std::cos(th) + n[i - half] * std::sin(th)
                              : n[i];
      }
    }
    for (int i = 0; i < hkv * d; ++i)
      rv[p * hkv * d + i] = v(qkv)[r * heads * d + (hq + hkv) * d + i];
  }
  EXPECT_LT(rel_err(q, rq), 1e-6);
  EXPECT_LT(rel_err(k, rk), 1e-6);
  EXPECT_EQ(rel_err(vv, rv), 0.0);
}

TEST(Magi2Ops, GateUnpermuteAgainstFloat64) {
  std::mt19937 rng(5);
  const int L = 9, hq = 3, d = 5;
  const Tensor o = random({L, hq, d}, rng), g = random({L, hq}, rng, 2.f);
  std::vector<int64_t> perm(L);
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  CpuContext ctx;
  Tensor out = Tensor::empty({L, hq * d}, DType::F32);
  gate_unpermute(ctx, o, g, index_tensor(ctx, perm), out);
  std::vector<double> ref(L * hq * d);
  for (int r = 0; r < L; ++r)
    for (int h = 0; h < hq; ++h)
      for (int i = 0; i < d; ++i)
        ref[(r * hq + h) * d + i] = v(o)[(perm[r] * hq + h) * d + i] * sigmoid(v(g)[r * hq + h]);
  EXPECT_LT(rel_err(out, ref), 1e-6);
}

// Sinkhorn far from uniform (large logit scales): rows and columns of h_res sum to 1.
TEST(Magi2Ops, MhcCoefficientsAgainstFloat64) {
  std::mt19937 rng(6);
  for (int n : {2, 4, 5}) {
    const int L = 11, cols = 2 * n + n * n;
    const Tensor h = random({L, cols}, rng, 2.f);
    MhcParams p;
    p.a_pre = 0.9f, p.a_post = 1.3f, p.a_res = 1.7f;
    p.bias_pre = random({n}, rng, 0.5f);
    p.bias_post = random({n}, rng, 0.5f);
    p.bias_res = random({n, n}, rng, 1.f);
    CpuContext ctx;
    const MhcCoefficients c = mhc_coefficients(ctx, h, p, n);
    std::vector<double> pre(L * n), post(L * n), res(L * n * n);
    for (int l = 0; l < L; ++l) {
      const float* r = v(h) + l * cols;
      for (int k = 0; k < n; ++k) {
        pre[l * n + k] = sigmoid(double(p.a_pre) * r[k] + v(p.bias_pre)[k]);
        post[l * n + k] = 2 * sigmoid(double(p.a_post) * r[n + k] + v(p.bias_post)[k]);
      }
      std::vector<double> m(n * n);
      double mx = -1e300;
      for (int k = 0; k < n * n; ++k)
        mx = std::max(mx, m[k] = double(p.a_res) * r[2 * n + k] + v(p.bias_res)[k]);
      for (double& x : m) x = std::exp(x - mx);
      for (int it = 0; it < kSinkhornIters; ++it) {
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int i = 0; i < n; ++i) s += m[i * n + j];
          for (int i = 0; i < n; ++i) m[i * n + j] /= s + kSinkhornEps;
        }
        for (int i = 0; i < n; ++i) {
          double s = 0;
          for (int j = 0; j < n; ++j) s += m[i * n + j];
          for (int j = 0; j < n; ++j) m[i * n + j] /= s + kSinkhornEps;
        }
      }
      std::copy(m.begin(), m.end(), res.begin() + l * n * n);
    }
    EXPECT_LT(rel_err(c.h_pre, pre), 1e-6) << n;
    EXPECT_LT(rel_err(c.h_post, post), 1e-6) << n;
    EXPECT_LT(rel_err(c.h_res, res), 1e-5) << n;
    // Rounded to bf16: each value is the bf16 of the fp32 one.
    const MhcCoefficients b = mhc_coefficients(ctx, h, p, n, DType::BF16);
    for (int64_t i = 0; i < b.h_res.numel(); ++i)
      EXPECT_EQ(v(b.h_res)[i], bf16_to_f32(f32_to_bf16(v(c.h_res)[i])));
  }
}

TEST(Magi2Ops, MhcMixingAgainstFloat64) {
  std::mt19937 rng(7);
  const int L = 5, n = 3, hidden = 17;
  const Tensor s0 = random({L, n * hidden}, rng), o = random({L, hidden}, rng);
  const Tensor h_pre = random({L, n}, rng, 0.5f, 0.5f), h_post = random({L, n}, rng, 0.5f, 1.f);
  const Tensor h_res = random({L, n, n}, rng, 0.3f, 0.3f);
  CpuContext ctx;
  Tensor pre = Tensor::empty({L, hidden}, DType::F32), s = s0.clone();
  mhc_apply_pre(ctx, s0, h_pre, n, pre);
  mhc_hyper_connect_(ctx, s, o, h_post, h_res, n);
  std::vector<double> rp(L * hidden, 0.0), rs(L * n * hidden, 0.0);
  for (int l = 0; l < L; ++l)
    for (int x = 0; x < hidden; ++x) {
      for (int k = 0; k < n; ++k)
        rp[l * hidden + x] += double(v(h_pre)[l * n + k]) * v(s0)[(l * n + k) * hidden + x];
      for (int i = 0; i < n; ++i) {
        double acc = double(v(h_post)[l * n + i]) * v(o)[l * hidden + x];
        for (int j = 0; j < n; ++j)
          acc += double(v(h_res)[(l * n + i) * n + j]) * v(s0)[(l * n + j) * hidden + x];
        rs[(l * n + i) * hidden + x] = acc;
      }
    }
  EXPECT_LT(rel_err(pre, rp), 1e-6);
  EXPECT_LT(rel_err(s, rs), 1e-6);
}

TEST(Magi2Ops, EmbedEpilogueOverwritesTimeChannels) {
  std::mt19937 rng(8);
  const int L = 6, R = 10, tc = 4;
  const Tensor y = random({L, R}, rng), bias = random({3, R}, rng), time = random({L, tc}, rng);
  const std::vector<int32_t> group = {0, 0, 1, 2, 2, 2}, perm = {5, 0, 3, 1, 2, 4};
  CpuContext ctx;
  Tensor s = Tensor::empty({L, R}, DType::F32);
  const Tensor gi = index_tensor(ctx, group), pi = index_tensor(ctx, perm);
  embed_epilogue(ctx, y, bias, gi, &time, pi, s);
  for (int r = 0; r < L; ++r)
    for (int c = 0; c < R; ++c)
      EXPECT_EQ(v(s)[r * R + c],
                c < tc ? v(time)[perm[r] * tc + c] : v(y)[r * R + c] + v(bias)[group[r] * R + c]);
}

TEST(Magi2Ops, TimeAndRopeTablesAgainstFloat64) {
  std::mt19937 rng(9);
  CpuContext ctx;
  for (int dim : {1, 8, 9}) {
    const int L = 13;
    Tensor t = Tensor::empty({L}, DType::F32);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (int l = 0; l < L; ++l) t.f32()[l] = u(rng);
    Tensor out = Tensor::empty({L, dim}, DType::F32);
    time_embedding(ctx, t, time_frequencies(dim), out);
    std::vector<double> ref(L * dim, 0.0);
    const int half = dim / 2;
    for (int l = 0; l < L; ++l) {
      if (dim == 1) ref[l] = v(t)[l];
      for (int k = 0; k < half; ++k) {
        const double a = v(t)[l] * 1000.0 * std::exp(-std::log(10000.0) * k / half);
        ref[l * dim + k] = std::cos(a);
        ref[l * dim + half + k] = std::sin(a);
      }
    }
    // Arguments up to 1000 rad: one float32 ulp of the frequency or position is ~1e-4 there.
    EXPECT_LT(rel_err(out, ref), 3e-4) << dim;
  }
  const int L = 4, B = 3;
  Tensor coords = Tensor::empty({L, 9}, DType::F32);
  const float rows[L][9] = {{0, 0, 0, 1, 1, 1, 1, 1, 1},
                            {2, 1, 3, 4, 3, 5, 4, 32, 32},
                            {1, 0, 0, 6, 1, 1, 2, 1, 1},
                            {-3, 0, 0, 3, 1, 1, 1, 1, 1}};
  std::memcpy(coords.f32(), rows, sizeof(rows));
  const Tensor bands = random({B}, rng, 0.5f);
  Tensor out = Tensor::empty({L, 6 * B}, DType::F32);
  rope_table(ctx, coords, bands, out);
  std::vector<double> ref(L * 6 * B);
  for (int l = 0; l < L; ++l)
    for (int a = 0; a < 3; ++a) {
      const double size = rows[l][3 + a], refv = rows[l][6 + a];
      const double scale = size == 1 && refv == 1 ? 1 : (refv - 1) / (size - 1);
      const double x = (rows[l][a] - (a == 0 ? 0 : (size - 1) / 2)) * scale;
      for (int b = 0; b < B; ++b) {
        ref[l * 6 * B + a * B + b] = std::sin(x * v(bands)[b]);
        ref[l * 6 * B + 3 * B + a * B + b] = std::cos(x * v(bands)[b]);
      }
    }
  EXPECT_LT(rel_err(out, ref), 1e-6);
  // A zero-width axis that is not a singleton has no finite scale: BadInput.
  coords.f32()[3] = 1.0f;
  coords.f32()[6] = 5.0f;
  EXPECT_THROW(rope_table(ctx, coords, bands, out), BadInput);
}

// Router, routed experts and output of a small MoE against float64: sigmoid scores, top-K of score
// + bias with equal scores resolved to the lower index (two experts share a gate row and bias), L1
// norm x route_scale; each (token, head)'s expert outputs summed in ascending expert order.
TEST(Magi2Ops, MoeAgainstFloat64) {
  std::mt19937 rng(10);
  MoeConfig c;
  c.heads = 2, c.experts = 7, c.top_k = 3, c.head_dim = 8, c.route_scale = 2.5f;
  const int T = 23, H = 2, E = 7, K = 3, D = 8, De = 12, W = H * D, hidden = 10, Is = 6;
  const Tensor x = random({T, W}, rng);
  Tensor gate = random({H * E, D}, rng, 0.5f);
  Tensor bias = random({H * E}, rng, 0.1f);
  std::memcpy(gate.f32() + 4 * D, gate.f32() + 2 * D,
              D * sizeof(float));        // experts 2 and 4 of head 0: a tie
  bias.f32()[4] = bias.f32()[2] = 10.f;  // ... both always chosen
  CpuContext ctx;
  const Routing r = route(ctx, x, gate, bias, c, /*keep_logits=*/true);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      std::vector<double> score(E), biased(E);
      for (int e = 0; e < E; ++e) {
        double l = 0;
        for (int i = 0; i < D; ++i)
          l += double(v(x)[t * W + h * D + i]) * v(gate)[(h * E + e) * D + i];
        EXPECT_NEAR(v(r.logits)[(t * H + h) * E + e], l, 1e-5);
        score[e] = sigmoid(l);
        biased[e] = score[e] + v(bias)[h * E + e];
      }
      std::vector<int> order(E);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return biased[a] > biased[b]; });
      double norm = 0;
      for (int k = 0; k < K; ++k) norm += score[order[k]];
      for (int k = 0; k < K; ++k) {
        EXPECT_EQ(r.indices.data<int32_t>()[(t * H + h) * K + k], order[k])
            << t << " " << h << " " << k;
        EXPECT_NEAR(v(r.weights)[(t * H + h) * K + k], score[order[k]] / norm * 2.5, 1e-6);
      }
    }
  // The experts as stored ([in, out]), every head's rows in one stack.
  ExpertWeights w;
  w.inter = De, w.begin = 0, w.end = E;
  w.gate = {random({H * E, D, De}, rng, 0.4f)};
  w.up = {random({H * E, D, De}, rng, 0.4f)};
  w.down = {random({H * E, De, D}, rng, 0.3f)};
  w = prepare_experts(ctx, w, c, DType::F32);
  std::vector<double> ref(T * W, 0.0);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      std::vector<std::pair<int, double>> ch;
      for (int k = 0; k < K; ++k)
        ch.emplace_back(r.indices.data<int32_t>()[(t * H + h) * K + k],
                        v(r.weights)[(t * H + h) * K + k]);
      std::sort(ch.begin(), ch.end());
      for (auto [e, p] : ch) {
        const int g = h * E + e;
        std::vector<double> a(De);
        for (int j = 0; j < De; ++j) {
          double gs = 0, us = 0;
          for (int i = 0; i < D; ++i) {
            gs += double(v(x)[t * W + h * D + i]) * v(w.gate[0])[(g * D + i) * De + j];
            us += double(v(x)[t * W + h * D + i]) * v(w.up[0])[(g * D + i) * De + j];
          }
          a[j] = swiglu7(gs, us);
        }
        for (int i = 0; i < D; ++i) {
          double y = 0;
          for (int j = 0; j < De; ++j) y += a[j] * v(w.down[0])[(g * De + j) * D + i];
          ref[t * W + h * D + i] += p * y;
        }
      }
    }
  Tensor cat = Tensor::zeros({T, W + Is}, DType::F32);
  routed_experts(ctx, x, r, w, c, cat);
  std::vector<double> got_cols(T * W);
  const Tensor experts = take_columns(ctx, cat, 0, W);
  EXPECT_LT(rel_err(experts, ref), 1e-5);
  for (int t = 0; t < T; ++t)  // the columns past the experts' are left alone
    for (int i = W; i < W + Is; ++i) EXPECT_EQ(v(cat)[t * (W + Is) + i], 0.f);
  // bf16 output: every value on the bf16 grid, near the float64 result.
  Tensor cat16 = Tensor::zeros({T, W}, DType::BF16);
  routed_experts(ctx, x, r, w, c, cat16);
  EXPECT_LT(rel_err(cat16, ref), 2e-2);
  // The output: merge(experts) + shared_fc2(h) + specific.
  copy_columns(ctx, random({T, Is}, rng), 0, cat, W, Is);
  const Tensor merge = random({hidden, W}, rng, 0.3f), fc2 = random({hidden, Is}, rng, 0.3f);
  const Tensor specific = random({T, hidden}, rng);
  const MoeOutputWeights ow = prepare_moe_output(ctx, merge, fc2, DType::F32);
  Tensor out = Tensor::empty({T, hidden}, DType::F32), mo = out.clone(), so = out.clone();
  moe_output(ctx, cat, specific, ow, out, &mo, &so);
  std::vector<double> rm(T * hidden), rs(T * hidden), ro(T * hidden);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < hidden; ++j) {
      double m = 0, s = v(specific)[t * hidden + j];
      for (int i = 0; i < W; ++i) m += double(v(cat)[t * (W + Is) + i]) * v(merge)[j * W + i];
      for (int i = 0; i < Is; ++i) s += double(v(cat)[t * (W + Is) + W + i]) * v(fc2)[j * Is + i];
      rm[t * hidden + j] = m, rs[t * hidden + j] = s, ro[t * hidden + j] = m + s;
    }
  EXPECT_LT(rel_err(mo, rm), 1e-5);
  EXPECT_LT(rel_err(so, rs), 1e-5);
  EXPECT_LT(rel_err(out, ro), 1e-5);
}

}  // namespace
}  // namespace avdit::ops
