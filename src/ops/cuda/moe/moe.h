// The MAGI-2 multi-head MoE on the GPU, the stages behind ops/moe.h's CUDA implementation
// (ops/cuda/moe.cpp): router, permutation by (head, expert), the expert kernels and the combine.
// The CPU oracle is ops/cpu/moe.cpp; the tests (tests/gpu/moe_cuda_test.cpp) check each stage here.
#pragma once

#include <cstdint>

#include "backend/cuda/device.h"

namespace avdit::cuda::moe {

struct RouterConfig {
  int64_t heads = 0;       // H_moe (12 in the preview)
  int64_t experts = 0;     // E per head (256)
  int64_t top_k = 0;       // K (6)
  int64_t head_dim = 0;    // D_moe (256): head h reads columns [h*D, (h+1)*D) of the split output
  bool softmax = false;    // score function: softmax over a head's experts; else sigmoid
  bool route_norm = true;  // L1-normalise the K unbiased scores (eps 1e-12) before route_scale
  float route_scale = 1.0f;
  // combine's running sum: 0 as `out` says (below), 1 bf16 after each add, 2 fp32 rounded once
  // (ops::CombineSum, the knob `generate --moe-combine`).
  int combine_sum = 0;
};

// Routing of every (token, head): fp32 logits x_h · gate_h^T, scores, top-K of score + bias (ties:
// the lower expert index wins, as the CPU), weights from the unbiased scores.
struct Routing {
  Tensor indices;  // [T, heads, K] I32, by descending biased score
  Tensor weights;  // [T, heads, K] F32 (route_scale included)
  Tensor logits;   // [T, heads, E] F32, only when keep_logits (dumps); else undefined
  Tensor gap;      // [T, heads] F32, only when keep_gap: K-th minus (K+1)-th biased score
};

// x [T, heads*head_dim] F32 or BF16 on the device; gate [heads*E, head_dim] F32; bias [heads*E]
// F32.
Routing route(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias,
              const RouterConfig& cfg, bool keep_logits = false, bool keep_gap = false);

// Routed expert weights of all heads as the checkpoint stores them ([in, out] matrices), on the
// device: gate, up [heads*E, D, De]; down [heads*E, De, D]; F32 or BF16. The B-operand loader of
// the grouped GEMM reads them through this struct, so NVFP4 experts can replace it later.
struct ExpertWeights {
  Tensor gate, up, down;
  // false: the checkpoint's [in, out] matrices above. true: each matrix transposed, K-major ("w[N,
  // K]", the layout the NVFP4 dequantiser writes and the natural TN operand of the tensor cores):
  // gate, up [heads*E, De, D]; down [heads*E, D, De].
  bool k_major = false;
};

// out [T, heads*D]: for each token t and head h, sum over k of weights[t,h,k] *
// expert_{h, indices[t,h,k]}(x[t, h-th D columns]), expert(v) = swiglu7(v·Wg, v·Wu)·Wd.
// Deterministic, no float atomics, no host synchronisation. Precision follows `out`:
// - F32: fp32 everywhere (the parity mode);
// - BF16: the reference Triton kernel's rounding: swiglu7 of the fp32 gate/up accumulators cast to
//   bf16, the fp32 down accumulator times the weight cast to bf16, summed per (token, head) in
//   ascending expert order with the running sum rounded to bf16 after each add (the CPU bf16
//   mode's fixed order, ops/cpu/moe.cpp routed_experts).
// into: as combine's (the result written into the first heads*D columns of that [T, L] tensor).
Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const ExpertWeights& w,
                      const RouterConfig& cfg, DType out, Tensor* into = nullptr);

// ---- the stages of routed_experts, for the benchmark and for callers that reuse a permutation
// ----

// The (token, head, k) slots, s = (t*heads + h)*K + k, ordered by group g = h*E + expert and,
// within a group, by token (a stable counting sort: deterministic, the CPU's order). Plus the
// row-tile table the grouped GEMM kernels walk (built on the device: no host synchronisation).
struct Permutation {
  Tensor sorted_slot;  // [S] I32: slot of sorted row i
  Tensor slot_pos;     // [S] I32: sorted row of slot s (inverse)
  Tensor offsets;      // [G + 1] I32: rows [offsets[g], offsets[g+1]) belong to group g
  Tensor tile_group;   // [max_tiles] I32: group of row tile j
  Tensor tile_row;     // [max_tiles] I32: first sorted row of tile j
  Tensor tile_count;   // [1] I32: number of valid tiles
  int64_t max_tiles = 0;
  int tile_rows = 0;  // rows per tile
};
// tile_rows 0: no tile table (max_tiles 0, the tile tensors undefined): the grouped path reads only
// sorted_slot and offsets.
Permutation permute(Device& dev, const Routing& routing, const RouterConfig& cfg,
                    int tile_rows = 64);

enum class ExpertPath {
  Auto,  // Grouped where its conditions hold, else Simt
  Simt,  // reference kernels: fp32 SIMT tiles, gate/up+swiglu7 then down (any dtype; the F32 parity
         // path)
  // The Hopper path (grouped.h): the fused experts kernel, or its two-GEMM CUTLASS fallback.
  // Conditions: CUTLASS build, sm_90, BF16 x, weights and out, D and De multiples of 8. Rounding:
  // the BF16 contract above exactly (h = bf16(swiglu7(fp32 gate, fp32 up)), rows = bf16(weight *
  // fp32 down)); only the fp32 summation order inside each GEMM differs (wgmma K order), so it
  // matches the SIMT path within the bf16 tolerance, not bit for bit. Deterministic (no split-K, no
  // atomics).
  Grouped,
};

// Per sorted row i (slot s): weights[s] * expert(x row of s), [S, D] in `out` dtype (BF16: rounded
// as routed_experts describes). perm must come from permute(.., tile_rows = 64).
Tensor expert_rows(Device& dev, const Tensor& x, const Routing& routing, const Permutation& perm,
                   const ExpertWeights& w, const RouterConfig& cfg, DType out,
                   ExpertPath path = ExpertPath::Auto);

// out [T, heads*D]: per (token, head) the sum of its K rows of `rows` in ascending expert order (no
// atomics; BF16: the running sum rounded after each add). With `into` (a [T, L] tensor of dtype
// out, L >= heads*D), written into its columns 0 .. heads*D-1 instead and returned (the MAGI-2
// layer puts the shared expert's h beside it: one merge GEMM over both, ops/moe.h moe_output).
Tensor combine(Device& dev, const Tensor& rows, const Routing& routing, const Permutation& perm,
               const RouterConfig& cfg, DType out, Tensor* into = nullptr);

// routed_experts with an explicit kernel choice.
Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const ExpertWeights& w,
                      const RouterConfig& cfg, DType out, ExpertPath path, Tensor* into = nullptr);

}  // namespace avdit::cuda::moe
