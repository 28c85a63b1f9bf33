// FP8 attention on the CPU (ops/attention_fp8.h): the GPU's computation step by step from the same
// e4m3 codes. Codes are decoded to fp32 for sgemm_fixed (the product of two e4m3 values is exact in
// fp32, the sums are fp32 as on the tensor cores); documents, heads and query blocks as
// ops::cpu::attention.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "ops/attention.h"
#include "ops/attention_fp8.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/linear_fp8.h"

namespace avdit::ops::cpu {
namespace {

// The decoded e4m3 codes of x at scale s: e4m3(x * s), nearest even, saturating.
std::vector<float> decoded_codes(const Tensor& x_in, float s) {
  const Tensor x = f32(x_in);
  std::vector<float> c(static_cast<size_t>(x.numel()));
  const float* p = x.f32();
  for (size_t i = 0; i < c.size(); ++i) c[i] = e4m3_to_f32(f32_to_e4m3(p[i] * s));
  return c;
}

float tensor_scale(const Tensor& x_in) {
  const Tensor x = f32(x_in);
  return fp8_scale(x.f32(), x.numel());
}

}  // namespace

void attention_fp8(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, float scale,
                   const Segments& seg, const Tensor* sinks_in, Tensor& out_t) {
  check_attention_fp8(q_in, k_in, v_in, seg, sinks_in, out_t);
  const Tensor sinks = sinks_in ? f32(*sinks_in) : Tensor();
  const DType od = out_t.dtype();
  const int64_t S = q_in.size(0), hq = q_in.size(1), d = q_in.size(2), hkv = k_in.size(1);
  const std::vector<int64_t> cu = seg.cu.empty() ? std::vector<int64_t>{0, S} : seg.cu;
  int64_t long_docs = 0;
  for (size_t i = 0; i + 1 < cu.size(); ++i) long_docs += cu[i + 1] - cu[i] >= kFp8AttentionMinRows;
  if (long_docs > kFp8AttentionMaxDocuments) {  // the definition: the call as ops::attention
    Segments s;
    s.cu = cu;
    s.causal = seg.causal;
    attention(q_in, k_in, v_in, scale, s, sinks_in, nullptr, out_t);
    return;
  }
  const float sq = tensor_scale(q_in), sk = tensor_scale(k_in), sv = tensor_scale(v_in);
  // The inverse scales as the GPU holds them (one fp32 division each).
  const float dq = 1.f / sq, dk = 1.f / sk, dv = 1.f / sv, ds = 1.f / kE4m3Max;
  const std::vector<float> qc = decoded_codes(q_in, sq), kc = decoded_codes(k_in, sk),
                           vc = decoded_codes(v_in, sv);
  std::vector<float> out(static_cast<size_t>(S * hq * d), 0.f);
  const int64_t group = hq / hkv;
  constexpr int64_t kQueryBlock = 1024;
  std::vector<float> p;
  std::vector<float> inv_sum, lse;
  for (size_t sg = 0; sg + 1 < cu.size(); ++sg) {
    const int64_t b = cu[sg], n = cu[sg + 1] - b;
    if (n < kFp8AttentionMinRows) continue;  // short (and empty) ones below
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / group;
      for (int64_t q0 = 0; q0 < n; q0 += kQueryBlock) {
        const int64_t m = std::min(kQueryBlock, n - q0);
        p.resize(static_cast<size_t>(m * n));
        inv_sum.resize(static_cast<size_t>(m));
        lse.resize(static_cast<size_t>(m));
        // Logits: the codes' dot products times scale / (s_q s_k).
        sgemm_fixed(true, m, n, d, scale * dq * dk, qc.data() + ((b + q0) * hq + h) * d, hq * d,
                    kc.data() + (b * hkv + kh) * d, hkv * d, 0.f, p.data(), n);
        for (int64_t i = 0; i < m; ++i) {
          float* row = p.data() + i * n;
          const int64_t keys = seg.causal ? q0 + i + 1 : n;
          const float mx = *std::max_element(row, row + keys);
          float sum = 0.f;
          for (int64_t j = 0; j < keys; ++j) {
            const float e = std::exp(row[j] - mx);  // in (0, 1]
            sum += e;
            row[j] = e4m3_to_f32(f32_to_e4m3(e * kE4m3Max));
          }
          std::fill(row + keys, row + n, 0.f);
          inv_sum[i] = 1.f / sum;
          lse[i] = mx + std::log(sum);
        }
        float* o = out.data() + ((b + q0) * hq + h) * d;
        sgemm_fixed(false, m, d, n, 1.f, p.data(), n, vc.data() + (b * hkv + kh) * d, hkv * d, 0.f,
                    o, hq * d);
        // O = acc / (448 s_v) / sum, rounded to e4m3 at s_o = s_v, decoded; with a sink, the
        // decoded value in the output's dtype times 1 / (1 + exp(sink - lse)).
        for (int64_t i = 0; i < m; ++i) {
          const float c = sinks_in ? 1.f / (1.f + std::exp(sinks.f32()[h] - lse[i])) : 1.f;
          for (int64_t e = 0; e < d; ++e) {
            float& x = o[i * hq * d + e];
            x = e4m3_to_f32(f32_to_e4m3(x * ds * dv * inv_sum[i] * sv)) * dv;
            if (sinks_in) x = round_to(od, x) * c;
          }
        }
      }
    }
  }
  store(out_t, out.data());
  // Short documents as ops::attention, in place of their rows.
  const size_t row_bytes = static_cast<size_t>(dtype_nbytes(od, hq * d));
  for (size_t sg = 0; sg + 1 < cu.size(); ++sg) {
    const int64_t b = cu[sg], n = cu[sg + 1] - b;
    if (n == 0 || n >= kFp8AttentionMinRows) continue;
    Segments s;
    s.cu = {0, n};
    s.causal = seg.causal;
    Tensor o = Tensor::empty({n, hq, d}, od);
    attention(q_in.slice_rows(b, b + n), k_in.slice_rows(b, b + n), v_in.slice_rows(b, b + n), scale, s,
              sinks_in, nullptr, o);
    std::memcpy(static_cast<char*>(out_t.mutable_raw()) + static_cast<size_t>(b) * row_bytes, o.raw(),
                static_cast<size_t>(n) * row_bytes);
  }
}

}  // namespace avdit::ops::cpu
