// The attention mass on the CPU (see ops/attention_mass.h): float64 scores, the top-k by
// nth_element, queries in parallel on the CPU pool.
#include "ops/attention_mass.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"

namespace avdit::ops {

void check_attention_mass(const Tensor& q, const Tensor& k, int64_t head, const MassQueries& m,
                          const Tensor& topk, const Tensor& pattern) {
  AVDIT_REQUIRE(q.ndim() == 3 && k.shape() == q.shape(),
                "attention mass: q {} and k {} must be [S, H, D] alike", q.shape_str(),
                k.shape_str());
  const int64_t S = q.size(0), n = m.rows.numel();
  AVDIT_REQUIRE(head >= 0 && head < q.size(1), "attention mass: head {} of {}", head, q.size(1));
  AVDIT_REQUIRE(m.begin >= 0 && m.begin < m.end && m.end <= S,
                "attention mass: keys [{}, {}) of {} rows", m.begin, m.end, S);
  AVDIT_REQUIRE(m.rows.dtype() == DType::I32 && m.top_k.dtype() == DType::I32 &&
                    m.frame.dtype() == DType::I32 && m.top_k.numel() == n && m.frame.numel() == S,
                "attention mass: rows {} top_k {} frame {} (I32 [n], [n], [{}])",
                m.rows.shape_str(), m.top_k.shape_str(), m.frame.shape_str(), S);
  AVDIT_REQUIRE(topk.dtype() == DType::F64 && pattern.dtype() == DType::F64 && topk.numel() == n &&
                    pattern.numel() == n,
                "attention mass: outputs {} {} (F64 [{}])", topk.shape_str(), pattern.shape_str(),
                n);
}

namespace cpu {

void attention_mass(const Tensor& q_in, const Tensor& k_in, int64_t head, double scale,
                    const MassQueries& m, Tensor& topk, Tensor& pattern) {
  check_attention_mass(q_in, k_in, head, m, topk, pattern);
  const Tensor q = f32(q_in), k = f32(k_in);
  const int64_t H = q.size(1), D = q.size(2), nk = m.end - m.begin, n = m.rows.numel();
  const int32_t* rows = m.rows.data<int32_t>();
  const int32_t* top_k = m.top_k.data<int32_t>();
  const int32_t* frame = m.frame.data<int32_t>();
  double* top_out = topk.data<double>();
  double* pat_out = pattern.data<double>();
  auto one = [&](int64_t i) {
    const int64_t row = rows[i];
    AVDIT_REQUIRE(row >= 0 && row < q.size(0) && top_k[i] >= 1 && top_k[i] <= nk,
                  "attention mass: query {} row {} top-k {} (keys {})", i, row, top_k[i], nk);
    const float* qi = q.f32() + (row * H + head) * D;
    std::vector<double> s(static_cast<size_t>(nk));
    // Pass 1: the exact scores and their log-sum-exp.
    double mx = -INFINITY;
    for (int64_t j = 0; j < nk; ++j) {
      const float* kj = k.f32() + ((m.begin + j) * H + head) * D;
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += double(qi[d]) * double(kj[d]);
      s[j] = scale * dot;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (double v : s) sum += std::exp(v - mx);
    const double lse = mx + std::log(sum);
    // Pass 2: each key's probability; the pattern's keys and the k largest.
    double pat = 0;
    const int32_t f = frame[row];
    for (int64_t j = 0; j < nk; ++j) {
      s[j] = std::exp(s[j] - lse);
      const int32_t fj = frame[m.begin + j];
      if (fj < 0 || fj == f) pat += s[j];
    }
    const int64_t kk = top_k[i];
    std::nth_element(s.begin(), s.begin() + (kk - 1), s.end(), std::greater<double>());
    double top = 0;
    for (int64_t j = 0; j < kk; ++j) top += s[j];
    top_out[i] = top;
    pat_out[i] = pat;
  };
  cpu_pool().run(n, one);
}

}  // namespace cpu
}  // namespace avdit::ops
