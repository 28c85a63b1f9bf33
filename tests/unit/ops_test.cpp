// The CPU op set (the oracle) against direct float64 computations on fresh random inputs at several
// shapes (odd sizes included): linear with F32/BF16/F16 weights, RMSNorm in both weight conventions,
// attention with GQA, segments and sinks, the per-head QK-norm + rotate-half RoPE, and the gated
// residual + norm + adaLN modulation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "ops/attention.h"
#include "ops/linear.h"
#include "ops/modulation.h"
#include "ops/norm.h"
#include "ops/rows.h"

namespace avdit::ops {
namespace {

Tensor random(Shape shape, std::mt19937& rng, float scale = 1.f) {
  Tensor t = Tensor::empty(shape, DType::F32);
  std::normal_distribution<float> d(0.f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t;
}

// max |a - b| / max |b|
double rel_err(const Tensor& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  const float* p = std::as_const(a).f32();
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(p[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

TEST(Ops, LinearMatchesFloat64ForEachWeightDtype) {
  std::mt19937 rng(1);
  for (auto [m, in, out] : {std::tuple{1, 7, 3}, {33, 64, 129}, {5, 300, 1100}}) {
    for (DType wd : {DType::F32, DType::BF16, DType::F16}) {
      const Tensor x = random({m, in}, rng), w32 = random({out, in}, rng, 0.1f), b = random({out}, rng);
      const Tensor w = w32.to(wd), wexact = w.to_f32();  // the reference uses the stored (rounded) weight
      CpuContext ctx;
      const Tensor y = linear(ctx, x, w, &b);
      std::vector<double> ref(static_cast<size_t>(m * out));
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < out; ++j) {
          double s = std::as_const(b).f32()[j];
          for (int k = 0; k < in; ++k) s += double(std::as_const(x).f32()[i * in + k]) * std::as_const(wexact).f32()[j * in + k];
          ref[static_cast<size_t>(i * out + j)] = s;
        }
      EXPECT_LT(rel_err(y, ref), 1e-5) << m << "x" << in << "x" << out << " " << dtype_name(wd);
    }
  }
}

TEST(Ops, RmsNormBothConventions) {
  std::mt19937 rng(2);
  const Tensor x = random({9, 37}, rng, 3.f), w = random({37}, rng, 0.2f);
  for (bool plus_one : {false, true}) {
    CpuContext ctx;
    const Tensor y = rms_norm(ctx, x, w, 1e-6f, plus_one);
    std::vector<double> ref(9 * 37);
    for (int r = 0; r < 9; ++r) {
      double ss = 0;
      for (int i = 0; i < 37; ++i) ss += std::pow(double(std::as_const(x).f32()[r * 37 + i]), 2);
      const double inv = 1 / std::sqrt(ss / 37 + 1e-6);
      for (int i = 0; i < 37; ++i)
        ref[r * 37 + i] = std::as_const(x).f32()[r * 37 + i] * inv * (std::as_const(w).f32()[i] + (plus_one ? 1 : 0));
    }
    EXPECT_LT(rel_err(y, ref), 1e-6);
  }
}

TEST(Ops, AttentionWithGqaSegmentsAndSinks) {
  std::mt19937 rng(3);
  for (auto [s, hq, hkv, d] : {std::tuple{5, 2, 2, 8}, {37, 6, 2, 16}, {1500, 4, 1, 32}}) {
    const Tensor q = random({s, hq, d}, rng), k = random({s, hkv, d}, rng), v = random({s, hkv, d}, rng);
    const Tensor sinks = random({hq}, rng, 2.f);
    const std::vector<int64_t> cu = s > 10 ? std::vector<int64_t>{0, s / 3, s} : std::vector<int64_t>{};
    for (auto [with_sinks, causal] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      const float scale = 1.f / std::sqrt(float(d));
      CpuContext ctx;
      Segments seg = plan_segments(ctx, cu.empty() ? std::vector<int64_t>{0, s} : cu);
      seg.causal = causal;
      const Tensor o = attention(ctx, q, k, v, scale, seg, with_sinks ? &sinks : nullptr);
      std::vector<double> ref(static_cast<size_t>(s * hq * d));
      const std::vector<int64_t> segs = cu.empty() ? std::vector<int64_t>{0, s} : cu;
      const float *pq = std::as_const(q).f32(), *pk = std::as_const(k).f32(), *pv = std::as_const(v).f32();
      for (size_t g = 0; g + 1 < segs.size(); ++g)
        for (int64_t i = segs[g]; i < segs[g + 1]; ++i)
          for (int h = 0; h < hq; ++h) {
            const int kh = h / (hq / hkv);
            std::vector<double> l;
            for (int64_t j = segs[g]; j < (causal ? i + 1 : segs[g + 1]); ++j) {
              double dot = 0;
              for (int c = 0; c < d; ++c) dot += double(pq[(i * hq + h) * d + c]) * pk[(j * hkv + kh) * d + c];
              l.push_back(dot * scale);
            }
            double mx = -1e300;
            for (double x : l) mx = std::max(mx, x);
            if (with_sinks) mx = std::max(mx, double(std::as_const(sinks).f32()[h]));
            double den = with_sinks ? std::exp(std::as_const(sinks).f32()[h] - mx) : 0;
            for (double x : l) den += std::exp(x - mx);
            for (int c = 0; c < d; ++c) {
              double acc = 0;
              for (size_t j = 0; j < l.size(); ++j) acc += std::exp(l[j] - mx) / den * pv[((segs[g] + j) * hkv + kh) * d + c];
              ref[static_cast<size_t>((i * hq + h) * d + c)] = acc;
            }
          }
      EXPECT_LT(rel_err(o, ref), 2e-5) << "S=" << s << " sinks=" << with_sinks << " causal=" << causal;
    }
  }
}

TEST(Ops, QkNormRopePerHeadAgainstFloat64) {
  std::mt19937 rng(4);
  const int s = 7, h = 3, d = 20, half = 6;
  const Tensor qkv = random({s, h, 3, d}, rng, 2.f), qw = random({d}, rng, 0.2f), kw = random({d}, rng, 0.2f);
  const Tensor ang = random({s, half}, rng, 3.f);
  Tensor c = Tensor::empty({s, half}, DType::F32), sn = Tensor::empty({s, half}, DType::F32);
  for (int i = 0; i < s * half; ++i) {
    c.f32()[i] = std::cos(std::as_const(ang).f32()[i]);
    sn.f32()[i] = std::sin(std::as_const(ang).f32()[i]);
  }
  CpuContext ctx;
  Tensor q = Tensor::empty({s, h, d}, DType::F32), k = q.clone(), v = q.clone();
  qk_norm_rope_per_head(ctx, qkv, qw, kw, 1e-5f, &c, &sn, q, k, v);
  const float* p = std::as_const(qkv).f32();
  std::vector<double> ref_q(static_cast<size_t>(s * h * d)), ref_k(ref_q.size()), ref_v(ref_q.size());
  for (int t = 0; t < s; ++t)
    for (int hh = 0; hh < h; ++hh)
      for (int part = 0; part < 3; ++part) {
        const float* a = p + ((t * h + hh) * 3 + part) * d;
        std::vector<double>& ref = part == 0 ? ref_q : part == 1 ? ref_k : ref_v;
        const int base = (t * h + hh) * d;
        if (part == 2) {
          for (int i = 0; i < d; ++i) ref[base + i] = a[i];
          continue;
        }
        const float* w = std::as_const(part == 0 ? qw : kw).f32();
        double ss = 0;
        for (int i = 0; i < d; ++i) ss += double(a[i]) * a[i];
        const double inv = 1 / std::sqrt(ss / d + 1e-5);
        std::vector<double> n(d);
        for (int i = 0; i < d; ++i) n[i] = a[i] * inv * w[i];
        for (int i = 0; i < d; ++i) {
          // Dims past 2 * half are not rotated and have no angle: read one only where it is used.
          const double th = i < 2 * half ? std::as_const(ang).f32()[t * half + (i < half ? i : i - half)] : 0.0;
          ref[base + i] = i < half ? n[i] * std::cos(th) - n[i + half] * std::sin(th)
                          : i < 2 * half ? n[i] * std::cos(th) + n[i - half] * std::sin(th)
                                         : n[i];
        }
      }
  EXPECT_LT(rel_err(q, ref_q), 1e-6);
  EXPECT_LT(rel_err(k, ref_k), 1e-6);
  EXPECT_EQ(rel_err(v, ref_v), 0.0);  // copied exactly
}

TEST(Ops, ResidualNormModulateAgainstFloat64) {
  std::mt19937 rng(5);
  const int S = 11, H = 33, M = 2;
  const Tensor x0 = random({S, H}, rng, 3.f), f = random({S, H}, rng), w = random({H}, rng, 0.2f);
  const Tensor table = random({3 * M, 6 * H}, rng, 0.3f);
  std::vector<int64_t> rows(S);
  for (int r = 0; r < S; ++r) rows[r] = (r * 5) % (3 * M);
  CpuContext ctx;
  const Tensor row = index_tensor(ctx, rows);
  Tensor x = x0.clone(), out = Tensor::empty({S, H}, DType::F32);
  residual_norm_modulate(ctx, x, {&f, {table, 5 * H}, &row, w, 1e-5f, {table, 3 * H}, {table, 4 * H}, &row}, &out);
  const float *px = std::as_const(x0).f32(), *pf = std::as_const(f).f32(), *pw = std::as_const(w).f32(),
              *pt = std::as_const(table).f32();
  std::vector<double> ref_x(S * H), ref_o(S * H);
  for (int r = 0; r < S; ++r) {
    const float* t = pt + rows[r] * 6 * H;
    double ss = 0;
    for (int c = 0; c < H; ++c) {
      ref_x[r * H + c] = px[r * H + c] + double(t[5 * H + c]) * pf[r * H + c];
      ss += ref_x[r * H + c] * ref_x[r * H + c];
    }
    const double inv = 1 / std::sqrt(ss / H + 1e-5);
    for (int c = 0; c < H; ++c)
      ref_o[r * H + c] = ref_x[r * H + c] * inv * pw[c] * (1 + double(t[4 * H + c])) + t[3 * H + c];
  }
  EXPECT_LT(rel_err(x, ref_x), 1e-6);
  EXPECT_LT(rel_err(out, ref_o), 1e-5);
}

}  // namespace
}  // namespace avdit::ops
