// The multi-head MoE layer of the MAGI-2 preview (see layers.h): split linear, per-head fp32 router, top-k of
// score + expert_bias (ties: the lower expert index wins, a deterministic rule), weights from the unbiased
// scores L1-normalised times route_scale, swiglu7 experts with [in, out] matrices, merge linear, plus the shared
// expert and the modality-specific shared expert.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "models/magi2/layers.h"
#include "ops/ops.h"
#include "quant/nvfp4.h"

namespace avdit::models::magi2 {
namespace {

// Router for all heads: fills logits [L, Hm, E], indices / weights [L, Hm, K].
void route(const MoeWeights& w, const Magi2Config& c, const Tensor& z, MoeOutputs& out) {
  const int64_t L = z.size(0), Hm = c.moe.num_heads, E = c.moe.num_experts, K = c.moe.top_k, Dm = c.moe_head_dim;
  out.router_logits = Tensor::empty({L, Hm, E}, DType::F32);
  out.topk_indices = Tensor::empty({L, Hm, K}, DType::I64);
  out.topk_weights = Tensor::empty({L, Hm, K}, DType::F32);
  float* logits = out.router_logits.f32();
  int64_t* idx = out.topk_indices.data<int64_t>();
  float* wts = out.topk_weights.f32();
  const float* bias = w.expert_bias.f32();
  const bool softmax = c.moe.score_func == "softmax";
  const float route_scale = static_cast<float>(c.moe.route_scale);
  std::vector<float> score(E), biased(E);
  std::vector<int64_t> order(E);
  for (int64_t h = 0; h < Hm; ++h) {
    // logits_h = z_h . gate[h*E + e] in float32.
    const Tensor lh = ops::linear(take_columns(z, h * Dm, (h + 1) * Dm), w.gate.slice_rows(h * E, (h + 1) * E));
    const float* lv = lh.f32();
    for (int64_t l = 0; l < L; ++l) {
      const float* row = lv + l * E;
      std::copy(row, row + E, logits + (l * Hm + h) * E);
      if (softmax) {
        const float mx = *std::max_element(row, row + E);
        float sum = 0;
        for (int64_t e = 0; e < E; ++e) sum += (score[e] = std::exp(row[e] - mx));
        for (int64_t e = 0; e < E; ++e) score[e] /= sum;
      } else {
        for (int64_t e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-row[e]));
      }
      for (int64_t e = 0; e < E; ++e) biased[e] = score[e] + bias[h * E + e];
      std::iota(order.begin(), order.end(), 0);
      // Descending biased score; equal scores: the lower expert index first.
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int64_t a, int64_t b) {
        return biased[a] > biased[b] || (biased[a] == biased[b] && a < b);
      });
      float norm = 0;
      for (int64_t k = 0; k < K; ++k) norm += std::fabs(score[order[k]]);
      const float denom = c.moe.route_norm ? std::max(norm, kRouteNormEps) : 1.0f;
      for (int64_t k = 0; k < K; ++k) {
        idx[(l * Hm + h) * K + k] = order[k];
        const float p = c.moe.route_norm ? score[order[k]] / denom : score[order[k]];
        wts[(l * Hm + h) * K + k] = p * route_scale;
      }
    }
  }
}

// Expert j of one of a head's stacks: the stored matrix, or with NVFP4 experts its bf16 dequantisation,
// made on the fly one expert at a time (the bf16 copy of every expert never exists at once). The values
// are those of fake quantisation (quant::fake_quantize_nvfp4), so the math that follows is the bf16 path's.
Tensor expert_matrix(const Tensor& stored, const std::optional<quant::Nvfp4Matrix>& packed, int64_t j) {
  if (packed) return quant::dequantize_nvfp4(*packed, DType::BF16, j, j + 1).select(0);
  return stored.select(j);
}

// Routed experts of every head this process holds: experts_out [L, W] (heads side by side).
// bf16 mode, as the Triton kernel: swiglu7 of the fp32 gate/up accumulators cast to bf16, the fp32 down
// accumulator times the probability cast to bf16, then added into the bf16 output (atomic adds in the output
// dtype). The atomic order is the GPU's; here it is fixed: per (token, head), ascending expert index (the order of
// the kernel's expert-sorted tiles), the running sum rounded to bf16 after each add.
Tensor run_experts(const MoeWeights& w, const Magi2Config& c, const Tensor& z, const MoeOutputs& r,
                   const Rounding& rnd) {
  const int64_t L = z.size(0), Hm = c.moe.num_heads, K = c.moe.top_k, Dm = c.moe_head_dim, W = z.size(1);
  Tensor out = Tensor::zeros({L, W}, DType::F32);
  float* ov = out.f32();
  const float* zv = z.f32();
  const int64_t* idx = r.topk_indices.data<int64_t>();
  const float* wts = r.topk_weights.f32();
  for (int64_t h = 0; h < Hm; ++h) {
    // Token slots (l, k) per expert, in token order.
    std::vector<std::vector<std::pair<int64_t, float>>> slots(w.expert_end - w.expert_begin);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = idx[(l * Hm + h) * K + k];
        if (e >= w.expert_begin && e < w.expert_end) slots[e - w.expert_begin].emplace_back(l, wts[(l * Hm + h) * K + k]);
      }
    const MoeHeadExperts& hx = w.heads[h];
    for (int64_t j = 0; j < static_cast<int64_t>(slots.size()); ++j) {
      const auto& s = slots[j];
      if (s.empty()) continue;
      const int64_t n = static_cast<int64_t>(s.size());
      Tensor x = Tensor::empty({n, Dm}, DType::F32);
      for (int64_t i = 0; i < n; ++i)
        std::copy(zv + s[i].first * W + h * Dm, zv + s[i].first * W + (h + 1) * Dm, x.f32() + i * Dm);
      const Tensor gate = ops::matmul(x, expert_matrix(hx.W_gate, hx.W_gate_nvfp4, j));  // [n, De]
      const Tensor up = ops::matmul(x, expert_matrix(hx.W_up, hx.W_up_nvfp4, j));
      const Tensor act = swiglu7_split(gate, up, rnd);
      const Tensor y = ops::matmul(act, expert_matrix(hx.W_down, hx.W_down_nvfp4, j));  // [n, Dm]
      const float* yv = y.f32();
      for (int64_t i = 0; i < n; ++i) {
        float* dst = ov + s[i].first * W + h * Dm;
        const float p = s[i].second;
        if (rnd.bf16) {
          for (int64_t d = 0; d < Dm; ++d) dst[d] = rnd(dst[d] + rnd(p * yv[i * Dm + d]));
        } else {
          for (int64_t d = 0; d < Dm; ++d) dst[d] += p * yv[i * Dm + d];
        }
      }
    }
  }
  return out;
}

}  // namespace

MoeOutputs moe_forward(const MoeWeights& w, const Magi2Config& c, const Tensor& mlp_in, const TokenLayout& layout,
                       const Rounding& rnd) {
  const int64_t hidden = c.hidden_size;
  MoeOutputs out;
  // The MoE pre_norm always has the three modality blocks.
  const Tensor xn = apply_grouped(mlp_in, kNumModalities, layout, [&](int64_t m, const Tensor& rows) {
    return rnd(ops::rms_norm(rows, w.pre_norm.slice_rows(m * hidden, (m + 1) * hidden), kNormEps, true));
  });
  // bf16 mode: split/merge and shared-expert weights are bf16 whatever params_dtype says, so their outputs are
  // bf16; the router reads the bf16 split_out in fp32 (x_heads.float() against the fp32 gate).
  out.split_out = rnd(ops::linear(xn, w.split_linear));  // [L, W]
  route(w, c, out.split_out, out);
  out.experts_out = run_experts(w, c, out.split_out, out, rnd);
  out.merge_out = rnd(ops::linear(out.experts_out, w.merge_linear));  // [L, hidden]

  // Shared expert (all tokens) + modality-specific shared expert; fc1 rows interleaved gate/linear.
  const Tensor shared =
      rnd(ops::linear(swiglu7_interleaved(rnd(ops::linear(xn, w.shared_fc1)), rnd), w.shared_fc2));
  const int64_t im2 = 2 * c.moe.modality_specific_expert_intermediate_size;
  const Tensor specific = apply_grouped(xn, kNumModalities, layout, [&](int64_t m, const Tensor& rows) {
    const Tensor u = rnd(ops::linear(rows, w.ms_fc1.slice_rows(m * im2, (m + 1) * im2)));
    return rnd(ops::linear(swiglu7_interleaved(u, rnd), w.ms_fc2.slice_rows(m * hidden, (m + 1) * hidden)));
  });
  out.shared_out = rnd(ops::add(shared, specific));
  out.mlp_out = rnd(ops::add(out.merge_out, out.shared_out));
  return out;
}

}  // namespace avdit::models::magi2
