// The MoE ops on the CPU (see ops/moe.h), the float32 oracle: per-head fp32 router, one expert MLP
// at a time on the tokens that chose it (NVFP4 experts dequantised one expert at a time), the fixed
// summation order of the bf16 contract, and the output linears as separate bf16 tensors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "ops/activation.h"
#include "ops/cpu/common.h"
#include "ops/linear.h"
#include "ops/moe.h"
#include "ops/rows.h"
#include "quant/nvfp4_activations.h"

namespace avdit::ops::cpu {
namespace {

constexpr float kRouteNormEps = 1e-12f;  // F.normalize's eps of the router weights

// Columns [begin, end) of a 2-D tensor, as a new tensor of `dtype`.
Tensor columns(const Tensor& x, int64_t begin, int64_t end, DType dtype) {
  Tensor y = Tensor::empty({x.size(0), end - begin}, dtype);
  copy_columns(x, begin, y, 0, end - begin);
  return y;
}

// Head h's matrix j (an expert index within the held range) of one stack: the stored matrix, or the
// bf16 dequantisation of its NVFP4 packing (the values of fake quantisation). Stacks hold one entry
// per head, or one entry with every head's rows.
Tensor expert_matrix(const std::vector<Tensor>& plain,
                     const std::vector<quant::Nvfp4Matrix>& packed, int64_t h, int64_t j,
                     int64_t per_head) {
  if (!packed.empty()) {
    const bool stacked = packed.size() == 1;
    const int64_t g = stacked ? h * per_head + j : j;
    return quant::dequantize_nvfp4(packed[stacked ? 0 : h], DType::BF16, g, g + 1).select(0);
  }
  const bool stacked = plain.size() == 1;
  return plain[stacked ? 0 : h].select(stacked ? h * per_head + j : j);
}

Tensor matmul_f32(const Tensor& a, const Tensor& b) {
  Tensor c = Tensor::empty({a.size(0), b.size(1)}, DType::F32);
  matmul(a, b, c);
  return c;
}

}  // namespace

Routing route(const Tensor& x_in, const Tensor& gate, const Tensor& bias_in, const MoeConfig& c,
              bool keep_logits, bool keep_gap) {
  const int64_t Hm = c.heads, E = c.experts, K = c.top_k, Dm = c.head_dim;
  AVDIT_CHECK(x_in.ndim() == 2 && x_in.size(1) == Hm * Dm, "moe route: x {} for {} heads of {}",
              x_in.shape_str(), Hm, Dm);
  AVDIT_CHECK(
      gate.ndim() == 2 && gate.size(0) == Hm * E && gate.size(1) == Dm && bias_in.numel() == Hm * E,
      "moe route: gate {} bias {} for {} heads x {} experts of {}", gate.shape_str(),
      bias_in.shape_str(), Hm, E, Dm);
  AVDIT_CHECK(K >= 1 && K <= E, "moe route: top_k {} of {} experts", K, E);
  const int64_t L = x_in.size(0);
  Routing r;
  r.indices = Tensor::empty({L, Hm, K}, DType::I32);
  r.weights = Tensor::empty({L, Hm, K}, DType::F32);
  if (keep_logits) r.logits = Tensor::empty({L, Hm, E}, DType::F32);
  if (keep_gap) r.gap = Tensor::empty({L, Hm}, DType::F32);
  int32_t* idx = r.indices.data<int32_t>();
  float* wts = r.weights.f32();
  const Tensor bias_t = f32(bias_in);
  const float* bias = bias_t.f32();
  const float route_scale = c.route_scale;
  std::vector<float> score(E), biased(E);
  std::vector<int64_t> order(E);
  for (int64_t h = 0; h < Hm; ++h) {
    // logits_h = x_h . gate[h E + e] in float32.
    const Tensor xh = columns(x_in, h * Dm, (h + 1) * Dm, DType::F32);
    Tensor lh = Tensor::empty({L, E}, DType::F32);
    linear(xh, gate.slice_rows(h * E, (h + 1) * E), nullptr, nullptr, lh);
    const float* lv = lh.f32();
    for (int64_t l = 0; l < L; ++l) {
      const float* row = lv + l * E;
      if (keep_logits) std::copy(row, row + E, r.logits.f32() + (l * Hm + h) * E);
      if (c.softmax) {
        const float mx = *std::max_element(row, row + E);
        float sum = 0;
        for (int64_t e = 0; e < E; ++e) sum += (score[e] = std::exp(row[e] - mx));
        for (int64_t e = 0; e < E; ++e) score[e] /= sum;
      } else {
        for (int64_t e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-row[e]));
      }
      for (int64_t e = 0; e < E; ++e) biased[e] = score[e] + bias[h * E + e];
      std::iota(order.begin(), order.end(), 0);
      // Descending biased score; equal scores: the lower expert index first. The gap needs the
      // (K+1)-th too.
      const int64_t sorted = keep_gap ? std::min(K + 1, E) : K;
      std::partial_sort(order.begin(), order.begin() + sorted, order.end(),
                        [&](int64_t a, int64_t b) {
                          return biased[a] > biased[b] || (biased[a] == biased[b] && a < b);
                        });
      if (keep_gap)
        r.gap.f32()[l * Hm + h] = K < E ? biased[order[K - 1]] - biased[order[K]]
                                        : std::numeric_limits<float>::infinity();
      float norm = 0;
      for (int64_t k = 0; k < K; ++k) norm += std::fabs(score[order[k]]);
      const float denom = c.route_norm ? std::max(norm, kRouteNormEps) : 1.0f;
      for (int64_t k = 0; k < K; ++k) {
        idx[(l * Hm + h) * K + k] = static_cast<int32_t>(order[k]);
        const float p = c.route_norm ? score[order[k]] / denom : score[order[k]];
        wts[(l * Hm + h) * K + k] = p * route_scale;
      }
    }
  }
  return r;
}

void routed_experts(const Tensor& x_in, const Routing& r, const ExpertWeights& w,
                    const MoeConfig& c, Tensor& out) {
  const int64_t Hm = c.heads, K = c.top_k, Dm = c.head_dim, W = Hm * Dm;
  AVDIT_CHECK(x_in.ndim() == 2 && x_in.size(1) == W, "moe experts: x {} for {} heads of {}",
              x_in.shape_str(), Hm, Dm);
  const int64_t L = x_in.size(0);
  AVDIT_CHECK(r.indices.numel() == L * Hm * K && r.weights.numel() == L * Hm * K,
              "moe experts: routing {} for {} tokens x {} heads x {}", r.indices.shape_str(), L, Hm,
              K);
  AVDIT_CHECK(out.ndim() == 2 && out.size(0) == L && out.size(1) >= W,
              "moe experts: out {} for [{}, >= {}]", out.shape_str(), L, W);
  AVDIT_CHECK(!w.device, "moe experts: weights prepared for the GPU reached the CPU");
  const DType act = out.dtype();
  // The running sum's rounding (ops/moe.h CombineSum); the rows keep the activation's rounding.
  const DType sum_dtype = c.combine == CombineSum::Bf16  ? DType::BF16
                          : c.combine == CombineSum::F32 ? DType::F32
                                                         : act;
  const Tensor wt = f32(r.weights);
  const float* wts = wt.f32();
  const int64_t held = w.end - w.begin;
  // Token slots (l, k) per head and expert, in token order.
  std::vector<std::vector<std::vector<std::pair<int64_t, float>>>> slots(
      Hm, std::vector<std::vector<std::pair<int64_t, float>>>(held));
  for (int64_t h = 0; h < Hm; ++h)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = index_at(r.indices, (l * Hm + h) * K + k);
        if (e >= w.begin && e < w.end)
          slots[h][e - w.begin].emplace_back(l, wts[(l * Hm + h) * K + k]);
      }
  Tensor x = f32(x_in);
  if (c.nvfp4_inputs) {  // NVFP4 GEMM inputs: x with its own per-tensor scale
    x = x.clone();
    quant::fake_quantize_nvfp4_rows(x.f32(), L, W, quant::nvfp4_tensor_scale(x.f32(), L * W));
    for (int64_t i = 0; i < L * W; ++i) x.f32()[i] = round_to(act, x.f32()[i]);
  }
  const float* zv = x.f32();
  // Expert j of head h on its tokens: h = swiglu7(xs Wg, xs Wu) in fp32, rounded to the activation
  // dtype ([n, De]).
  auto hidden = [&](int64_t h, int64_t j) {
    const auto& s = slots[h][j];
    const int64_t n = static_cast<int64_t>(s.size());
    Tensor xs = Tensor::empty({n, Dm}, DType::F32);
    for (int64_t i = 0; i < n; ++i)
      std::copy(zv + s[i].first * W + h * Dm, zv + s[i].first * W + (h + 1) * Dm,
                xs.f32() + i * Dm);
    const Tensor gate = matmul_f32(xs, expert_matrix(w.gate, w.gate_q, h, j, held));  // [n, De]
    const Tensor up = matmul_f32(xs, expert_matrix(w.up, w.up_q, h, j, held));
    Tensor h_act = Tensor::empty(gate.shape(), act);
    gated(Gated::Swiglu7Split, gate, &up, h_act, 0);
    return h_act;
  };
  // NVFP4 inputs of the down GEMM: one scale for the hidden activations of every expert (the
  // grouped GEMM's A operand), so a first pass finds their amax.
  float h_scale = 0;
  if (c.nvfp4_inputs) {
    float amax = 0;
    for (int64_t h = 0; h < Hm; ++h)
      for (int64_t j = 0; j < held; ++j)
        if (!slots[h][j].empty()) {
          const Tensor t = hidden(h, j).to(DType::F32);
          for (int64_t i = 0; i < t.numel(); ++i) amax = std::max(amax, std::fabs(t.f32()[i]));
        }
    h_scale = quant::nvfp4_global_scale(amax);
  }
  std::vector<float> acc(static_cast<size_t>(L * W), 0.f);
  for (int64_t h = 0; h < Hm; ++h)
    for (int64_t j = 0; j < held; ++j) {
      const auto& s = slots[h][j];
      if (s.empty()) continue;
      const int64_t n = static_cast<int64_t>(s.size());
      Tensor h_act = hidden(h, j);
      if (c.nvfp4_inputs) {
        Tensor q = h_act.to(DType::F32);
        quant::fake_quantize_nvfp4_rows(q.f32(), n, q.size(1), h_scale);
        h_act = q.to(act);
      }
      const Tensor y = matmul_f32(h_act, expert_matrix(w.down, w.down_q, h, j, held));  // [n, Dm]
      const float* yv = y.f32();
      for (int64_t i = 0; i < n; ++i) {
        float* dst = acc.data() + s[i].first * W + h * Dm;
        const float p = s[i].second;
        for (int64_t d = 0; d < Dm; ++d)
          dst[d] = round_to(sum_dtype, dst[d] + round_to(act, p * yv[i * Dm + d]));
      }
    }
  const Tensor result = Tensor::from_data({L, W}, DType::F32, acc.data());
  copy_columns(result, 0, out, 0, W);
}

void moe_output(const Tensor& cat, const Tensor& specific, const MoeOutputWeights& w, Tensor& out,
                Tensor* merge_out, Tensor* shared_out) {
  const int64_t W = w.width, T = cat.size(0);
  AVDIT_CHECK(w.merge.defined() && w.shared_fc2.defined(),
              "moe output: the CPU needs merge and shared_fc2 as stored");
  const int64_t Is = w.shared_fc2.size(1), hidden = w.merge.size(0);
  AVDIT_CHECK(cat.ndim() == 2 && cat.size(1) == W + Is && specific.numel() == T * hidden &&
                  out.numel() == T * hidden,
              "moe output: cat {} specific {} out {} for widths {} + {} -> {}", cat.shape_str(),
              specific.shape_str(), out.shape_str(), W, Is, hidden);
  const DType act = out.dtype();
  Tensor merged = Tensor::empty({T, hidden}, act), shared = Tensor::empty({T, hidden}, act);
  linear(columns(cat, 0, W, cat.dtype()), w.merge, nullptr, nullptr, merged);
  linear(columns(cat, W, W + Is, cat.dtype()), w.shared_fc2, nullptr, nullptr, shared);
  Tensor shared_sum = Tensor::empty({T, hidden}, act);
  binary(Binary::Add, shared, specific, shared_sum);
  binary(Binary::Add, merged, shared_sum, out);
  if (merge_out) copy_(*merge_out, merged);
  if (shared_out) copy_(*shared_out, shared_sum);
}

}  // namespace avdit::ops::cpu
