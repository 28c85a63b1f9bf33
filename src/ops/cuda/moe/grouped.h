// The routed experts on Hopper tensor cores (bf16), on weights packed once per weight set: the
// fused experts kernel (sm90/moe_fused_experts.cu: per 128-row unit of one (head, expert) group,
// gate/up -> swiglu7 -> down with h in registers, the rows gathered from x by the kernel) where it
// applies (head_dim <= 256, expert width > 48), else the documented fallback: a gather, then two
// CUTLASS sm90 grouped GEMMs (sm90/moe_grouped_gemm.cu: gate/up with swiglu7 in the epilogue -> h
// [rows, De] bf16 in memory -> down with the routing weight in the epilogue), one group per (head,
// expert), sizes written on the device from Permutation::offsets (no host synchronisation).
// Rounding: exactly the BF16 contract of moe.h (swiglu7 of the fp32 gate/up accumulators rounded to
// bf16; the fp32 down accumulator times the routing weight rounded to bf16); only the fp32
// summation order inside a GEMM differs from the SIMT path. Deterministic: no split-K, no atomics.
// The fallback's scratch is bounded by processing whole heads at a time (every head owns exactly
// T*K sorted rows, so the chunk boundaries are known on the host).
#pragma once

#include <cstdint>

#include "ops/cuda/moe/moe.h"

namespace avdit::cuda::moe {

// Expert weights in the grouped GEMMs' layout (BF16, K-major "TN" operands), made once per weight
// set.
struct GroupedWeights {
  Tensor
      gate_up;  // [heads*E, 2*De, D]: row 2j = gate output column j, row 2j+1 = up output column j
  Tensor down;  // [heads*E, D, De]
  int64_t inter = 0;  // De
};

// Packs ExpertWeights (either layout, F32 or BF16) into GroupedWeights on the device. K-major BF16
// down weights are shared, not copied. One pass over the weights (a transpose through 32 x 32 smem
// tiles; K-major input is a plain row copy): done at load time, not per call.
GroupedWeights pack_grouped_weights(Device& dev, const ExpertWeights& w, const RouterConfig& cfg);

// Whether the Hopper path can run here: built with CUTLASS, an sm_90 GPU, BF16 x and out, head_dim
// and the expert width multiples of 8 (16-byte TMA rows).
bool grouped_supported(Device& dev, DType x, const RouterConfig& cfg, int64_t inter, DType out);

// Per sorted row i (slot s): weights[s] * expert(x row of s), [S, D] BF16 - what expert_rows
// returns. perm: any permute() output (only sorted_slot and offsets are read). scratch_bytes bounds
// the gathered-A and h buffers (whole heads per chunk; at least one head is always processed).
Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing,
                           const Permutation& perm, const GroupedWeights& w,
                           const RouterConfig& cfg, DType out,
                           int64_t scratch_bytes = int64_t{3} << 30);

// Measurement hooks (benchmarks and tests).
struct GroupedOptions {
  int64_t scratch_bytes = int64_t{3} << 30;  // the fallback's gathered-row and h buffers
  float* stage_ms = nullptr;  // when set (host float[3]): gather, gate/up, down ms summed over the
                              // chunks, from CUDA events (the fused kernel's time on the gate/up
                              // entry); synchronises with the device - benchmarks only
};
Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing,
                           const Permutation& perm, const GroupedWeights& w,
                           const RouterConfig& cfg, DType out, const GroupedOptions& opt);

// The same from ExpertWeights: packs them first (a full weight pass per call; callers that run many
// calls on the same weights should pack once and use the overload above).
Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing,
                           const Permutation& perm, const ExpertWeights& w, const RouterConfig& cfg,
                           DType out);

// routed_experts (moe.h) on packed weights: permute, grouped_expert_rows, combine. The fast path of
// the bf16 model, which packs each layer's experts once (grouped_supported must hold).
Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const GroupedWeights& w,
                      const RouterConfig& cfg, DType out, Tensor* into = nullptr);

}  // namespace avdit::cuda::moe
