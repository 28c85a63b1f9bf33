// The Gated DeltaNet ops' CPU references against direct float64 computations on fresh random
// inputs at odd sizes: the causal depthwise conv1d + SiLU, the gates (softplus threshold included)
// and the recurrence with l2-normalised q / k and grouped key heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ops/causal_conv1d.h"
#include "ops/context.h"
#include "ops/gated_delta_rule.h"

namespace avdit::ops {
namespace {

Tensor random(Shape shape, std::mt19937& rng, float scale = 1.f, float mean = 0.f) {
  Tensor t = Tensor::empty(shape, DType::F32);
  std::normal_distribution<float> d(mean, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t;
}

// max |a - b| / max |b|
double rel_err(const Tensor& a_any, const std::vector<double>& b) {
  const Tensor a = a_any.to_f32();
  EXPECT_EQ(a.numel(), static_cast<int64_t>(b.size()));
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::fabs(a.f32()[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return den > 0 ? num / den : num;
}

double silu(double x) { return x / (1 + std::exp(-x)); }

TEST(Qwen35Ops, CausalConv1dSiluMatchesFloat64) {
  CpuContext ctx;
  std::mt19937 rng(11);
  for (auto [T, C, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 5, 4},
                         {3, 7, 4},
                         {13, 9, 4},
                         {29, 3, 3},
                         {6, 11, 1}}) {
    const Tensor x = random({T, C}, rng), w = random({C, 1, K}, rng, 0.5f);
    std::vector<double> want(static_cast<size_t>(T * C));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < K; ++j) {
          const int64_t s = t - (K - 1) + j;  // left zero padding of K - 1
          if (s >= 0) acc += static_cast<double>(w.f32()[c * K + j]) * x.f32()[s * C + c];
        }
        want[t * C + c] = silu(acc);
      }
    EXPECT_LT(rel_err(causal_conv1d_silu(ctx, x, w), want), 1e-6) << T << "x" << C << " K" << K;
    // The [C, K] layout gives the same, and a BF16 output rounds once.
    EXPECT_LT(rel_err(causal_conv1d_silu(ctx, x, w.reshape({C, K})), want), 1e-6);
    EXPECT_LT(rel_err(causal_conv1d_silu(ctx, x, w, DType::BF16), want), 1e-2);
  }
}

TEST(Qwen35Ops, DeltaRuleGatesMatchFloat64) {
  CpuContext ctx;
  std::mt19937 rng(12);
  const int64_t T = 9, H = 5;
  Tensor a = random({T, H}, rng, 3.f), b = random({T, H}, rng, 3.f);
  const Tensor a_log = random({H}, rng, 0.5f), dt = random({H}, rng, 0.5f);
  a.f32()[3] = 25.f;  // above softplus's threshold of 20: the identity
  a.f32()[7] = -30.f;
  Tensor g = ctx.empty({T, H}, DType::F32), beta = ctx.empty({T, H}, DType::F32);
  delta_rule_gates(ctx, a, b, a_log, dt, g, beta);
  std::vector<double> wg(T * H), wb(T * H);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const double x = static_cast<double>(a.f32()[t * H + h]) + dt.f32()[h];
      const double sp = x > 20 ? x : std::log1p(std::exp(x));
      wg[t * H + h] = -std::exp(static_cast<double>(a_log.f32()[h])) * sp;
      wb[t * H + h] = 1 / (1 + std::exp(-static_cast<double>(b.f32()[t * H + h])));
    }
  EXPECT_LT(rel_err(g, wg), 1e-6);
  EXPECT_LT(rel_err(beta, wb), 1e-6);
}

// The recurrence of ops/gated_delta_rule.h in float64, one value head at a time.
std::vector<double> delta_rule_f64(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& g, const Tensor& beta) {
  const int64_t T = q.size(0), Hk = q.size(1), dk = q.size(2), Hv = v.size(1), dv = v.size(2);
  std::vector<double> out(static_cast<size_t>(T * Hv * dv));
  auto normed = [&](const Tensor& x, int64_t t, int64_t h, double scale) {
    std::vector<double> r(dk);
    double ss = 0;
    for (int64_t i = 0; i < dk; ++i) ss += std::pow(x.f32()[(t * Hk + h) * dk + i], 2.0);
    for (int64_t i = 0; i < dk; ++i)
      r[i] = x.f32()[(t * Hk + h) * dk + i] / std::sqrt(ss + 1e-6) * scale;
    return r;
  };
  for (int64_t h = 0; h < Hv; ++h) {
    const int64_t hk = h / (Hv / Hk);
    std::vector<double> S(dk * dv, 0.0);
    for (int64_t t = 0; t < T; ++t) {
      const auto qt = normed(q, t, hk, 1 / std::sqrt(static_cast<double>(dk)));
      const auto kt = normed(k, t, hk, 1);
      const double e = std::exp(static_cast<double>(g.f32()[t * Hv + h]));
      const double bt = beta.f32()[t * Hv + h];
      for (double& s : S) s *= e;
      for (int64_t j = 0; j < dv; ++j) {
        double kv = 0;
        for (int64_t i = 0; i < dk; ++i) kv += S[i * dv + j] * kt[i];
        const double delta = bt * (v.f32()[(t * Hv + h) * dv + j] - kv);
        for (int64_t i = 0; i < dk; ++i) S[i * dv + j] += kt[i] * delta;
      }
      for (int64_t j = 0; j < dv; ++j) {
        double o = 0;
        for (int64_t i = 0; i < dk; ++i) o += S[i * dv + j] * qt[i];
        out[(t * Hv + h) * dv + j] = o;
      }
    }
  }
  return out;
}

TEST(Qwen35Ops, GatedDeltaRuleMatchesFloat64) {
  CpuContext ctx;
  std::mt19937 rng(13);
  for (auto [T, Hk, Hv, dk, dv] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{1, 1, 1, 3, 5},
        {7, 2, 6, 5, 3},
        {37, 3, 3, 7, 9},
        {70, 1, 3, 16, 11}}) {
    const Tensor q = random({T, Hk, dk}, rng), k = random({T, Hk, dk}, rng),
                 v = random({T, Hv, dv}, rng);
    // Decays in (-3, 0) as -exp(A) softplus(.) gives, write strengths in (0, 1).
    Tensor g = Tensor::empty({T, Hv}, DType::F32), beta = Tensor::empty({T, Hv}, DType::F32);
    std::uniform_real_distribution<float> ug(-3.f, -0.001f), ub(0.01f, 0.99f);
    for (int64_t i = 0; i < T * Hv; ++i) g.f32()[i] = ug(rng), beta.f32()[i] = ub(rng);
    const std::vector<double> want = delta_rule_f64(q, k, v, g, beta);
    EXPECT_LT(rel_err(gated_delta_rule(ctx, q, k, v, g, beta), want), 2e-6)
        << "T " << T << " Hk " << Hk << " Hv " << Hv << " dk " << dk << " dv " << dv;
  }
}

TEST(Qwen35Ops, GatedDeltaRuleRejectsHeadsThatDoNotGroup) {
  CpuContext ctx;
  std::mt19937 rng(14);
  const Tensor q = random({4, 2, 3}, rng), v = random({4, 3, 3}, rng), g = random({4, 3}, rng);
  EXPECT_ANY_THROW(gated_delta_rule(ctx, q, q, v, g, g));
}

}  // namespace
}  // namespace avdit::ops
