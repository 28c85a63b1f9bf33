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
// quantization bit for bit, the op against its definition computed in float64, its distance to the
// exact attention (FP8's, and not zero), all-zero operands, and the inputs it refuses.
namespace fp8_attention {

Tensor random(Shape s, uint32_t seed, float std) { return fp8::random(std::move(s), seed, std); }

Segments docs(CpuContext& ctx, std::vector<int64_t> cu, bool causal = false) {
  Segments seg = plan_segments(ctx, std::move(cu));
  seg.causal = causal;
  return seg;
}

double nmse(const Tensor& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::as_const(got).f32()[i] - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
  }
  return num / den;
}

// float64 attention of q, k, v over cu (GQA, causal): with `fp8` the definition of
// ops/attention_fp8.h step by step (scales 448 / amax in fp32, e4m3 codes of q, k, v, of
// P = exp(l - max) at 448 and of O at s_v) for documents of kFp8AttentionMinRows rows or more (the
// shorter ones exact, as the definition says), else the exact attention. sinks ([hq] or null): each
// row times 1 / (1 + exp(sink_h - lse)), which puts exp(sink_h) in the denominator exactly.
std::vector<double> attention64(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                                const std::vector<int64_t>& cu, bool causal, bool fp8,
                                const std::vector<float>* sinks = nullptr) {
  const int64_t S = q.size(0), hq = q.size(1), d = q.size(2), hkv = k.size(1);
  auto values = [](const Tensor& t) {
    return std::vector<double>(t.f32(), t.f32() + t.numel());
  };
  auto coded = [&](const Tensor& t, float& s) {
    double amax = 0;
    for (int64_t i = 0; i < t.numel(); ++i) amax = std::max(amax, std::fabs(double(t.f32()[i])));
    s = amax > 0 ? static_cast<float>(448.0 / amax) : 1.f;
    std::vector<double> c(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) c[i] = double(e4m3_to_f32(f32_to_e4m3(t.f32()[i] * s))) / s;
    return c;
  };
  float sq, sk, sv;
  const std::vector<double> qx = values(q), kx = values(k), vx = values(v);
  const std::vector<double> qc = coded(q, sq), kc = coded(k, sk), vc = coded(v, sv);
  auto e4m3 = [](double x) { return double(e4m3_to_f32(f32_to_e4m3(static_cast<float>(x)))); };
  std::vector<double> out(static_cast<size_t>(S * hq * d));
  for (size_t g = 0; g + 1 < cu.size(); ++g) {
    const bool f8 = fp8 && cu[g + 1] - cu[g] >= kFp8AttentionMinRows;
    const std::vector<double>& qd = f8 ? qc : qx;
    const std::vector<double>& kd = f8 ? kc : kx;
    const std::vector<double>& vd = f8 ? vc : vx;
    for (int64_t i = cu[g]; i < cu[g + 1]; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kh = h / (hq / hkv), end = causal ? i + 1 : cu[g + 1];
        std::vector<double> l;
        for (int64_t j = cu[g]; j < end; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += qd[(i * hq + h) * d + c] * kd[(j * hkv + kh) * d + c];
          l.push_back(dot * scale);
        }
        const double mx = *std::max_element(l.begin(), l.end());
        double sum = 0;
        for (double& x : l) {
          x = std::exp(x - mx);
          sum += x;
          if (f8) x = e4m3(x * 448) / 448;
        }
        const double sink = sinks ? 1 / (1 + std::exp((*sinks)[h] - mx - std::log(sum))) : 1;
        for (int64_t c = 0; c < d; ++c) {
          double acc = 0;
          for (size_t j = 0; j < l.size(); ++j) acc += l[j] * vd[((cu[g] + j) * hkv + kh) * d + c];
          acc /= sum;
          out[(i * hq + h) * d + c] = (f8 ? e4m3(acc * sv) / sv : acc) * sink;
        }
      }
  }
  return out;
}

TEST(AttentionFp8, QuantizesKnownValuesBitExactly) {
  // One document of kFp8AttentionMinRows rows whose keys are all one vector and whose values are
  // all one row: every logit equal, P = 1 (code 448) for every key, the sums exact (a power of two
  // of identical terms), so each output row is v's codes through O's rounding, which keeps them:
  // e4m3(v * s_v) / s_v. amax 1.75: s_v = 256, exact.
  CpuContext ctx;
  const std::vector<float> v_vals = {1.75f,          68 / 256.f,  76 / 256.f,  -11.4f / 256,
                                     0.001953125f * 1.5f / 256,   0.00048828125f / 256,
                                     0.f,            -1.75f,      1e-3f,       -0.3f,
                                     0.5f,           300 / 256.f, 5.75f / 256, 0.07f,
                                     -68 / 256.f,    1.6f};
  // Nearest even: 68 -> 64 and 76 -> 80 (ties), -11.4 -> -11, 1.5 x 2^-9 -> 2^-8 (subnormal tie),
  // 2^-11 -> 0; 0.256 -> 0.25 (64), -76.8 -> -80 (0.3 x 256), 300 -> 288, 5.75 -> 6 (tie), 17.92
  // -> 18, 409.6 -> 416.
  const std::vector<float> want = {448,     64,  80,  -11, 0.00390625f, 0, 0, -448, 0.25f, -80,
                                   128,     288, 6,   18,  -64,         416};
  const int64_t D = 16, S = kFp8AttentionMinRows;
  Tensor v = Tensor::empty({S, 1, D}, DType::F32), k = Tensor::empty({S, 1, D}, DType::F32);
  const Tensor k_row = random({1, 1, D}, 2, 1.f);
  for (int64_t r = 0; r < S; ++r)
    for (int64_t i = 0; i < D; ++i) {
      v.f32()[r * D + i] = v_vals[i];
      k.f32()[r * D + i] = k_row.f32()[i];
    }
  const Tensor q = random({S, 1, D}, 1, 1.f);
  for (const DType dt : {DType::F32, DType::BF16}) {
    const Tensor o = attention_fp8(ctx, q, k, v, 0.25f, docs(ctx, {0, S}), nullptr, dt).to_f32();
    for (int64_t r = 0; r < S; r += S - 1)  // the first and the last row
      for (int64_t i = 0; i < D; ++i)
        EXPECT_EQ(o.f32()[r * D + i], want[i] / 256.f) << "row " << r << " v[" << i << "] = " << v_vals[i];
  }
}

TEST(AttentionFp8, EqualsTheDefinitionInFloat64) {
  CpuContext ctx;
  struct Case {
    int64_t S, hq, hkv, d;
    std::vector<int64_t> cu;
    bool causal;
  };
  // FP8 documents of kFp8AttentionMinRows rows or more beside short ones (10 rows, 1 row), GQA,
  // causal.
  const std::vector<Case> cases = {{1100, 4, 2, 16, {0, 10, 11, 1100}, false},
                                   {1030, 2, 2, 32, {0, 1030}, true}};
  uint32_t seed = 10;
  for (const Case& c : cases) {
    const Tensor q = random({c.S, c.hq, c.d}, seed++, 1.f), k = random({c.S, c.hkv, c.d}, seed++, 1.f),
                 v = random({c.S, c.hkv, c.d}, seed++, 1.f);
    const float scale = 1.f / std::sqrt(float(c.d));
    const Tensor o = attention_fp8(ctx, q, k, v, scale, docs(ctx, c.cu, c.causal), nullptr, DType::F32);
    const double def = nmse(o, attention64(q, k, v, scale, c.cu, c.causal, true));
    const double exact = nmse(o, attention64(q, k, v, scale, c.cu, c.causal, false));
    std::printf("  S=%ld H=%ld/%ld D=%ld: nmse vs definition %.2e, vs exact attention %.2e\n",
                long(c.S), long(c.hq), long(c.hkv), long(c.d), def, exact);
    // fp32 against float64 sums: a P or O code may round the other way near a tie, rarely (one O
    // code costs ~1e-6 here; a wrong scale or index 1e-3 and more).
    EXPECT_LT(def, 1e-5);
    // e4m3 keeps 3 mantissa bits: NMSE ~1e-3 per rounding of q, k, v and O, less after the sums.
    EXPECT_LT(exact, 1e-2);
    EXPECT_GT(exact, 1e-5);
  }
}

// MAGI-2's sinks: exp(sink_h) joins each row's denominator after O's FP8 rounding (the definition
// in ops/attention_fp8.h). Sinks near the rows' log-sum-exp move every output by tens of percent,
// so an ignored or misplaced sink fails by far.
TEST(AttentionFp8, SinksEqualTheDefinitionInFloat64) {
  CpuContext ctx;
  const int64_t S = 1090, hq = 4, hkv = 2, d = 16;
  const std::vector<int64_t> cu = {0, 40, 1090};  // a short document, then an FP8 one
  const Tensor q = random({S, hq, d}, 31, 1.f), k = random({S, hkv, d}, 32, 1.f),
               v = random({S, hkv, d}, 33, 1.f);
  const std::vector<float> sink_values = {4.5f, 3.f, -1.f, 5.5f};
  Tensor sinks = Tensor::empty({hq}, DType::F32);
  std::copy(sink_values.begin(), sink_values.end(), sinks.f32());
  const float scale = 1.f / std::sqrt(float(d));
  for (const bool causal : {false, true}) {
    const Segments seg = docs(ctx, cu, causal);
    const Tensor o = attention_fp8(ctx, q, k, v, scale, seg, &sinks, DType::F32);
    const Tensor plain = attention_fp8(ctx, q, k, v, scale, seg, nullptr, DType::F32);
    const std::vector<double> exact = attention64(q, k, v, scale, cu, causal, false, &sink_values);
    const double def = nmse(o, attention64(q, k, v, scale, cu, causal, true, &sink_values));
    const double err = nmse(o, exact), without = nmse(plain, exact);
    std::printf("  causal %d: nmse vs definition %.2e, vs exact with sinks %.2e (without sinks %.2e)\n",
                causal, def, err, without);
    EXPECT_LT(def, 1e-5);
    EXPECT_LT(err, 1e-2);
    EXPECT_GT(without, 1e-2);
  }
  // A bf16 output rounds twice (O's decode, then the sink's product), as the GPU's two passes do.
  const Tensor ob = attention_fp8(ctx, q, k, v, scale, docs(ctx, cu), &sinks, DType::BF16);
  EXPECT_LT(nmse(ob.to_f32(), attention64(q, k, v, scale, cu, false, true, &sink_values)), 1e-4);
  // Sinks of the wrong size or dtype are refused by name.
  const Tensor three = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(attention_fp8(ctx, q, k, v, scale, docs(ctx, cu), &three), BadInput);
}

TEST(AttentionFp8, ZeroOperands) {
  CpuContext ctx;
  const int64_t S = kFp8AttentionMinRows, H = 2, D = 16;
  const Tensor z = Tensor::zeros({S, H, D}, DType::F32), x = random({S, H, D}, 7, 1.f);
  const Segments seg = docs(ctx, {0, S});
  // v = 0: the guarded scale (1, not 448 / 0) gives zeros, not NaN.
  const Tensor o0 = attention_fp8(ctx, x, x, z, 0.2f, seg);
  for (int64_t i = 0; i < o0.numel(); ++i) EXPECT_EQ(o0.f32()[i], 0.f);
  // q = k = 0: uniform weights, the mean of v's codes (within O's rounding).
  const Tensor o1 = attention_fp8(ctx, z, z, x, 0.2f, seg);
  const std::vector<double> ref = attention64(z, z, x, 0.2f, {0, S}, false, true);
  EXPECT_LT(nmse(o1, ref), 1e-5);  // an O code may round the other way at a tie, rarely
}

// The definition's split: rows of a short document equal ops::attention's (the inputs' precision,
// no FP8), rows of a long one do not; more than kFp8AttentionMaxDocuments long documents and the
// whole call is ops::attention.
TEST(AttentionFp8, ShortDocumentsAndManyDocumentsAttendAsAttention) {
  CpuContext ctx;
  const int64_t H = 2, D = 16, n_short = 300, S = n_short + kFp8AttentionMinRows;
  const Tensor q = random({S, H, D}, 41, 1.f), k = random({S, H, D}, 42, 1.f), v = random({S, H, D}, 43, 1.f);
  const Segments seg = docs(ctx, {0, n_short, S});
  const Tensor o = attention_fp8(ctx, q, k, v, 0.25f, seg, nullptr, DType::F32);
  const Tensor exact = attention(ctx, q, k, v, 0.25f, seg);
  const int64_t row = H * D;
  EXPECT_EQ(std::memcmp(o.raw(), exact.raw(), static_cast<size_t>(n_short * row) * sizeof(float)), 0);
  double diff = 0;
  for (int64_t i = n_short * row; i < S * row; ++i) diff = std::max(diff, double(std::fabs(o.f32()[i] - exact.f32()[i])));
  EXPECT_GT(diff, 1e-3) << "the long document must run in FP8";
  // Nine long documents: the whole call as ops::attention.
  const int64_t n = kFp8AttentionMinRows, docs_n = kFp8AttentionMaxDocuments + 1;
  std::vector<int64_t> cu;
  for (int64_t i = 0; i <= docs_n; ++i) cu.push_back(i * n);
  const Tensor q9 = random({docs_n * n, 1, D}, 44, 1.f), k9 = random({docs_n * n, 1, D}, 45, 1.f),
               v9 = random({docs_n * n, 1, D}, 46, 1.f);
  const Segments seg9 = docs(ctx, cu);
  const Tensor o9 = attention_fp8(ctx, q9, k9, v9, 0.25f, seg9, nullptr, DType::F32);
  const Tensor e9 = attention(ctx, q9, k9, v9, 0.25f, seg9);
  EXPECT_EQ(std::memcmp(o9.raw(), e9.raw(), static_cast<size_t>(e9.nbytes())), 0);
}

TEST(AttentionFp8, RefusesWhatCudnnCannotRun) {
  CpuContext ctx;
  auto run = [&](Shape qs, Shape ks, DType dt) {
    const Tensor q = Tensor::zeros(qs, dt), k = Tensor::zeros(ks, dt);
    return attention_fp8(ctx, q, k, k, 0.1f, docs(ctx, {0, qs[0]}));
  };
  auto message = [&](Shape qs, Shape ks, DType dt) -> std::string {
    try {
      run(qs, ks, dt);
    } catch (const BadInput& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_NE(message({8, 2, 72}, {8, 2, 72}, DType::F32).find("head dim 72 is not a multiple of 16"),
            std::string::npos);
  EXPECT_NE(message({8, 2, 272}, {8, 2, 272}, DType::F32).find("up to 256"), std::string::npos);
  EXPECT_NE(message({8, 2, 64}, {8, 2, 64}, DType::I32).find("F32, BF16 or F16"),
            std::string::npos);
  EXPECT_NE(message({8, 3, 64}, {8, 2, 64}, DType::F32).find("multiple of theirs"),
            std::string::npos);
  EXPECT_NO_THROW(run({8, 4, 256}, {8, 2, 256}, DType::BF16));
}

}  // namespace fp8_attention

}  // namespace
}  // namespace avdit::ops
