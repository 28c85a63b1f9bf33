// FP8 attention on the CPU (ops/attention_fp8.h): the definition in the GPU's fp32 order from the
// same e4m3 codes and scales. Codes are decoded to fp32 for sgemm_fixed (the product of two e4m3
// values is exact in fp32, the sums are fp32 as on the tensor cores); documents, heads and query
// blocks as ops::cpu::attention.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "ops/attention_fp8.h"
#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/linear_fp8.h"

namespace avdit::ops::cpu {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

// s = max(amax, 2^-60) / 448: the floor keeps an all-zero block's codes zero, not NaN.
float scale_of(float amax) { return std::fmax(amax, 0x1p-60f) / kE4m3Max; }

// e4m3_to_f32(f32_to_e4m3(p)) for p in [0, 256], the same bits without the scalar conversion's
// general path, which would take half the op's time at one call per logit: 3 mantissa bits, nearest
// even, from 2^-6 up; multiples of 2^-9 (the subnormals) below.
float e4m3_round_p(float p) {
  if (p < 0x1p-6f) return std::nearbyint(p * 512.f) * 0x1p-9f;
  const uint32_t u = std::bit_cast<uint32_t>(p);
  return std::bit_cast<float>((u + 0x7ffffu + ((u >> 20) & 1u)) & ~0xfffffu);
}

// x [S, heads, d] quantized in place to its decoded codes e4m3(x * (1 / s)) over rows [r0, r1) of
// one head, at that range's scale, which it returns.
float quantize_rows(float* x, int64_t heads, int64_t d, int64_t h, int64_t r0, int64_t r1) {
  float a = 0.f;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t e = 0; e < d; ++e) a = std::fmax(a, std::fabs(x[(r * heads + h) * d + e]));
  const float s = scale_of(a), inv = 1.f / s;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t e = 0; e < d; ++e) {
      float& v = x[(r * heads + h) * d + e];
      v = e4m3_to_f32(f32_to_e4m3(v * inv));
    }
  return s;
}

// Per-block quantization of q or k: scales [blocks, heads], blocks numbered through the documents
// in order, each document's from its first row.
std::vector<float> quantize_blocks(float* x, int64_t heads, int64_t d,
                                   const std::vector<int64_t>& cu) {
  std::vector<float> scales;
  for (size_t g = 0; g + 1 < cu.size(); ++g)
    for (int64_t r0 = cu[g]; r0 < cu[g + 1]; r0 += kFp8AttentionBlock) {
      const int64_t r1 = std::min(r0 + kFp8AttentionBlock, cu[g + 1]);
      for (int64_t h = 0; h < heads; ++h) scales.push_back(quantize_rows(x, heads, d, h, r0, r1));
    }
  return scales;
}

}  // namespace

void attention_fp8(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, float scale,
                   const Segments& seg, const Tensor* sinks_in, Tensor& out_t) {
  check_attention_fp8(q_in, k_in, v_in, seg, sinks_in, out_t);
  const int64_t S = q_in.size(0), hq = q_in.size(1), d = q_in.size(2), hkv = k_in.size(1);
  if (S == 0) return;
  const Tensor sinks = sinks_in ? f32(*sinks_in) : Tensor();
  const std::vector<int64_t> cu = seg.cu.empty() ? std::vector<int64_t>{0, S} : seg.cu;
  // Own F32 copies (f32() returns an F32 input itself): the codes replace the values.
  auto copy = [](const Tensor& x) { return x.dtype() == DType::F32 ? f32(x).clone() : f32(x); };
  Tensor q = copy(q_in), k = copy(k_in), v = copy(v_in);
  const std::vector<float> qs = quantize_blocks(q.f32(), hq, d, cu),
                           ks = quantize_blocks(k.f32(), hkv, d, cu);
  std::vector<float> vs(static_cast<size_t>(hkv));
  for (int64_t h = 0; h < hkv; ++h) vs[h] = quantize_rows(v.f32(), hkv, d, h, 0, S);
  const float *qc = q.f32(), *kc = k.f32(), *vc = v.f32();

  std::vector<float> out(static_cast<size_t>(S * hq * d), 0.f);
  const int64_t group = hq / hkv;
  const float scale_log2 = scale * kLog2e;
  // Query blocks of whole scale blocks: row q0 + i lies in the document's block (q0 + i) / 128.
  constexpr int64_t kQueryBlock = 8 * kFp8AttentionBlock;
  std::vector<float> p, f, inv;
  int64_t block0 = 0;  // the document's first scale block
  for (size_t g = 0; g + 1 < cu.size(); ++g) {
    const int64_t b = cu[g], n = cu[g + 1] - b,
                  nb = (n + kFp8AttentionBlock - 1) / kFp8AttentionBlock;
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / group;
      const float sink_l2 = sinks_in ? sinks.f32()[h] * kLog2e : -INFINITY;
      for (int64_t q0 = 0; q0 < n; q0 += kQueryBlock) {
        const int64_t m = std::min(kQueryBlock, n - q0);
        p.resize(static_cast<size_t>(m * n));
        f.resize(static_cast<size_t>(nb));
        inv.resize(static_cast<size_t>(m));
        sgemm_fixed(true, m, n, d, 1.f, qc + ((b + q0) * hq + h) * d, hq * d,
                    kc + (b * hkv + kh) * d, hkv * d, 0.f, p.data(), n);
        float* o = out.data() + ((b + q0) * hq + h) * d;
        for (int64_t i = 0; i < m; ++i) {
          if (i % kFp8AttentionBlock == 0) {  // f = ((scale log2(e)) s_q) s_k per key block
            const float fq = scale_log2 * qs[(block0 + (q0 + i) / kFp8AttentionBlock) * hq + h];
            for (int64_t jb = 0; jb < nb; ++jb) f[jb] = fq * ks[(block0 + jb) * hkv + kh];
          }
          float* row = p.data() + i * n;
          for (int64_t jb = 0; jb < nb; ++jb)
            for (int64_t j = jb * kFp8AttentionBlock;
                 j < std::min(n, (jb + 1) * kFp8AttentionBlock); ++j)
              row[j] *= f[jb];
          const float mx = *std::max_element(row, row + n);
          float l = 0.f;
          for (int64_t j = 0; j < n; ++j) {
            const float e = std::exp2(row[j] - mx + 8.f);  // in (0, 256]
            l += e;
            row[j] = e4m3_round_p(e);
          }
          // s_v / (l + 256 2^(sink_l2 - m)) with the larger exponent factored out, so that a sink
          // far above the row's logits neither overflows nor zeroes the row.
          const float mf = std::max(mx, sink_l2), e = std::exp2(mx - mf);
          inv[i] = vs[kh] * e / (l * e + 256.f * std::exp2(sink_l2 - mf));
        }
        sgemm_fixed(false, m, d, n, 1.f, p.data(), n, vc + (b * hkv + kh) * d, hkv * d, 0.f, o,
                    hq * d);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t e = 0; e < d; ++e) o[i * hq * d + e] *= inv[i];
      }
    }
    block0 += nb;
  }
  store(out_t, out.data());
}

}  // namespace avdit::ops::cpu
