// The Gated DeltaNet gates and recurrence on the CPU (see ops/gated_delta_rule.h). Value heads are
// independent, so they are the tasks of the CPU pool: the result does not depend on the thread
// count. The state is read once per token to form S^T k and once to update it and form S^T q.
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/gated_delta_rule.h"

namespace avdit::ops::cpu {
namespace {

// torch.nn.functional.softplus with its default threshold: the identity above 20, where
// log1p(exp(x)) equals x in float32 anyway.
float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

// x / sqrt(sum x^2 + 1e-6) per row of n values (the reference's l2norm, eps inside the root).
void l2_normalise_rows(const float* x, int64_t rows, int64_t n, float scale, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(row[i]) * row[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss + 1e-6));
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = row[i] * inv * scale;
  }
}

}  // namespace

void delta_rule_gates(const Tensor& a_in, const Tensor& b_in, const Tensor& a_log_in,
                      const Tensor& dt_bias_in, Tensor& g, Tensor& beta) {
  AVDIT_CHECK(a_in.ndim() == 2 && b_in.shape() == a_in.shape(),
              "delta_rule_gates: a {} and b {} must both be [T, H]", a_in.shape_str(),
              b_in.shape_str());
  const int64_t T = a_in.size(0), H = a_in.size(1);
  AVDIT_CHECK(a_log_in.numel() == H && dt_bias_in.numel() == H && g.numel() == T * H &&
                  beta.numel() == T * H,
              "delta_rule_gates: A_log {} dt_bias {} g {} beta {} for [{}, {}]",
              a_log_in.shape_str(), dt_bias_in.shape_str(), g.shape_str(), beta.shape_str(), T, H);
  const Tensor a = f32(a_in), b = f32(b_in), a_log = f32(a_log_in), dt = f32(dt_bias_in);
  std::vector<float> go(static_cast<size_t>(T * H)), bo(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t i = t * H + h;
      go[i] = -std::exp(a_log.f32()[h]) * softplus(a.f32()[i] + dt.f32()[h]);
      bo[i] = 1.f / (1.f + std::exp(-b.f32()[i]));
    }
  store(g, go.data());
  store(beta, bo.data());
}

void gated_delta_rule(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                      const Tensor& g_in, const Tensor& beta_in, Tensor& out) {
  AVDIT_CHECK(q_in.ndim() == 3 && k_in.shape() == q_in.shape() && v_in.ndim() == 3 &&
                  v_in.size(0) == q_in.size(0),
              "gated_delta_rule: q {} k {} v {} (expected [T, Hk, dk], [T, Hk, dk], [T, Hv, dv])",
              q_in.shape_str(), k_in.shape_str(), v_in.shape_str());
  const int64_t T = q_in.size(0), Hk = q_in.size(1), dk = q_in.size(2), Hv = v_in.size(1),
                dv = v_in.size(2);
  AVDIT_CHECK(Hk > 0 && Hv % Hk == 0, "gated_delta_rule: {} value heads for {} key heads", Hv, Hk);
  AVDIT_CHECK(g_in.numel() == T * Hv && beta_in.numel() == T * Hv && out.numel() == v_in.numel(),
              "gated_delta_rule: g {} beta {} out {} for v {}", g_in.shape_str(),
              beta_in.shape_str(), out.shape_str(), v_in.shape_str());
  const Tensor q = f32(q_in), k = f32(k_in), v = f32(v_in), g = f32(g_in), beta = f32(beta_in);
  std::vector<float> qn(static_cast<size_t>(T * Hk * dk)), kn(qn.size());
  l2_normalise_rows(q.f32(), T * Hk, dk, 1.f / std::sqrt(static_cast<float>(dk)), qn.data());
  l2_normalise_rows(k.f32(), T * Hk, dk, 1.f, kn.data());
  std::vector<float> o(static_cast<size_t>(T * Hv * dv));
  const int64_t group = Hv / Hk;
  cpu_pool().run(Hv, [&](int64_t h) {
    const int64_t hk = h / group;
    std::vector<float> S(static_cast<size_t>(dk * dv), 0.f), kv(dv), delta(dv), acc(dv);
    for (int64_t t = 0; t < T; ++t) {
      const float e = std::exp(g.f32()[t * Hv + h]), bt = beta.f32()[t * Hv + h];
      const float* kt = kn.data() + (t * Hk + hk) * dk;
      const float* qt = qn.data() + (t * Hk + hk) * dk;
      const float* vt = v.f32() + (t * Hv + h) * dv;
      // kv = (S e)^T k_t: what the decayed state already predicts for this key.
      std::fill(kv.begin(), kv.end(), 0.f);
      for (int64_t i = 0; i < dk; ++i) {
        const float* Si = S.data() + i * dv;
        const float ki = kt[i];
        for (int64_t j = 0; j < dv; ++j) kv[j] += Si[j] * e * ki;
      }
      for (int64_t j = 0; j < dv; ++j) delta[j] = (vt[j] - kv[j]) * bt;
      // S = S e + k_t delta^T, and out = S^T q_t in the same pass over the state.
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t i = 0; i < dk; ++i) {
        float* Si = S.data() + i * dv;
        const float ki = kt[i], qi = qt[i];
        for (int64_t j = 0; j < dv; ++j) {
          Si[j] = Si[j] * e + ki * delta[j];
          acc[j] += Si[j] * qi;
        }
      }
      std::copy(acc.begin(), acc.end(), o.data() + (t * Hv + h) * dv);
    }
  });
  store(out, o.data());
}

}  // namespace avdit::ops::cpu
