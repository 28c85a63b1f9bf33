// The routed-expert GEMMs as two Hopper grouped GEMMs (CUTLASS 4.2 sm90 ptr-array kernels: TMA loads,
// wgmma, warp-specialised cooperative consumers, persistent group scheduler), one group per
// (head, expert), sizes written on the device from Permutation::offsets (no host synchronisation):
//   1. gather the sorted rows of x into A [rows, D] bf16 (a dense A operand for TMA);
//   2. gate/up: A_g · W_gu[g]^T -> [rows_g, 2 De] in fp32, with swiglu7 in the epilogue: the packed
//      weight interleaves gate and up rows (2j = gate j, 2j+1 = up j), so each accumulator pair that
//      one thread holds is (gate, up) of one column; h = bf16(swiglu7(gate, up)) -> [rows_g, De];
//   3. down: h_g · W_d[g]^T -> [rows_g, D], epilogue bf16(weight[slot] * acc) into rows [S, D].
// Rounding: exactly the BF16 contract of moe.h (swiglu7 of the fp32 gate/up accumulators rounded to
// bf16; the fp32 down accumulator times the routing weight rounded to bf16); only the fp32
// summation order inside a GEMM differs from the other paths. Deterministic: no split-K, no atomics.
// Scratch is bounded by processing whole heads at a time (every head owns exactly T*K sorted rows, so
// the chunk boundaries are known on the host).
#pragma once

#include <cstdint>

#include "ops/cuda/moe/moe.h"

namespace avdit::cuda::moe {

// Expert weights in the grouped GEMMs' layout (BF16, K-major "TN" operands), made once per weight set.
struct GroupedWeights {
  Tensor gate_up;  // [heads*E, 2*De, D]: row 2j = gate output column j, row 2j+1 = up output column j
  Tensor down;     // [heads*E, D, De]
  int64_t inter = 0;  // De
};

// Packs ExpertWeights (either layout, F32 or BF16) into GroupedWeights on the device. K-major BF16
// down weights are shared, not copied. Cost: one pass over the weights (the preview's 12 x 256
// experts from [in, out] bf16: 8.9 ms measured on an H200, a transpose through 32 x 32 smem tiles;
// K-major input is a plain row copy): do it at load time, not per call.
GroupedWeights pack_grouped_weights(Device& dev, const ExpertWeights& w, const RouterConfig& cfg);

// Whether the grouped path can run here: built with CUTLASS, an sm_90 GPU, BF16 x and out, head_dim and
// the expert width multiples of 8 (16-byte TMA rows).
bool grouped_supported(Device& dev, DType x, const RouterConfig& cfg, int64_t inter, DType out);

// Per sorted row i (slot s): weights[s] * expert(x row of s), [S, D] BF16 - what expert_rows returns.
// perm: any permute() output (only sorted_slot and offsets are read). scratch_bytes bounds the
// gathered-A and h buffers (whole heads per chunk; at least one head is always processed).
Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing, const Permutation& perm,
                           const GroupedWeights& w, const RouterConfig& cfg, DType out,
                           int64_t scratch_bytes = int64_t{3} << 30);

// Kernel choice and measurement hooks (benchmarks).
struct GroupedOptions {
  int64_t scratch_bytes = int64_t{3} << 30;
  // The variants (the table at the top of grouped_gemm_sm90.h). 0: cooperative 128 x 256 tiles, the gate/up epilogue stores
  // h from registers (2-byte stores, 8 bytes per row per warp store); 1: it stages the h tile in shared
  // memory and stores 16-byte pieces of whole rows; 2: 1 with the fast swiglu7; 3, 4: 2 on
  // ping-pong consumers (64 x 256, 128 x 128 tiles); 5: 2 with the lean swiglu7 (swiglu7_lean_f);
  // 6: 5 with h stored by bulk asynchronous copies; 7: our own gate/up kernel
  // (grouped_gateup_sm90.cu: B resident per (group, n-tile), two accumulator sets so the swiglu7 and h
  // stores of one tile run beside the next tile's wgmmas) and kernel 6's down GEMM; head_dim > 256
  // falls back to 6. 9: gate/up -> swiglu7 -> down in one kernel with h kept in registers and each
  // warp group's swiglu7 under its own down MMAs (grouped_fused_sm90.cu; no h buffer, so the scratch
  // holds more heads per chunk); head_dim > 256 or an expert width <= 48 falls back to 7. (8, the
  // same with 64-column chunks and every MMA step waited for, was replaced by 9.) 10: 9
  // gathering its rows from x itself (producer warps; a TMA load per row and k-block since session 14,
  // cp.async before): no gather kernel and no scratch at all (2.4 GB at T = 65,536); 20: 10 with
  // the MMAs on padding rows and columns skipped (below). H200,
  // T = 65,536: experts
  // 39.5 / 31.8 / 23.6 ms with 0 / 1 / 2 (gate/up 31.7 / 24.5 / 16.3; session 4), 24.0 / 23.2 with 2 / 5
  // (gate/up 16.2 / 15.4; one call, session 5), 23.8 / 22.3 with 5 / 6 (gate/up 15.9 / 14.5; one call,
  // session 6), 22.1 / 21.9 with 6 / 7 (gate/up 14.25 / 13.54; one call, session 7), 22.0 / 18.4 with
  // 7 / 8 (8's fused kernel 16.9 and the gather 1.7; one call, session 8), 18.1 / 17.5 with 8 / 9
  // (fused kernel 16.3 / 15.8; one call, session 9), 18.3 / 18.1 and 18.8 / 18.5 with 9 / 10 (two
  // calls, session 9; 10 then prefetched its rows into L2, which cost 0.24-0.30 ms and was removed);
  // all pass the same parity tests (8 and 9 gave 7's bits in the tiny models: the same k order in
  // both GEMMs; 10 has 9's arithmetic, its rows only come from elsewhere). Session 13: 9 and 10 build
  // their wgmma descriptors once and address their barriers from one shared base (fused kernel 18.0 ->
  // 16.4 ms in Nsight Compute, the same bits). Session 14: 10's rows by TMA and its epilogue's row
  // bookkeeping from shared memory (fused kernel 16.65 -> 16.40 ms, one call, the same bits).
  // 20 (session 16): 10 without the MMAs no output reads - warp group 1 sits out
  // units of <= 64 rows, and where the last chunk holds <= 32 h columns (De = 1280) its down runs 2
  // of 3 k16 steps; 10's bytes (tested). Nsight Compute (locked 1.36 GHz) 16.38 / 16.39 -> 16.25 /
  // 16.24 ms; at the power cap the expert stage's medians moved by 0-0.4% (one call, session 16).
  // 21 (default since session 16): 20 with the 32-column chunk first where De % 48 == 32 (its
  // gate/up as n64 wgmmas outside the chunk loop; a third of one chunk's gate/up MMAs fewer; other
  // widths run as 20), 10's bytes too (tested). Nsight Compute 20 / 21: 16.21 / 16.10, 16.20 / 15.98
  // ms (one call, session 16). Session 17, at the power cap: experts 15.58-16.10 ms, routed core
  // 17.78-18.25 (two machines); locked clocks 16.04-16.14. (A kernel 22 with the combine inside this
  // launch was no faster - break-even at the power cap, slower at locked clocks - and was not kept:
  // bench/NOTES.md session 17.)
  int kernel = 21;
  float* stage_ms = nullptr;  // when set (host float[3]): gather, gate/up, down ms summed over the chunks,
                              // from CUDA events; synchronises with the device - benchmarks only
};
Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing, const Permutation& perm,
                           const GroupedWeights& w, const RouterConfig& cfg, DType out, const GroupedOptions& opt);

// The same from ExpertWeights: packs them first (a full weight pass per call; callers that run many
// calls on the same weights should pack once and use the overload above).
Tensor grouped_expert_rows(Device& dev, const Tensor& x, const Routing& routing, const Permutation& perm,
                           const ExpertWeights& w, const RouterConfig& cfg, DType out);

// routed_experts (moe.h) on packed weights: permute, grouped_expert_rows, combine. The fast path of
// the bf16 model, which packs each layer's experts once (grouped_supported must hold).
Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const GroupedWeights& w,
                      const RouterConfig& cfg, DType out, Tensor* into = nullptr);

}  // namespace avdit::cuda::moe
