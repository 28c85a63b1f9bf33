// The attention prologue and gate on the CPU (see ops/attention_prologue.h): the MAGI-2 model's
// step-by-step arithmetic - RMSNorm with the sum of squares in double, as ops::rms_norm - per
// token.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attention_prologue.h"
#include "ops/cpu/common.h"

namespace avdit::ops::cpu {

void qkv_prologue(const Tensor& qkv_in, const Tensor& q_norm_in, const Tensor& k_norm_in,
                  const Tensor* group, const Tensor& inv, const Tensor& rope_in, int64_t half,
                  Tensor& q, Tensor& k, Tensor& v) {
  AVDIT_CHECK(q.ndim() == 3 && k.ndim() == 3 && v.ndim() == 3,
              "qkv_prologue: q, k, v must be [L, H, D]");
  const int64_t L = q.size(0), Hq = q.size(1), Hkv = k.size(1), D = q.size(2), heads = Hq + 2 * Hkv;
  AVDIT_CHECK(qkv_in.ndim() == 2 && qkv_in.size(0) == L && qkv_in.size(1) == heads * D &&
                  k.size(2) == D && v.numel() == k.numel(),
              "qkv_prologue: qkv {} for q {} k {} v {}", qkv_in.shape_str(), q.shape_str(),
              k.shape_str(), v.shape_str());
  AVDIT_CHECK(inv.numel() == L && rope_in.ndim() == 2 && rope_in.size(0) == L &&
                  2 * half <= rope_in.size(1) && 2 * half <= D,
              "qkv_prologue: inv {} rope {} (half {}) for {} tokens of head dim {}",
              inv.shape_str(), rope_in.shape_str(), half, L, D);
  const int64_t G = q_norm_in.numel() / D;
  AVDIT_CHECK(
      G >= 1 && q_norm_in.numel() == G * D && k_norm_in.numel() == G * D && (G == 1 || group),
      "qkv_prologue: q_norm {} k_norm {} for head dim {}", q_norm_in.shape_str(),
      k_norm_in.shape_str(), D);
  const Tensor qkv = f32(qkv_in), qn = f32(q_norm_in), kn = f32(k_norm_in), rope = f32(rope_in);
  const float* src = qkv.f32();
  const int64_t rw = rope.size(1);
  std::vector<float> qo(static_cast<size_t>(L * Hq * D)), ko(static_cast<size_t>(L * Hkv * D)),
      vo(static_cast<size_t>(L * Hkv * D));
  std::vector<float> a(static_cast<size_t>(D));
  for (int64_t p = 0; p < L; ++p) {
    const int64_t r = index_at(inv, p);
    AVDIT_CHECK(r >= 0 && r < L, "qkv_prologue: inv[{}] = {} outside [0, {})", p, r, L);
    const int64_t g = G > 1 ? index_at(*group, r) : 0;
    AVDIT_CHECK(g >= 0 && g < G, "qkv_prologue: group {} outside [0, {})", g, G);
    const float* sin_row = rope.f32() + p * rw;
    const float* cos_row = sin_row + half;
    for (int64_t h = 0; h < Hq + Hkv; ++h) {
      const bool is_q = h < Hq;
      const float* x = src + r * heads * D + h * D;
      const float* w = (is_q ? qn : kn).f32() + g * D;
      // ops::rms_norm's arithmetic: sum of squares in double, then x * inv * (1 + w) in float32.
      double ss = 0;
      for (int64_t i = 0; i < D; ++i) ss += static_cast<double>(x[i]) * x[i];
      const float inv_rms =
          static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(D) + 1e-6f));
      for (int64_t i = 0; i < D; ++i) a[i] = x[i] * inv_rms * (1.f + w[i]);
      float* o = is_q ? qo.data() + (p * Hq + h) * D : ko.data() + (p * Hkv + h - Hq) * D;
      for (int64_t i = 0; i < D; ++i) o[i] = a[i];
      for (int64_t i = 0; i < half; ++i) {
        const float c = cos_row[i], sn = sin_row[i];
        const float x0 = a[i], x1 = a[i + half];
        o[i] = x0 * c - x1 * sn;
        o[i + half] = x1 * c + x0 * sn;
      }
    }
    std::copy_n(src + r * heads * D + (Hq + Hkv) * D, Hkv * D, vo.data() + p * Hkv * D);
  }
  store(q, qo.data());
  store(k, ko.data());
  store(v, vo.data());
}

void gate_unpermute(const Tensor& o_in, const Tensor& g_in, const Tensor& perm, Tensor& out) {
  AVDIT_CHECK(o_in.ndim() == 3, "gate_unpermute: o {} (expected [L, Hq, D])", o_in.shape_str());
  const int64_t L = o_in.size(0), Hq = o_in.size(1), D = o_in.size(2);
  AVDIT_CHECK(g_in.numel() == L * Hq && perm.numel() == L && out.numel() == L * Hq * D,
              "gate_unpermute: o {} g {} perm {} out {}", o_in.shape_str(), g_in.shape_str(),
              perm.shape_str(), out.shape_str());
  const Tensor o = f32(o_in), g = f32(g_in);
  const DType ot = out.dtype();
  std::vector<float> y(static_cast<size_t>(L * Hq * D));
  for (int64_t r = 0; r < L; ++r) {
    const int64_t src = index_at(perm, r);
    AVDIT_CHECK(src >= 0 && src < L, "gate_unpermute: perm[{}] = {} outside [0, {})", r, src, L);
    for (int64_t h = 0; h < Hq; ++h) {
      const float s = round_to(ot, 1.0f / (1.0f + std::exp(-g.f32()[r * Hq + h])));
      const float* row = o.f32() + (src * Hq + h) * D;
      float* dst = y.data() + (r * Hq + h) * D;
      for (int64_t d = 0; d < D; ++d) dst[d] = round_to(ot, row[d] * s);
    }
  }
  store(out, y.data());
}

}  // namespace avdit::ops::cpu
