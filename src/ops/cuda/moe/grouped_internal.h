// Between grouped.cu (checks, packing, chunking) and the Hopper code under ops/cuda/sm90/ (the
// fused experts kernel and the CUTLASS grouped GEMMs): not part of the interface.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/device.h"

namespace avdit::cuda::moe {

// One grouped_expert_rows call, all pointers on the device.
struct GroupedRun {
  const __nv_bfloat16* x;    // [T, H*D]
  const int* sorted_slot;    // [S]
  const float* slot_weight;  // [S] (routing.weights, flat)
  const int* offsets;        // [H*E + 1]
  const __nv_bfloat16* wgu;  // [G, 2*De, D]
  const __nv_bfloat16* wd;   // [G, D, De]
  __nv_bfloat16* rows;       // [S, D] out
  __nv_bfloat16* a_buf;      // [heads_per_chunk*T*K, D] scratch (the two-GEMM fallback only)
  __nv_bfloat16* h_buf;      // [heads_per_chunk*T*K, De] scratch (the two-GEMM fallback only)
  int64_t T;
  int H, E, K, D, De;
  int heads_per_chunk;
  float* stage_ms =
      nullptr;  // host [3]: gather, gate/up, down ms summed over chunks (synchronises)
};

// The fused experts kernel (sm90/moe_fused_experts.cu) over every head, all pointers on the device.
struct FusedRun {
  const __nv_bfloat16* x;  // [T, H * D]: the kernel gathers its rows from it
  int64_t T;
  int H, K;
  int64_t a_rows;            // sorted rows of the run
  const __nv_bfloat16* wgu;  // every group's packed gate/up weight [G, 2 De, D]
  const __nv_bfloat16* wd;   // every group's down weight [G, D, De]
  int G;                     // groups in the weights
  const int* offsets;        // Permutation::offsets at the run's first group
  int groups;                // groups in the run
  int g0;                    // the run's first group
  int64_t chunk_row0;        // sorted row of the run's first row
  int64_t D, De;
  const int* sorted_slot;    // [S]
  const float* slot_weight;  // [S]
  __nv_bfloat16* rows;       // [S, D] out (global sorted rows)
};
// Whether the fused experts kernel takes these widths (head_dim <= 256, expert width > 48; both
// multiples of 8); elsewhere the two-GEMM fallback runs.
bool fused_experts_supported(int64_t D, int64_t De);
void fused_experts_sm90(Device& dev, const FusedRun& r);

// Whether this build has the sm90 kernels (CUTLASS headers found at configure time).
bool grouped_gemm_built();
// Runs the whole expert stage of `r` on dev's stream (sm90/moe_grouped_gemm.cu); BadInput without
// CUTLASS.
void grouped_run_sm90(Device& dev, const GroupedRun& r);

}  // namespace avdit::cuda::moe
