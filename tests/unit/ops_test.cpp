// The CPU op set against direct float64 computations on fresh random inputs at several shapes
// (odd sizes included): linear with F32/BF16/F16 weights, RMSNorm in both weight conventions,
// attention with GQA, segments and sinks, and the rotate-half RoPE of the MAGI-2 attention
// prologue.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_prologue.h"
#include "ops/linear.h"
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
      const Tensor x = random({m, in}, rng), w32 = random({out, in}, rng, 0.1f),
                   b = random({out}, rng);
      const Tensor w = w32.to(wd),
                   wexact = w.to_f32();  // the reference uses the stored (rounded) weight
      CpuContext ctx;
      const Tensor y = linear(ctx, x, w, &b);
      std::vector<double> ref(static_cast<size_t>(m * out));
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < out; ++j) {
          double s = std::as_const(b).f32()[j];
          for (int k = 0; k < in; ++k)
            s += double(std::as_const(x).f32()[i * in + k]) *
                 std::as_const(wexact).f32()[j * in + k];
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
    const Tensor y = rms_norm(ctx, x, w, 1e-6f, plus_one, DType::F32);
    std::vector<double> ref(9 * 37);
    for (int r = 0; r < 9; ++r) {
      double ss = 0;
      for (int i = 0; i < 37; ++i) ss += std::pow(double(std::as_const(x).f32()[r * 37 + i]), 2);
      const double inv = 1 / std::sqrt(ss / 37 + 1e-6);
      for (int i = 0; i < 37; ++i)
        ref[r * 37 + i] = std::as_const(x).f32()[r * 37 + i] * inv *
                          (std::as_const(w).f32()[i] + (plus_one ? 1 : 0));
    }
    EXPECT_LT(rel_err(y, ref), 1e-6);
  }
}

TEST(Ops, AttentionWithGqaSegmentsAndSinks) {
  std::mt19937 rng(3);
  for (auto [s, hq, hkv, d] : {std::tuple{5, 2, 2, 8}, {37, 6, 2, 16}, {1500, 4, 1, 32}}) {
    const Tensor q = random({s, hq, d}, rng), k = random({s, hkv, d}, rng),
                 v = random({s, hkv, d}, rng);
    const Tensor sinks = random({hq}, rng, 2.f);
    const std::vector<int64_t> cu =
        s > 10 ? std::vector<int64_t>{0, s / 3, s} : std::vector<int64_t>{};
    for (bool with_sinks : {false, true}) {
      const float scale = 1.f / std::sqrt(float(d));
      CpuContext ctx;
      const Segments seg = plan_segments(ctx, cu.empty() ? std::vector<int64_t>{0, s} : cu);
      const Tensor o = attention(ctx, q, k, v, scale, seg, with_sinks ? &sinks : nullptr);
      std::vector<double> ref(static_cast<size_t>(s * hq * d));
      const std::vector<int64_t> segs = cu.empty() ? std::vector<int64_t>{0, s} : cu;
      const float *pq = std::as_const(q).f32(), *pk = std::as_const(k).f32(),
                  *pv = std::as_const(v).f32();
      for (size_t g = 0; g + 1 < segs.size(); ++g)
        for (int64_t i = segs[g]; i < segs[g + 1]; ++i)
          for (int h = 0; h < hq; ++h) {
            const int kh = h / (hq / hkv);
            std::vector<double> l;
            for (int64_t j = segs[g]; j < segs[g + 1]; ++j) {
              double dot = 0;
              for (int c = 0; c < d; ++c)
                dot += double(pq[(i * hq + h) * d + c]) * pk[(j * hkv + kh) * d + c];
              l.push_back(dot * scale);
            }
            double mx = -1e300;
            for (double x : l) mx = std::max(mx, x);
            if (with_sinks) mx = std::max(mx, double(std::as_const(sinks).f32()[h]));
            double den = with_sinks ? std::exp(std::as_const(sinks).f32()[h] - mx) : 0;
            for (double x : l) den += std::exp(x - mx);
            for (int c = 0; c < d; ++c) {
              double acc = 0;
              for (size_t j = 0; j < l.size(); ++j)
                acc += std::exp(l[j] - mx) / den * pv[((segs[g] + j) * hkv + kh) * d + c];
              ref[static_cast<size_t>((i * hq + h) * d + c)] = acc;
            }
          }
      EXPECT_LT(rel_err(o, ref), 2e-5) << "S=" << s << " sinks=" << with_sinks;
    }
  }
}

// The MAGI-2 attention prologue with unit norm weights (w = 0 as 1 + w): RMSNorm of each q and k
// head, the rotate-half RoPE on its leading 2 half dims, the move into packed order; v moved
// unchanged.
TEST(Ops, QkvPrologueNormAndRotateHalfOnLeadingDims) {
  std::mt19937 rng(4);
  const int s = 7, h = 3, d = 20, half = 6;
  const Tensor x = random({s, h, d}, rng, 2.f);
  const Tensor ang = random({s, half}, rng, 3.f);
  Tensor table = Tensor::empty({s, 2 * half}, DType::F32);  // [sin | cos] per packed row
  for (int t = 0; t < s; ++t)
    for (int i = 0; i < half; ++i) {
      table.f32()[t * 2 * half + i] = std::sin(std::as_const(ang).f32()[t * half + i]);
      table.f32()[t * 2 * half + half + i] = std::cos(std::as_const(ang).f32()[t * half + i]);
    }
  // Rows in reverse packed order: row r holds packed token s - 1 - r; q, k and v heads h each.
  Tensor qkv = Tensor::empty({s, 3 * h * d}, DType::F32);
  std::vector<int32_t> inv(s);
  for (int p = 0; p < s; ++p) {
    const int r = s - 1 - p;
    inv[p] = r;
    for (int part = 0; part < 3; ++part)
      std::copy_n(std::as_const(x).f32() + p * h * d, h * d,
                  qkv.f32() + r * 3 * h * d + part * h * d);
  }
  CpuContext ctx;
  Tensor q = Tensor::empty({s, h, d}, DType::F32), k = q.clone(), v = q.clone();
  const Tensor zeros = Tensor::zeros({1, d}, DType::F32);
  qkv_prologue(ctx, qkv, zeros, zeros, nullptr, index_tensor(ctx, inv), table, half, q, k, v);
  std::vector<double> ref(static_cast<size_t>(s * h * d)), xn(static_cast<size_t>(s * h * d));
  const float* px = std::as_const(x).f32();
  for (int r = 0; r < s * h; ++r) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += double(px[r * d + i]) * px[r * d + i];
    for (int i = 0; i < d; ++i) xn[r * d + i] = px[r * d + i] / std::sqrt(ss / d + 1e-6);
  }
  const double* p = xn.data();
  for (int t = 0; t < s; ++t)
    for (int hh = 0; hh < h; ++hh)
      for (int i = 0; i < d; ++i) {
        const int base = (t * h + hh) * d;
        double v0 = p[base + i];
        if (i < half)
          v0 = p[base + i] * std::cos(double(std::as_const(ang).f32()[t * half + i])) -
               p[base + i + half] * std::sin(double(std::as_const(ang).f32()[t * half + i]));
        else if (i < 2 * half)
          v0 = p[base + i] * std::cos(double(std::as_const(ang).f32()[t * half + i - half])) +
               p[base + i - half] * std::sin(double(std::as_const(ang).f32()[t * half + i - half]));
        ref[static_cast<size_t>(base + i)] = v0;
      }
  EXPECT_LT(rel_err(q, ref), 1e-6);
  EXPECT_LT(rel_err(k, ref), 1e-6);
  EXPECT_EQ(std::memcmp(v.raw(), x.raw(), static_cast<size_t>(x.nbytes())),
            0);  // v moved, not changed
}

}  // namespace
}  // namespace avdit::ops
