// Attention, MLP and modulation of H3 blocks, in the reference's order of operations.
#include "models/h3/layers.h"

#include <cmath>

#include "core/error.h"
#include "ops/ops.h"

namespace avdit::models::h3 {

Tensor attention(const BlockWeights& w, const H3Config& c, const Tensor& h, const RopeTables* rope,
                 const std::vector<int64_t>& cu_seqlens, const Dump& dump, const Rounding& rnd) {
  const int64_t S = h.size(0), heads = c.num_attention_heads, dh = c.attention_head_dim;
  const int64_t I = heads * dh;
  // qkv_grouped: [S, heads, 3, dh] (grouped per head, as the stored rows).
  const Tensor qkv_grouped = rnd(ops::linear(h, w.qkv_proj));
  Tensor q = Tensor::empty({S, heads, dh}, DType::F32);
  Tensor k = Tensor::empty({S, heads, dh}, DType::F32);
  Tensor v = Tensor::empty({S, heads, dh}, DType::F32);
  const float* src = qkv_grouped.f32();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t hd = 0; hd < heads; ++hd) {
      const float* g = src + s * 3 * I + hd * 3 * dh;
      float* qd = q.f32() + (s * heads + hd) * dh;
      float* kd = k.f32() + (s * heads + hd) * dh;
      float* vd = v.f32() + (s * heads + hd) * dh;
      for (int64_t d = 0; d < dh; ++d) {
        qd[d] = g[d];
        kd[d] = g[dh + d];
        vd[d] = g[2 * dh + d];
      }
    }
  if (dump) {
    // The fixture's block0_qkv: [S, 3I] with columns Q_all | K_all | V_all (regrouped order).
    Tensor qkv = Tensor::empty({S, 3 * I}, DType::F32);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < I; ++i) {
        qkv.f32()[s * 3 * I + i] = q.f32()[s * I + i];
        qkv.f32()[s * 3 * I + I + i] = k.f32()[s * I + i];
        qkv.f32()[s * 3 * I + 2 * I + i] = v.f32()[s * I + i];
      }
    dump.put("qkv", qkv);
  }
  const float eps = static_cast<float>(c.qk_norm_eps);
  q = rnd(ops::rms_norm(q, w.q_norm, eps));
  k = rnd(ops::rms_norm(k, w.k_norm, eps));
  dump.put("q_normed", q);
  dump.put("k_normed", k);
  if (rope) {
    // bf16 mode: the reference casts its cos/sin cache to the activation dtype.
    const Tensor cos = rnd.bf16 ? rnd(rope->cos.clone()) : rope->cos;
    const Tensor sin = rnd.bf16 ? rnd(rope->sin.clone()) : rope->sin;
    ops::rope_rotate_half_(q, cos, sin);
    ops::rope_rotate_half_(k, cos, sin);
    q = rnd(q);
    k = rnd(k);
    dump.put("q_rope", q);
    dump.put("k_rope", k);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const Tensor core = rnd(ops::attention(q, k, v, scale, cu_seqlens)).reshape({S, I});
  dump.put("attn_core", core);
  Tensor out = rnd(ops::linear(core, w.out_proj));
  dump.put("attn_out", out);
  return out;
}

Tensor swiglu(const Tensor& gate_up, const Rounding& rnd) {
  const int64_t S = gate_up.size(0), F = gate_up.size(1) / 2;
  Tensor out = Tensor::empty({S, F}, DType::F32);
  for (int64_t s = 0; s < S; ++s) {
    const float* g = gate_up.f32() + s * 2 * F;
    const float* u = g + F;
    float* o = out.f32() + s * F;
    for (int64_t f = 0; f < F; ++f) o[f] = rnd(rnd(g[f] / (1.0f + std::exp(-g[f]))) * u[f]);
  }
  return out;
}

Tensor mlp(const BlockWeights& w, const Tensor& h, const Rounding& rnd) {
  return rnd(ops::linear(swiglu(rnd(ops::linear(h, w.fc1)), rnd), w.fc2));
}

void modulate_(Tensor& x, const ModRows& shift, const ModRows& scale,
               const std::vector<int64_t>& rows, const Rounding& rnd) {
  const int64_t S = x.size(0), H = x.size(1);
  AVDIT_CHECK(static_cast<int64_t>(rows.size()) == S, "modulate_: {} rows for {} tokens",
              rows.size(), S);
  for (int64_t r = 0; r < S; ++r) {
    float* xr = x.f32() + r * H;
    const float* sh = shift.row(rows[r]);
    const float* sc = scale.row(rows[r]);
    for (int64_t c = 0; c < H; ++c) xr[c] = rnd(rnd(xr[c] * rnd(1.0f + sc[c])) + sh[c]);
  }
}

void gated_residual_(Tensor& x, const ModRows& gate, const Tensor& f,
                     const std::vector<int64_t>& rows, const Rounding& rnd) {
  const int64_t S = x.size(0), H = x.size(1);
  for (int64_t r = 0; r < S; ++r) {
    float* xr = x.f32() + r * H;
    const float* fr = f.f32() + r * H;
    const float* g = gate.row(rows[r]);
    for (int64_t c = 0; c < H; ++c) xr[c] = rnd(xr[c] + rnd(g[c] * fr[c]));
  }
}

}  // namespace avdit::models::h3
