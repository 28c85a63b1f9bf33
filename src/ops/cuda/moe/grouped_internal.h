// Between grouped.cu (checks, packing, chunking) and grouped_sm90.cu (the CUTLASS grouped GEMMs):
// not part of the interface.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/device.h"

namespace avdit::cuda::moe {

// One grouped_expert_rows call, all pointers on the device.
struct GroupedRun {
  const __nv_bfloat16* x;   // [T, H*D]
  const int* sorted_slot;   // [S]
  const float* slot_weight; // [S] (routing.weights, flat)
  const int* offsets;       // [H*E + 1]
  const __nv_bfloat16* wgu; // [G, 2*De, D]
  const __nv_bfloat16* wd;  // [G, D, De]
  __nv_bfloat16* rows;      // [S, D] out
  __nv_bfloat16* a_buf;     // [heads_per_chunk*T*K, D] scratch
  __nv_bfloat16* h_buf;     // [heads_per_chunk*T*K, De] scratch
  int64_t T;
  int H, E, K, D, De;
  int heads_per_chunk;
  int kernel = 0;            // GroupedOptions::kernel (grouped.h)
  float* stage_ms = nullptr; // host [3]: gather, gate/up, down ms summed over chunks (synchronises)
};

// Kernel 7's gate/up GEMM (grouped_gateup_sm90.cu) over one chunk of heads, all pointers on the device.
struct GateUpRun {
  const __nv_bfloat16* a;    // gathered rows of the chunk [a_rows, D]
  int64_t a_rows;
  const __nv_bfloat16* wgu;  // every group's packed gate/up weight [w_rows = G * 2 De, D]
  int64_t w_rows;
  const int* offsets;        // Permutation::offsets at the chunk's first group
  int groups;                // groups in the chunk
  int64_t chunk_row0;        // sorted row of the chunk's first row
  int64_t b_row0;            // weight row of the chunk's first group
  int64_t D, De;
  __nv_bfloat16* h;          // [a_rows, De] out
};
// Whether kernel 7's gate/up kernel takes these widths (head_dim <= 256; both multiples of 8).
bool gateup_own_supported(int64_t D, int64_t De);
void gateup_own_sm90(Device& dev, const GateUpRun& r);

// Kernels 9 and 10's fused experts (grouped_fused_sm90.cu) over one chunk of heads, all pointers on
// the device.
struct FusedRun {
  bool gather;               // kernels 10, 20, 21: the kernel reads its rows from x (a unused)
  bool skip = false;         // kernels 20, 21: 10 without the MMAs that no output reads
  bool lead = false;         // kernel 21: 20 with the 32-column chunk first (De % 48 == 32)
  const __nv_bfloat16* x;    // [T, H * D]
  int64_t T;
  int H, K;
  const __nv_bfloat16* a;    // kernel 9: gathered rows of the chunk [a_rows, D]
  int64_t a_rows;            // rows of the chunk
  const __nv_bfloat16* wgu;  // every group's packed gate/up weight [G, 2 De, D]
  const __nv_bfloat16* wd;   // every group's down weight [G, D, De]
  int G;                     // groups in the weights
  const int* offsets;        // Permutation::offsets at the chunk's first group
  int groups;                // groups in the chunk
  int g0;                    // the chunk's first group
  int64_t chunk_row0;        // sorted row of the chunk's first row
  int64_t D, De;
  const int* sorted_slot;    // [S]
  const float* slot_weight;  // [S]
  __nv_bfloat16* rows;       // [S, D] out (global sorted rows)
};
// Whether kernels 9, 10 take these widths (head_dim <= 256, expert width > 48; both multiples of 8).
bool fused_experts_supported(int64_t D, int64_t De);
void fused_experts_sm90(Device& dev, const FusedRun& r);
// Whether GroupedOptions::kernel `kernel` runs the fused experts kernel at these widths: the one
// answer for grouped.cu (no h scratch) and grouped_sm90.cu (which kernel to launch).
inline bool runs_fused(int kernel, int64_t D, int64_t De) {
  return (kernel == 9 || kernel == 10 || kernel == 20 || kernel == 21) &&
         fused_experts_supported(D, De);
}
// Whether it also gathers its rows from x itself (kernels 10, 20, 21): no gather kernel, no row
// scratch.
inline bool gathers_in_kernel(int kernel, int64_t D, int64_t De) {
  return (kernel == 10 || kernel == 20 || kernel == 21) && runs_fused(kernel, D, De);
}

// Whether this build has the sm90 grouped GEMMs (CUTLASS headers found at configure time).
bool grouped_gemm_built();
// Runs the whole expert stage of `r` on dev's stream (grouped_sm90.cu); BadInput without CUTLASS.
void grouped_run_sm90(Device& dev, const GroupedRun& r);

}  // namespace avdit::cuda::moe
