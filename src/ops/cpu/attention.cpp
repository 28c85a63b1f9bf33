// Reference attention on the CPU: per segment and head, scores = q k^T (sgemm), a softmax whose
// denominator may include a sink logit, then p v (sgemm), all float32. Queries go in blocks so that
// the score matrix stays small at long sequence lengths. The GEMMs are sgemm_fixed's (any thread
// count, same bits).
#include <algorithm>
#include <cmath>
#include <utility>

#include "ops/attention.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"

namespace avdit::ops::cpu {

void attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, float scale,
               const Segments& seg, const Tensor* sinks, const Tensor* gate, Tensor& out_t) {
  AVDIT_CHECK(q_in.ndim() == 3 && k_in.ndim() == 3 && v_in.ndim() == 3,
              "attention: q, k, v must be [S, H, D]");
  const int64_t s = q_in.size(0), hq = q_in.size(1), d = q_in.size(2), hkv = k_in.size(1);
  AVDIT_CHECK(k_in.size(0) == s && v_in.size(0) == s && k_in.size(2) == d && v_in.size(1) == hkv &&
                  v_in.size(2) == d && hkv > 0 && hq % hkv == 0,
              "attention: q {} k {} v {}", q_in.shape_str(), k_in.shape_str(), v_in.shape_str());
  AVDIT_CHECK(out_t.numel() == q_in.numel(), "attention: output {} for q {}", out_t.shape_str(),
              q_in.shape_str());
  const std::vector<int64_t> cu = seg.cu.empty() ? std::vector<int64_t>{0, s} : seg.cu;
  AVDIT_CHECK(cu.front() == 0 && cu.back() == s,
              "attention: segments run from 0 to {}, expected {}", cu.back(), s);
  const float* sink = nullptr;
  Tensor sinks_f;
  if (sinks) {
    AVDIT_CHECK(sinks->numel() == hq, "attention: sinks {} for {} heads", sinks->shape_str(), hq);
    sinks_f = f32(*sinks);
    sink = std::as_const(sinks_f).f32();
  }
  const Tensor q = f32(q_in), k = f32(k_in), v = f32(v_in);
  Tensor out = Tensor::zeros({s, hq, d}, DType::F32);
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
  float* po = out.f32();
  const int group = static_cast<int>(hq / hkv);
  constexpr int64_t kQueryBlock = 1024;
  std::vector<float> scores;
  for (size_t sg = 0; sg + 1 < cu.size(); ++sg) {
    const int64_t b = cu[sg], n = cu[sg + 1] - b;
    if (n <= 0) continue;
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / group;
      for (int64_t q0 = 0; q0 < n; q0 += kQueryBlock) {
        const int64_t m = std::min(kQueryBlock, n - q0);
        scores.resize(static_cast<size_t>(m * n));
        sgemm_fixed(true, m, n, d, scale, pq + ((b + q0) * hq + h) * d, hq * d,
                    pk + (b * hkv + kh) * d, hkv * d, 0.f, scores.data(), n);
        for (int64_t i = 0; i < m; ++i) {
          float* row = scores.data() + i * n;
          // Causal: keys after the query get probability 0 (exactly, as a -inf logit would).
          const int64_t keys = seg.causal ? q0 + i + 1 : n;
          float mx = *std::max_element(row, row + keys);
          if (sink) mx = std::max(mx, sink[h]);
          double sum = sink ? std::exp(static_cast<double>(sink[h] - mx)) : 0.0;
          for (int64_t j = 0; j < keys; ++j) {
            row[j] = std::exp(row[j] - mx);
            sum += row[j];
          }
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t j = 0; j < keys; ++j) row[j] *= inv;
          std::fill(row + keys, row + n, 0.f);
        }
        sgemm_fixed(false, m, d, n, 1.f, scores.data(), n, pv + (b * hkv + kh) * d, hkv * d, 0.f,
                    po + ((b + q0) * hq + h) * d, hq * d);
      }
    }
  }
  if (gate) {
    // The core's output rounded to out's dtype, times the rounded sigmoid, rounded (torch's bf16
    // ops).
    AVDIT_CHECK(gate->numel() == s * hq, "attention: gate {} for {} tokens x {} heads",
                gate->shape_str(), s, hq);
    const Tensor g = f32(*gate);
    const DType ot = out_t.dtype();
    for (int64_t t = 0; t < s; ++t)
      for (int64_t h = 0; h < hq; ++h) {
        const float sg = round_to(ot, 1.0f / (1.0f + std::exp(-g.f32()[t * hq + h])));
        float* row = po + (t * hq + h) * d;
        for (int64_t i = 0; i < d; ++i) row[i] = round_to(ot, round_to(ot, row[i]) * sg);
      }
  }
  store(out_t, po);
}

}  // namespace avdit::ops::cpu
