// The MoE ops on the GPU (see ops/moe.h): the expert weights prepared once (moe_experts.h), and
// each op's calls into the MoE stages (ops/cuda/moe/): router, routed experts on the path the
// weights were prepared for, and the output as one GEMM.
#include <memory>

#include "backend/cuda/context.h"
#include "ops/cuda/moe/grouped.h"
#include "ops/cuda/moe/moe.h"
#include "ops/cuda/moe_experts.h"
#include "ops/cuda/nvfp4_dequant.h"
#include "ops/linear.h"
#include "ops/moe.h"
#include "ops/rows.h"

namespace avdit::ops::cuda {
namespace {

namespace moe = ::avdit::cuda::moe;

moe::RouterConfig router_config(const MoeConfig& c) {
  return moe::RouterConfig{c.heads,      c.experts,     c.top_k,
                           c.head_dim,   c.softmax,     c.route_norm,
                           c.route_scale, static_cast<int>(c.combine)};
}

// Per-head parts [n, ...] (or one part with every head's rows) stacked into one [H n, ...] tensor
// of `dtype` on the context.
Tensor stack(CudaContext& c, const std::vector<Tensor>& parts, DType dtype) {
  AVDIT_CHECK(!parts.empty(), "moe experts: no parts");
  if (parts.size() == 1) return ops::cast(c, c.upload(parts[0]), dtype);
  Shape shape = parts[0].shape();
  const int64_t per = shape[0];
  shape[0] = per * static_cast<int64_t>(parts.size());
  Tensor d = c.empty(shape, dtype);
  for (size_t h = 0; h < parts.size(); ++h) {
    AVDIT_CHECK(parts[h].shape() == parts[0].shape(), "moe experts: parts of shapes {} and {}",
                parts[h].shape_str(), parts[0].shape_str());
    Tensor dst = d.slice_rows(static_cast<int64_t>(h) * per, static_cast<int64_t>(h + 1) * per);
    ops::copy_(c, dst, c.upload(parts[h].dtype() == dtype ? parts[h] : parts[h].to(dtype)));
  }
  return d;
}

}  // namespace

Routing route(CudaContext& c, const Tensor& x, const Tensor& gate, const Tensor& bias,
              const MoeConfig& cfg, bool keep_logits, bool keep_gap) {
  const moe::Routing r =
      moe::route(c.dev(), x, gate, bias, router_config(cfg), keep_logits, keep_gap);
  return Routing{r.indices, r.weights, r.logits, r.gap};
}

ExpertWeights prepare_experts(CudaContext& c, ExpertWeights w, const MoeConfig& cfg, DType act) {
  AVDIT_REQUIRE(
      w.begin == 0 && w.end == cfg.experts,
      "moe experts: the GPU holds every expert of every head; experts [{}, {}) of {} were loaded",
      w.begin, w.end, cfg.experts);
  auto store = std::make_shared<ExpertStore>();
  store->act = act;
  const moe::RouterConfig rc = router_config(cfg);
  int64_t bytes = 0;
  if (w.nvfp4()) {
    // Packed experts stay packed: the per-head parts are stacked as they are (bytes unchanged).
    const std::vector<quant::Nvfp4Matrix>* parts[3] = {&w.gate_q, &w.up_q, &w.down_q};
    for (int m = 0; m < 3; ++m) {
      std::vector<Tensor> values, scales, globals;
      for (const quant::Nvfp4Matrix& q : *parts[m]) {
        values.push_back(q.values);
        scales.push_back(q.block_scales);
        globals.push_back(q.global_scales);
      }
      store->nvfp4[m] =
          ExpertStore::Packed{stack(c, values, DType::U8), stack(c, scales, DType::F8_E4M3),
                              stack(c, globals, DType::F32)};
      bytes += store->nvfp4[m]->values.nbytes() + store->nvfp4[m]->block_scales.nbytes() +
               store->nvfp4[m]->global_scales.nbytes();
    }
  } else {
    moe::ExpertWeights plain;
    plain.gate = stack(c, w.gate, act);
    plain.up = stack(c, w.up, act);
    plain.down = stack(c, w.down, act);
    if (moe::grouped_supported(c.dev(), act, rc, w.inter, act)) {
      // Packed once for the Hopper kernels; the unpacked copy is released (one resident copy).
      store->grouped = moe::pack_grouped_weights(c.dev(), plain, rc);
      bytes = store->grouped->gate_up.nbytes() + store->grouped->down.nbytes();
    } else {
      store->plain = plain;
      bytes = plain.gate.nbytes() + plain.up.nbytes() + plain.down.nbytes();
    }
  }
  ExpertWeights out;
  out.inter = w.inter;
  out.begin = w.begin;
  out.end = w.end;
  out.device = std::move(store);
  out.bytes = bytes;
  return out;
}

void routed_experts(CudaContext& c, const Tensor& x, const Routing& r, const ExpertWeights& w,
                    const MoeConfig& cfg, Tensor& out) {
  AVDIT_CHECK(
      w.device,
      "moe experts: weights not prepared for the GPU (ops::prepare_experts on this context)");
  // The fused Hopper kernels keep the hidden activations on chip: no place to quantise them yet.
  AVDIT_REQUIRE(!cfg.nvfp4_inputs,
                "--nvfp4-expert-inputs (NVFP4 expert GEMM inputs) runs on the CPU only for now");
  const ExpertStore& s = *w.device;
  ::avdit::cuda::Device& dev = c.dev();
  const moe::RouterConfig rc = router_config(cfg);
  const moe::Routing routing{r.indices, r.weights, r.logits};
  const DType od = out.dtype();
  const int64_t G = cfg.heads * cfg.experts, D = cfg.head_dim, De = w.inter;
  AVDIT_CHECK(out.ndim() == 2 && out.size(0) == x.size(0) && out.size(1) >= cfg.heads * D,
              "moe experts: out {} for [{}, >= {}]", out.shape_str(), x.size(0), cfg.heads * D);
  if (s.grouped) {
    moe::routed_experts(dev, x, routing, *s.grouped, rc, od, &out);
    return;
  }
  if (!s.nvfp4[0]) {
    moe::routed_experts(dev, x, routing, s.plain, rc, od, moe::ExpertPath::Simt, &out);
    return;
  }
  // NVFP4: dequantised per call into scratch from the stream-ordered pool (released when this
  // call's work is enqueued, so every MoE layer reuses the same blocks without a driver call).
  const ExpertStore::Packed* p[3] = {&*s.nvfp4[0], &*s.nvfp4[1], &*s.nvfp4[2]};
  if (moe::grouped_supported(dev, x.dtype(), rc, De, od)) {
    // Gate into the even rows and up into the odd rows of one [G, 2 De, D] tensor (the Hopper
    // kernels' interleaved layout, no extra pass), down as [G, D, De].
    moe::GroupedWeights g;
    g.gate_up = c.empty({G, 2 * De, D}, DType::BF16);
    g.down = c.empty({G, D, De}, DType::BF16);
    g.inter = De;
    for (int m = 0; m < 2; ++m)
      ::avdit::cuda::dequantize_nvfp4_bf16(dev, p[m]->values, p[m]->block_scales,
                                           p[m]->global_scales, 0, G, g.gate_up, 2, m);
    ::avdit::cuda::dequantize_nvfp4_bf16(dev, p[2]->values, p[2]->block_scales, p[2]->global_scales,
                                         0, G, g.down);
    moe::routed_experts(dev, x, routing, g, rc, od, &out);
    return;
  }
  // The SIMT kernels on the K-major bf16 values (widened for the fp32 mode, as the CPU widens
  // them).
  moe::ExpertWeights ew;
  ew.k_major = true;
  Tensor* parts[3] = {&ew.gate, &ew.up, &ew.down};
  for (int m = 0; m < 3; ++m) {
    const Tensor& v = p[m]->values;  // [G, N, K/2]
    Tensor b = c.empty({v.size(0), v.size(1), v.size(2) * 2}, DType::BF16);
    ::avdit::cuda::dequantize_nvfp4_bf16(dev, v, p[m]->block_scales, p[m]->global_scales, 0,
                                         v.size(0), b);
    *parts[m] = od == DType::BF16 ? b : ops::cast(c, b, DType::F32);
  }
  moe::routed_experts(dev, x, routing, ew, rc, od, moe::ExpertPath::Simt, &out);
}

MoeOutputWeights prepare_moe_output(CudaContext& c, const Tensor& merge, const Tensor& shared_fc2,
                                    DType act) {
  MoeOutputWeights w;
  w.width = merge.size(1);
  w.merge_shared = ops::concat_columns(c, ops::cast(c, c.upload(merge), act),
                                       ops::cast(c, c.upload(shared_fc2), act));
  w.bytes = w.merge_shared.nbytes();
  return w;
}

void moe_output(CudaContext& c, const Tensor& cat, const Tensor& specific,
                const MoeOutputWeights& w, Tensor& out, Tensor* merge_out, Tensor* shared_out) {
  AVDIT_CHECK(w.merge_shared.defined(),
              "moe output: weights not prepared for the GPU (ops::prepare_moe_output)");
  // The three outputs summed by the GEMM itself: [experts | shared h] . [merge | shared_fc2]^T with
  // the modality-specific experts' output as the C operand (one rounding).
  linear(c, cat, w.merge_shared, nullptr, &specific, out);
  if (!merge_out && !shared_out) return;
  const int64_t W = w.width, Is = w.merge_shared.size(1) - W;
  if (merge_out)
    linear(c, ops::take_columns(c, cat, 0, W), ops::take_columns(c, w.merge_shared, 0, W), nullptr,
           nullptr, *merge_out);
  if (shared_out)
    linear(c, ops::take_columns(c, cat, W, W + Is), ops::take_columns(c, w.merge_shared, W, W + Is),
           nullptr, &specific, *shared_out);
}

}  // namespace avdit::ops::cuda
