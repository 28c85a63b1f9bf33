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
  int kernel = 0;            // 0: h stored from registers; 1: h staged through smem (grouped.h)
  float* stage_ms = nullptr; // host [3]: gather, gate/up, down ms summed over chunks (synchronises)
};

// Whether this build has the sm90 grouped GEMMs (CUTLASS headers found at configure time).
bool grouped_gemm_built();
// Runs the whole expert stage of `r` on dev's stream (grouped_sm90.cu); BadInput without CUTLASS.
void grouped_run_sm90(Device& dev, const GroupedRun& r);

}  // namespace avdit::cuda::moe
