// Reference attention on the CPU: per segment and head, scores = q k^T (sgemm), a softmax whose
// denominator may include a sink logit, then p v (sgemm). Queries go in blocks so that the score
// matrix stays small at long sequence lengths. The GEMMs are sgemm_fixed's (any thread count, same
// bits).
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/ops.h"

namespace avdit::ops {

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                 const std::vector<int64_t>& cu_seqlens, const Tensor* sinks) {
  AVDIT_CHECK(q.ndim() == 3 && k.ndim() == 3 && v.ndim() == 3, "attention: q, k, v must be [S, H, D]");
  const int64_t s = q.size(0), hq = q.size(1), d = q.size(2), hkv = k.size(1);
  AVDIT_CHECK(k.size(0) == s && v.size(0) == s && k.size(2) == d && v.size(1) == hkv && v.size(2) == d &&
                  hkv > 0 && hq % hkv == 0,
              "attention: q {} k {} v {}", q.shape_str(), k.shape_str(), v.shape_str());
  std::vector<int64_t> cu = cu_seqlens.empty() ? std::vector<int64_t>{0, s} : cu_seqlens;
  AVDIT_CHECK(cu.front() == 0 && cu.back() == s, "attention: cu_seqlens must run from 0 to {}", s);
  const float* sink = nullptr;
  Tensor sinks_f;
  if (sinks) {
    AVDIT_CHECK(sinks->numel() == hq, "attention: sinks {} for {} heads", sinks->shape_str(), hq);
    sinks_f = sinks->to_f32();
    sink = std::as_const(sinks_f).f32();
  }
  Tensor out = Tensor::zeros({s, hq, d}, DType::F32);
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
  float* po = out.f32();
  const int group = static_cast<int>(hq / hkv);
  constexpr int64_t kQueryBlock = 1024;
  std::vector<float> scores;
  for (size_t seg = 0; seg + 1 < cu.size(); ++seg) {
    const int64_t b = cu[seg], n = cu[seg + 1] - b;
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
          float mx = *std::max_element(row, row + n);
          if (sink) mx = std::max(mx, sink[h]);
          double sum = sink ? std::exp(static_cast<double>(sink[h] - mx)) : 0.0;
          for (int64_t j = 0; j < n; ++j) {
            row[j] = std::exp(row[j] - mx);
            sum += row[j];
          }
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t j = 0; j < n; ++j) row[j] *= inv;
        }
        sgemm_fixed(false, m, d, n, 1.f, scores.data(), n, pv + (b * hkv + kh) * d, hkv * d, 0.f,
                    po + ((b + q0) * hq + h) * d, hq * d);
      }
    }
  }
  return out;
}

void rope_rotate_half_(Tensor& x, const Tensor& cos, const Tensor& sin) {
  AVDIT_CHECK(x.ndim() == 3, "rope: x must be [S, H, D], got {}", x.shape_str());
  const int64_t s = x.size(0), h = x.size(1), d = x.size(2), half = cos.size(-1);
  AVDIT_CHECK(cos.numel() == s * half && sin.numel() == s * half && 2 * half <= d, "rope: x {} cos {} sin {}",
              x.shape_str(), cos.shape_str(), sin.shape_str());
  float* p = x.f32();
  const float *pc = cos.f32(), *ps = sin.f32();
  for (int64_t t = 0; t < s; ++t)
    for (int64_t hh = 0; hh < h; ++hh) {
      float* a = p + (t * h + hh) * d;
      for (int64_t i = 0; i < half; ++i) {
        const float c = pc[t * half + i], sn = ps[t * half + i];
        const float x0 = a[i], x1 = a[i + half];
        a[i] = x0 * c - x1 * sn;
        a[i + half] = x1 * c + x0 * sn;
      }
    }
}

}  // namespace avdit::ops
