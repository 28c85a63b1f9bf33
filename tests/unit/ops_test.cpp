// The CPU op set (the oracle) against direct float64 computations on fresh random inputs at several
// shapes (odd sizes included): linear with F32/BF16/F16 weights, RMSNorm in both weight
// conventions, attention with GQA, segments and sinks, the per-head QK-norm + rotate-half RoPE, and
// the gated residual + norm + adaLN modulation; and the FP8 linear and FP8 attention against their
// definitions (at the end).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/attention.h"
#include "ops/attention_fp8.h"
#include "ops/context.h"
#include "ops/linear.h"
#include "ops/linear_fp8.h"
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
    const Tensor y = rms_norm(ctx, x, w, 1e-6f, plus_one);
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
    for (auto [with_sinks, causal] :
         {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      const float scale = 1.f / std::sqrt(float(d));
      CpuContext ctx;
      Segments seg = plan_segments(ctx, cu.empty() ? std::vector<int64_t>{0, s} : cu);
      seg.causal = causal;
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
            for (int64_t j = segs[g]; j < (causal ? i + 1 : segs[g + 1]); ++j) {
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
      EXPECT_LT(rel_err(o, ref), 2e-5)
          << "S=" << s << " sinks=" << with_sinks << " causal=" << causal;
    }
  }
}

TEST(Ops, QkNormRopePerHeadAgainstFloat64) {
  std::mt19937 rng(4);
  const int s = 7, h = 3, d = 20, half = 6;
  const Tensor qkv = random({s, h, 3, d}, rng, 2.f), qw = random({d}, rng, 0.2f),
               kw = random({d}, rng, 0.2f);
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
  std::vector<double> ref_q(static_cast<size_t>(s * h * d)), ref_k(ref_q.size()),
      ref_v(ref_q.size());
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
          const double th =
              i < 2 * half ? std::as_const(ang).f32()[t * half + (i < half ? i : i - half)] : 0.0;
          ref[base + i] = i < half       ? n[i] * std::cos(th) - n[i + half] * std::sin(th)
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
  residual_norm_modulate(
      ctx, x, {&f, {table, 5 * H}, &row, w, 1e-5f, {table, 3 * H}, {table, 4 * H}, &row}, &out);
  const float *px = std::as_const(x0).f32(), *pf = std::as_const(f).f32(),
              *pw = std::as_const(w).f32(), *pt = std::as_const(table).f32();
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

// ---- FP8 linear ---------------------------------------------------------------------------------
// The FP8 linear (ops/linear_fp8.h) on the CPU against its definition computed in float64 from
// the scalar e4m3 conversion (core/dtype.h): scales 448 / amax per tensor or per row, e4m3
// rounding of both operands, fp32 products multiplied by the inverse scales; the quantization
// error it leaves against the exact product (e4m3 keeps 3 mantissa bits); what row scales save
// over a tensor scale when one row is far larger; an all-zero input; a weight quantized once and
// reused.
namespace fp8 {

Tensor random(Shape s, uint32_t seed, float std) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, std);
  Tensor t = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(rng);
  return t;
}

// The op's output against the definition in float64, for both scalings: x's scale per tensor or
// per row m, w's per tensor or per output channel n.
void check_definition(Fp8Scaling scaling) {
  CpuContext ctx;
  const int64_t M = 7, N = 5, K = 40;
  Tensor x = random({M, K}, 1, 3.f), w = random({N, K}, 2, 0.05f);
  for (int64_t k = 0; k < K; ++k)
    x.f32()[2 * K + k] *= 50.f, w.f32()[3 * K + k] *= 0.01f;  // wide rows
  const Fp8Weight q = quantize_fp8(ctx, w, scaling);
  const bool row = scaling == Fp8Scaling::Row;
  auto amax = [](const Tensor& t, int64_t r0, int64_t n) {
    double m = 0;
    for (int64_t i = r0; i < r0 + n; ++i) m = std::max(m, std::fabs(double(t.f32()[i])));
    return m;
  };
  ASSERT_EQ(q.scales.numel(), row ? N : 1);
  const Tensor y = linear_fp8(ctx, x, q, DType::F32);
  double worst = 0, exact_err = 0, scale = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const float sx = static_cast<float>(448.0 / (row ? amax(x, m * K, K) : amax(x, 0, M * K)));
      const float sw = static_cast<float>(448.0 / (row ? amax(w, n * K, K) : amax(w, 0, N * K)));
      EXPECT_FLOAT_EQ(q.scales.f32()[row ? n : 0], sw);
      double ref = 0, exact = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double xv = x.f32()[m * K + k], wv = w.f32()[n * K + k];
        ref += double(e4m3_to_f32(f32_to_e4m3(float(xv) * sx))) *
               double(e4m3_to_f32(f32_to_e4m3(float(wv) * sw)));
        exact += xv * wv;
      }
      ref /= double(sx) * double(sw);
      const double mag = std::max(std::fabs(exact), 1e-30);
      worst = std::max(worst, std::fabs(y.f32()[m * N + n] - ref) / mag);
      exact_err = std::max(exact_err, std::fabs(y.f32()[m * N + n] - exact));
      scale = std::max(scale, std::fabs(exact));
    }
  EXPECT_LT(worst, 1e-5);
  // 3 mantissa bits: a few percent per element, less after the sum; and not nothing.
  EXPECT_LT(exact_err / scale, 0.1);
  EXPECT_GT(exact_err / scale, 1e-4);
}

TEST(LinearFp8, EqualsTheDefinitionInFloat64PerTensor) { check_definition(Fp8Scaling::Tensor); }
TEST(LinearFp8, EqualsTheDefinitionInFloat64PerRow) { check_definition(Fp8Scaling::Row); }

TEST(LinearFp8, RowScalesKeepSmallRowsThatATensorScaleLoses) {
  // One row 1e5 times the others: per tensor, the small rows fall into e4m3's subnormals (below
  // 2^-6 after scaling; e4m3 is floating point, so within its normal range a scale changes
  // nothing).
  CpuContext ctx;
  Tensor x = random({4, 64}, 5, 1.f);
  for (int64_t k = 0; k < 64; ++k) x.f32()[k] *= 1e5f;
  const Tensor w = random({6, 64}, 6, 1.f);
  auto err_small_rows = [&](Fp8Scaling s) {
    const Tensor y = linear_fp8(ctx, x, quantize_fp8(ctx, w, s), DType::F32);
    double e = 0, mag = 0;
    for (int64_t m = 1; m < 4; ++m)
      for (int64_t n = 0; n < 6; ++n) {
        double exact = 0;
        for (int64_t k = 0; k < 64; ++k) exact += double(x.f32()[m * 64 + k]) * w.f32()[n * 64 + k];
        e = std::max(e, std::fabs(y.f32()[m * 6 + n] - exact));
        mag = std::max(mag, std::fabs(exact));
      }
    return e / mag;
  };
  EXPECT_LT(err_small_rows(Fp8Scaling::Row), 0.1);
  EXPECT_GT(err_small_rows(Fp8Scaling::Tensor), 3 * err_small_rows(Fp8Scaling::Row));
}

TEST(LinearFp8, ZeroInputAndReusedWeight) {
  CpuContext ctx;
  const Tensor w = random({3, 16}, 3, 1.f);
  const Fp8Weight q = quantize_fp8(ctx, w, Fp8Scaling::Row);
  const Tensor y0 = linear_fp8(ctx, Tensor::zeros({2, 16}, DType::F32), q, DType::F32);
  for (int64_t i = 0; i < y0.numel(); ++i) EXPECT_EQ(y0.f32()[i], 0.f);
  const Tensor x = random({4, 16}, 4, 1.f);
  const Tensor a = linear_fp8(ctx, x, q, DType::BF16), b = linear_fp8(ctx, x, q, DType::BF16);
  EXPECT_EQ(a.shape(), (Shape{4, 3}));
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())), 0);
}

}  // namespace fp8

// ---- FP8 attention --------------------------------------------------------------------------------
// The FP8 attention's emulation (ops/attention_fp8.h) on the CPU: known values through the e4m3
// codes bit for bit; the op against its definition computed in float64 (documents of any length,
// GQA, head dims 16 to 128, sinks, a bf16 output) and its distance to the exact attention (FP8's,
// and not zero); where the scale blocks lie; all-zero operands; the inputs it refuses.
namespace fp8_attention {

using Blocks = std::vector<std::pair<int64_t, int64_t>>;  // row ranges [r0, r1) sharing a scale

Tensor random(Shape s, uint32_t seed, float std) { return fp8::random(std::move(s), seed, std); }

Segments docs(CpuContext& ctx, std::vector<int64_t> cu) {
  return plan_segments(ctx, std::move(cu));
}

// NMSE of got's elements [begin, end) (all of them by default) against ref's.
double nmse(const std::vector<double>& got, const std::vector<double>& ref, size_t begin = 0,
            size_t end = 0) {
  double num = 0, den = 0;
  for (size_t i = begin; i < (end ? end : ref.size()); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return num / den;
}
double nmse(const Tensor& got, const std::vector<double>& ref, size_t begin = 0, size_t end = 0) {
  const float* p = std::as_const(got).f32();
  return nmse(std::vector<double>(p, p + got.numel()), ref, begin, end);
}

// Each document of cu cut into `block`-row ranges from its first row.
Blocks scale_blocks(const std::vector<int64_t>& cu, int64_t block) {
  Blocks b;
  for (size_t g = 0; g + 1 < cu.size(); ++g)
    for (int64_t r = cu[g]; r < cu[g + 1]; r += block)
      b.push_back({r, std::min(r + block, cu[g + 1])});
  return b;
}

// x [S, heads, D] through e4m3, as code x scale in double, one scale per head over each range of
// `blocks`: s = max(amax, 2^-60) / 448 and the code e4m3(x (1 / s)) in fp32, as the definition
// says.
std::vector<double> dequantized(const Tensor& x, const Blocks& blocks) {
  const int64_t heads = x.size(1), d = x.size(2);
  const float* p = std::as_const(x).f32();
  std::vector<double> out(static_cast<size_t>(x.numel()));
  for (const auto& [r0, r1] : blocks)
    for (int64_t h = 0; h < heads; ++h) {
      float amax = 0.f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t e = 0; e < d; ++e)
          amax = std::max(amax, std::fabs(p[(r * heads + h) * d + e]));
      const float s = std::max(amax, 0x1p-60f) / 448.f, inv = 1.f / s;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t e = 0; e < d; ++e) {
          const int64_t i = (r * heads + h) * d + e;
          out[i] = double(e4m3_to_f32(f32_to_e4m3(p[i] * inv))) * s;
        }
    }
  return out;
}

// float64 attention of q, k, v over cu's documents (GQA, bidirectional), in base 2 as the
// definition: y = scale log2(e) q.k, m the row's max, P = 2^(y - m + 8), the sink (natural log,
// [hq] or null) 256 x 2^(sink log2(e) - m) in the denominator only. With `fp8` the definition of
// ops/attention_fp8.h: q and k through e4m3 with a scale per range of qk_blocks (null: each
// document's 128-row blocks), v with one per kv head over all rows, and P through e4m3 in the
// product only. Without, the exact attention (P and the sink both times 256 cancel).
std::vector<double> attention64(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                                const std::vector<int64_t>& cu, bool fp8,
                                const std::vector<float>* sinks = nullptr,
                                const Blocks* qk_blocks = nullptr) {
  const int64_t S = q.size(0), hq = q.size(1), d = q.size(2), hkv = k.size(1);
  const double log2e = 1.4426950408889634;
  auto values = [](const Tensor& t) {
    return std::vector<double>(std::as_const(t).f32(), std::as_const(t).f32() + t.numel());
  };
  const Blocks per_doc = scale_blocks(cu, kFp8AttentionBlock), all_rows = {{0, S}};
  const Blocks& qkb = qk_blocks ? *qk_blocks : per_doc;
  const std::vector<double> qd = fp8 ? dequantized(q, qkb) : values(q),
                            kd = fp8 ? dequantized(k, qkb) : values(k),
                            vd = fp8 ? dequantized(v, all_rows) : values(v);
  std::vector<double> out(static_cast<size_t>(S * hq * d));
  for (size_t g = 0; g + 1 < cu.size(); ++g)
    for (int64_t i = cu[g]; i < cu[g + 1]; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kh = h / (hq / hkv);
        std::vector<double> y;
        for (int64_t j = cu[g]; j < cu[g + 1]; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += qd[(i * hq + h) * d + c] * kd[(j * hkv + kh) * d + c];
          y.push_back(dot * scale * log2e);
        }
        const double m = *std::max_element(y.begin(), y.end());
        double l = 0;
        for (double& p : y) {
          p = std::exp2(p - m + 8);
          l += p;
          if (fp8) p = e4m3_to_f32(f32_to_e4m3(static_cast<float>(p)));
        }
        if (sinks) l += 256 * std::exp2((*sinks)[h] * log2e - m);
        for (int64_t c = 0; c < d; ++c) {
          double acc = 0;
          for (size_t j = 0; j < y.size(); ++j) acc += y[j] * vd[((cu[g] + j) * hkv + kh) * d + c];
          out[(i * hq + h) * d + c] = acc / l;
        }
      }
  return out;
}

TEST(AttentionFp8, QuantizesKnownValuesBitExactly) {
  // Documents of 64 and 256 rows (two scale blocks) whose keys are all one vector and whose values
  // are all one row: every logit of a row equal, so P = 2^8 (code 256) for every key, l = 256 n and
  // the product's sums exact (identical terms, n a power of two), and each output is s_v times v's
  // code: e4m3(v / s_v) s_v. amax 1.75: s_v = 1.75 / 448 = 2^-8, exact.
  CpuContext ctx;
  // v (one row, D = 16) and its code e4m3(v x 256), nearest even, worked out by hand.
  const std::vector<std::pair<float, float>> table = {
      {1.75f, 448},                              // the amax: 448 exactly
      {68 / 256.f, 64},                          // a tie, to even
      {76 / 256.f, 80},                          // a tie, to even
      {-11.4f / 256, -11},                       // steps of 1 in [8, 16)
      {0.001953125f * 1.5f / 256, 0.00390625f},  // 1.5 x 2^-9: a subnormal tie, to 2^-8
      {0.00048828125f / 256, 0},                 // 2^-11: under half the least subnormal
      {0.f, 0},
      {-1.75f, -448},
      {1e-3f, 0.25f},  // 0.256
      {-0.3f, -80},    // -76.8
      {0.5f, 128},
      {300 / 256.f, 288},  // steps of 32 from 256
      {5.75f / 256, 6},    // a tie, to even
      {0.07f, 18},         // 17.92
      {-68 / 256.f, -64},  // a tie, to even
      {1.6f, 416}};        // 409.6
  const int64_t D = 16, S = 320;
  Tensor v = Tensor::empty({S, 1, D}, DType::F32), k = Tensor::empty({S, 1, D}, DType::F32);
  const Tensor k_row = random({1, 1, D}, 2, 1.f);
  for (int64_t r = 0; r < S; ++r)
    for (int64_t i = 0; i < D; ++i) {
      v.f32()[r * D + i] = table[i].first;
      k.f32()[r * D + i] = k_row.f32()[i];
    }
  const Tensor q = random({S, 1, D}, 1, 1.f);
  for (const DType dt : {DType::F32, DType::BF16}) {
    const Tensor o =
        attention_fp8(ctx, q, k, v, 0.25f, docs(ctx, {0, 64, S}), nullptr, dt).to_f32();
    for (int64_t r = 0; r < S; ++r)
      for (int64_t i = 0; i < D; ++i)
        ASSERT_EQ(o.f32()[r * D + i], table[i].second / 256.f)
            << "row " << r << " v[" << i << "] = " << table[i].first;
  }
}

TEST(AttentionFp8, EqualsTheDefinitionInFloat64) {
  CpuContext ctx;
  struct Case {
    int64_t S, hq, hkv, d;
    std::vector<int64_t> cu;
  };
  // Documents of 10 and 1 rows and of lengths off the 128-row blocks, GQA, an empty document, a
  // document past one 1024-row query block; head dims 16, 32, 128.
  const std::vector<Case> cases = {{300, 4, 2, 16, {0, 10, 11, 300}},
                                   {1030, 2, 2, 32, {0, 1030}},
                                   {200, 2, 1, 128, {0, 130, 130, 200}}};
  uint32_t seed = 10;
  for (const Case& c : cases) {
    const Tensor q = random({c.S, c.hq, c.d}, seed++, 1.f),
                 k = random({c.S, c.hkv, c.d}, seed++, 1.f),
                 v = random({c.S, c.hkv, c.d}, seed++, 1.f);
    const float scale = 1.f / std::sqrt(float(c.d));
    const Tensor o = attention_fp8(ctx, q, k, v, scale, docs(ctx, c.cu), nullptr, DType::F32);
    const double def = nmse(o, attention64(q, k, v, scale, c.cu, true));
    const double exact = nmse(o, attention64(q, k, v, scale, c.cu, false));
    std::printf("  S=%ld H=%ld/%ld D=%ld, %zu documents: nmse vs definition %.2e, vs exact %.2e\n",
                long(c.S), long(c.hq), long(c.hkv), long(c.d), c.cu.size() - 1, def, exact);
    // fp32 against float64 sums: a code of P may round the other way near a tie, rarely (one costs
    // ~1e-7 here; a wrong scale or index 1e-3 and more).
    EXPECT_LT(def, 1e-5);
    // e4m3 keeps 3 mantissa bits: NMSE ~1e-3 per rounding of q, k, v and P, less after the sums.
    EXPECT_LT(exact, 1e-2);
    EXPECT_GT(exact, 1e-5);
    if (c.cu.size() == 2) {  // no segments: one document of all rows, the same bits
      const Tensor o1 = attention_fp8(ctx, q, k, v, scale, Segments{}, nullptr, DType::F32);
      EXPECT_EQ(std::memcmp(o.raw(), o1.raw(), static_cast<size_t>(o.nbytes())), 0);
    }
  }
}

TEST(AttentionFp8, ScaleBlocksArePerDocumentAnd128Rows) {
  // Values 1e5 times the rest in q's rows of document 1's first block and in document 0's k. With
  // scales per document and 128 rows the rows past that block keep e4m3's precision; a scale per
  // tensor, per document or per 128 rows of the packed sequence puts some of their q or k codes
  // among e4m3's subnormals or at zero (below 2^-6 after scaling), which costs 20x the error and
  // more.
  CpuContext ctx;
  const int64_t S = 400, H = 2, D = 16, row = H * D;
  const std::vector<int64_t> cu = {0, 100, 400};
  Tensor q = random({S, H, D}, 51, 1.f), k = random({S, H, D}, 52, 1.f);
  const Tensor v = random({S, H, D}, 53, 1.f);
  for (int64_t i = 100 * row; i < 228 * row; ++i) q.f32()[i] *= 1e5f;
  for (int64_t i = 0; i < 100 * row; ++i) k.f32()[i] *= 1e5f;
  const float scale = 0.25f;
  const Tensor o = attention_fp8(ctx, q, k, v, scale, docs(ctx, cu), nullptr, DType::F32);
  const std::vector<double> exact = attention64(q, k, v, scale, cu, false);
  const size_t b = 228 * row, e = S * row;  // the rows past the large block
  auto wrong = [&](const Blocks& blocks) {  // nmse vs exact with q and k scaled per `blocks`
    return nmse(attention64(q, k, v, scale, cu, true, nullptr, &blocks), exact, b, e);
  };
  const double def = nmse(o, attention64(q, k, v, scale, cu, true), b, e),
               ours = nmse(o, exact, b, e);
  const double tensor = wrong({{0, S}}), doc = wrong(scale_blocks(cu, S)),
               pack = wrong(scale_blocks({0, S}, kFp8AttentionBlock));
  std::printf(
      "  rows past the large block: nmse vs definition %.2e; vs exact %.2e, where scales per "
      "tensor %.2e, per document %.2e, per 128 packed rows %.2e\n",
      def, ours, tensor, doc, pack);
  EXPECT_LT(def, 1e-5);
  EXPECT_LT(ours, 1e-2);
  EXPECT_GT(tensor, 5 * ours);
  EXPECT_GT(doc, 5 * ours);
  EXPECT_GT(pack, 5 * ours);
}

// MAGI-2's sinks: 256 x 2^(sink log2(e) - m) joins each row's denominator. Sinks near the rows'
// log-sum-exp move every output by tens of percent, so an ignored or misplaced sink fails by far.
TEST(AttentionFp8, SinksEqualTheDefinitionInFloat64) {
  CpuContext ctx;
  const int64_t S = 300, hq = 4, hkv = 2, d = 16;
  const std::vector<int64_t> cu = {0, 40, 300};
  const Tensor q = random({S, hq, d}, 31, 1.f), k = random({S, hkv, d}, 32, 1.f),
               v = random({S, hkv, d}, 33, 1.f);
  const float scale = 1.f / std::sqrt(float(d));
  auto sinks_of = [](const std::vector<float>& values) {
    Tensor t = Tensor::empty({int64_t(values.size())}, DType::F32);
    std::copy(values.begin(), values.end(), t.f32());
    return t;
  };
  const std::vector<float> sink_values = {4.5f, 3.f, -1.f, 5.5f};
  const Tensor sinks = sinks_of(sink_values);
  const Segments seg = docs(ctx, cu);
  const Tensor o = attention_fp8(ctx, q, k, v, scale, seg, &sinks, DType::F32);
  const Tensor plain = attention_fp8(ctx, q, k, v, scale, seg, nullptr, DType::F32);
  const std::vector<double> def = attention64(q, k, v, scale, cu, true, &sink_values),
                            exact = attention64(q, k, v, scale, cu, false, &sink_values);
  const double to_def = nmse(o, def), err = nmse(o, exact), without = nmse(plain, exact);
  std::printf("  nmse vs definition %.2e, vs exact with sinks %.2e (without sinks %.2e)\n", to_def,
              err, without);
  EXPECT_LT(to_def, 1e-5);
  EXPECT_LT(err, 1e-2);
  EXPECT_GT(without, 1e-2);
  // A bf16 output: the definition rounded once more.
  const Tensor ob = attention_fp8(ctx, q, k, v, scale, seg, &sinks, DType::BF16);
  const double bf16 = nmse(ob.to_f32(), def);
  std::printf("  bf16 output: nmse vs definition %.2e\n", bf16);
  EXPECT_LT(bf16, 1e-4);
  // Sinks far above the logits (2^(sink log2(e) - m + 8) past fp32's range): tiny outputs, still
  // the definition's, not zeros or NaN.
  const std::vector<float> huge_values(hq, 88.f);
  const Tensor huge = sinks_of(huge_values);
  const Tensor oh = attention_fp8(ctx, q, k, v, scale, seg, &huge, DType::F32);
  const double to_def_huge = nmse(oh, attention64(q, k, v, scale, cu, true, &huge_values));
  std::printf("  sinks 88: nmse vs definition %.2e\n", to_def_huge);
  EXPECT_LT(to_def_huge, 1e-5);
  // Sinks of the wrong size are refused by name.
  const Tensor three = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(attention_fp8(ctx, q, k, v, scale, seg, &three), BadInput);
}

TEST(AttentionFp8, ZeroOperands) {
  CpuContext ctx;
  const int64_t S = 300, H = 2, D = 16;
  const Tensor z = Tensor::zeros({S, H, D}, DType::F32), x = random({S, H, D}, 7, 1.f);
  const Segments seg = docs(ctx, {0, 200, S});
  // v = 0: the floored scale (2^-60 / 448, not 0) gives zeros, not NaN.
  for (const Tensor* qk : {&x, &z}) {
    const Tensor o0 = attention_fp8(ctx, *qk, *qk, z, 0.2f, seg);
    for (int64_t i = 0; i < o0.numel(); ++i) ASSERT_EQ(o0.f32()[i], 0.f);
  }
  // q = 0: every P = 256, each row s_v times the mean of its document's v codes; only the fp32
  // sums' rounding apart from the float64 definition.
  const Tensor o1 = attention_fp8(ctx, z, x, x, 0.2f, seg);
  const double mean = nmse(o1, attention64(z, x, x, 0.2f, {0, 200, S}, true));
  std::printf("  q = 0: nmse vs definition %.2e\n", mean);
  EXPECT_LT(mean, 1e-10);
}

TEST(AttentionFp8, RefusesWhatItCannotRun) {
  CpuContext ctx;
  auto run = [&](Shape qs, Shape ks, DType dt, bool causal) {
    const Tensor q = Tensor::zeros(qs, dt), k = Tensor::zeros(ks, dt);
    Segments seg = docs(ctx, {0, qs[0]});
    seg.causal = causal;
    return attention_fp8(ctx, q, k, k, 0.1f, seg);
  };
  auto message = [&](Shape qs, Shape ks, DType dt, bool causal = false) -> std::string {
    try {
      run(qs, ks, dt, causal);
    } catch (const BadInput& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_NE(message({8, 2, 24}, {8, 2, 24}, DType::F32).find("head dim 24 is not a multiple of 16"),
            std::string::npos);
  EXPECT_NE(message({8, 2, 272}, {8, 2, 272}, DType::F32).find("up to 256"), std::string::npos);
  EXPECT_NE(message({8, 2, 64}, {8, 2, 64}, DType::I32).find("F32, BF16 or F16"),
            std::string::npos);
  EXPECT_NE(message({8, 3, 64}, {8, 2, 64}, DType::F32).find("multiple of theirs"),
            std::string::npos);
  EXPECT_NE(message({8, 2, 64}, {9, 2, 64}, DType::F32).find("k and v alike"), std::string::npos);
  EXPECT_NE(message({8, 2, 64}, {8, 2, 64}, DType::BF16, true).find("bidirectional"),
            std::string::npos);
  const Tensor q = Tensor::zeros({8, 2, 64}, DType::F32);
  EXPECT_THROW(attention_fp8(ctx, q, q, q, 0.1f, docs(ctx, {0, 4})), BadInput);  // 4 rows of 8
  EXPECT_NO_THROW(run({8, 4, 256}, {8, 2, 256}, DType::BF16, false));
}

}  // namespace fp8_attention

}  // namespace
}  // namespace avdit::ops
