// The MAGI-2 multi-head MoE on the GPU: router, permutation by (head, expert), the grouped expert
// GEMMs and the combine. The CPU oracle is src/models/magi2/moe.cpp (route, run_experts); this
// interface is what the GPU model calls and what `avdit bench moe` times.
#pragma once

#include <cstdint>

#include "backend/cuda/device.h"

namespace avdit::cuda::moe {

struct RouterConfig {
  int64_t heads = 0;     // H_moe (12 in the preview)
  int64_t experts = 0;   // E per head (256)
  int64_t top_k = 0;     // K (6)
  int64_t head_dim = 0;  // D_moe (256): head h reads columns [h*D, (h+1)*D) of the split output
  bool softmax = false;  // score function: softmax over a head's experts; else sigmoid
  bool route_norm = true;  // L1-normalise the K unbiased scores (eps 1e-12) before route_scale
  float route_scale = 1.0f;
};

// Routing of every (token, head): fp32 logits x_h · gate_h^T, scores, top-K of score + bias (ties:
// the lower expert index wins, as the CPU), weights from the unbiased scores.
struct Routing {
  Tensor indices;  // [T, heads, K] I32, by descending biased score
  Tensor weights;  // [T, heads, K] F32 (route_scale included)
  Tensor logits;   // [T, heads, E] F32, only when keep_logits (dumps); else undefined
};

// x [T, heads*head_dim] F32 or BF16 on the device; gate [heads*E, head_dim] F32; bias [heads*E] F32.
Routing route(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias, const RouterConfig& cfg,
              bool keep_logits = false);

// Routed expert weights of all heads as the checkpoint stores them ([in, out] matrices), on the
// device: gate, up [heads*E, D, De]; down [heads*E, De, D]; F32 or BF16. The B-operand loader of the
// grouped GEMM reads them through this struct, so NVFP4 experts can replace it later.
struct ExpertWeights {
  Tensor gate, up, down;
};

// out [T, heads*D]: for each token t and head h, sum over k of weights[t,h,k] *
// expert_{h, indices[t,h,k]}(x[t, h-th D columns]), expert(v) = swiglu7(v·Wg, v·Wu)·Wd.
// Deterministic, no float atomics, no host synchronisation. Precision follows `out`:
// - F32: fp32 everywhere (the parity mode);
// - BF16: the reference Triton kernel's rounding: swiglu7 of the fp32 gate/up accumulators cast to
//   bf16, the fp32 down accumulator times the weight cast to bf16, summed per (token, head) in
//   ascending expert order with the running sum rounded to bf16 after each add (the CPU bf16
//   mode's fixed order, moe.cpp run_experts).
Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const ExpertWeights& w,
                      const RouterConfig& cfg, DType out);

}  // namespace avdit::cuda::moe
