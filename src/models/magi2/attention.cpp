// Attention branch of a MAGI-2 preview layer (see layers.h). The core runs in packed order, so that tokens of
// an item are contiguous for the varlen segments; everything around it runs in modality-sorted order.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "models/magi2/layers.h"
#include "ops/ops.h"

namespace avdit::models::magi2 {
Tensor combined_sinks(const Tensor& sinks_in) {
  const Tensor sinks = sinks_in.to_f32();
  const int64_t S = sinks.size(0), Hq = sinks.size(1);
  const float* v = std::as_const(sinks).f32();  // const: the checkpoint's sinks may be a read-only mapping
  Tensor out = Tensor::empty({Hq}, DType::F32);
  for (int64_t h = 0; h < Hq; ++h) {
    float mx = v[h];
    for (int64_t s = 1; s < S; ++s) mx = std::max(mx, v[s * Hq + h]);
    double acc = 0;
    for (int64_t s = 0; s < S; ++s) acc += std::exp(static_cast<double>(v[s * Hq + h] - mx));
    // S == 1: exactly the sink (mx + log(exp(0)) = mx).
    out.f32()[h] = S == 1 ? v[h] : mx + static_cast<float>(std::log(acc));
  }
  return out;
}

Tensor attention_forward(const AttentionWeights& w, const Magi2Config& c, int64_t groups, const Tensor& attn_in,
                         const TokenLayout& layout, const RopeTables& rope, const std::vector<int64_t>& cu_seqlens,
                         const Rounding& rnd) {
  const int64_t L = attn_in.size(0), hidden = c.hidden_size, Hq = c.num_heads_q, Hkv = c.num_heads_kv,
                D = c.head_dim;
  const int64_t qkv_out = (Hq + 2 * Hkv) * D;
  Tensor q, k, v, g;
  {
    // Per modality group: pre_norm, linear_g, linear_qkv, q_norm / k_norm (weights of that group).
    std::vector<Tensor> gs, qs, ks, vs;
    auto run = [&](int64_t m, const Tensor& rows) {
      const int64_t n = rows.size(0);
      // bf16 mode: pre_norm outputs the stream dtype, linear_g / linear_qkv are bf16 linears; q_norm / k_norm
      // output fp32 (out_dtype=float32 in the reference), so q and k stay fp32 through RoPE until FA3.
      const Tensor a = rnd(ops::rms_norm(rows, w.pre_norm.slice_rows(m * hidden, (m + 1) * hidden), kNormEps, true));
      gs.push_back(rnd(ops::linear(a, w.linear_g.slice_rows(m * Hq, (m + 1) * Hq))));  // [n, Hq]
      const Tensor qkv = rnd(ops::linear(a, w.linear_qkv.slice_rows(m * qkv_out, (m + 1) * qkv_out)));
      // out columns [q (Hq*D) | k (Hkv*D) | v (Hkv*D)], head-major.
      const Tensor qm = take_columns(qkv, 0, Hq * D).reshape({n, Hq, D});
      const Tensor km = take_columns(qkv, Hq * D, (Hq + Hkv) * D).reshape({n, Hkv, D});
      qs.push_back(ops::rms_norm(qm, w.q_norm.slice_rows(m * D, (m + 1) * D), kNormEps, true));
      ks.push_back(ops::rms_norm(km, w.k_norm.slice_rows(m * D, (m + 1) * D), kNormEps, true));
      vs.push_back(take_columns(qkv, (Hq + Hkv) * D, qkv_out).reshape({n, Hkv, D}));
      return Tensor();
    };
    if (groups == 1) {
      run(0, attn_in);
    } else {
      for (int64_t m = 0; m < 3; ++m)
        if (layout.size[m] > 0) run(m, attn_in.slice_rows(layout.begin[m], layout.begin[m] + layout.size[m]));
    }
    auto cat = [](const std::vector<Tensor>& parts) { return parts.size() == 1 ? parts[0] : ops::concat_rows(parts); };
    g = cat(gs);
    q = cat(qs);
    k = cat(ks);
    v = cat(vs);
  }
  // Packed order for RoPE (the table is per packed token) and for the item segments.
  Tensor qp = gather_rows(q, layout.inv);
  Tensor kp = gather_rows(k, layout.inv);
  const Tensor vp = gather_rows(v, layout.inv);
  ops::rope_rotate_half_(qp, rope.cos, rope.sin);
  ops::rope_rotate_half_(kp, rope.cos, rope.sin);
  // bf16 mode: FA3 receives bf16 q/k/v (v is already bf16) and returns bf16.
  qp = rnd(std::move(qp));
  kp = rnd(std::move(kp));
  const Tensor sinks = combined_sinks(w.sinks);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const Tensor o_packed = rnd(ops::attention(qp, kp, vp, scale, cu_seqlens, &sinks));  // [L, Hq, D]
  Tensor o = gather_rows(o_packed, layout.perm);
  // Per-head gate: o * sigmoid(g); in bf16 mode torch.sigmoid of the bf16 g and the product are bf16 tensors.
  float* ov = o.f32();
  const float* gv = g.f32();
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < Hq; ++h) {
      const float s = rnd(1.0f / (1.0f + std::exp(-gv[l * Hq + h])));
      float* row = ov + (l * Hq + h) * D;
      for (int64_t d = 0; d < D; ++d) row[d] = rnd(row[d] * s);
    }
  const Tensor flat = o.reshape({L, Hq * D});
  return apply_grouped(flat, groups, layout, [&](int64_t m, const Tensor& rows) {
    return rnd(ops::linear(rows, w.linear_proj.slice_rows(m * hidden, (m + 1) * hidden)));
  });
}

}  // namespace avdit::models::magi2
