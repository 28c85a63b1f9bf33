// The windowed attention kernels' arguments, and the Hopper kernel
// (ops/cuda/sm90/windowed_attention_sm90.cu: TMA and wgmma in FlashAttention-3's arrangement):
// bf16 q, k, v with head dim 128, one block per (128-query tile of the plan, query head), the
// tile's key ranges read in place.
// windowed_attention.cu calls it on sm_90 for the shapes it takes and keeps the portable kernel
// for the rest.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/cuda/common.cuh"

namespace avdit::cuda {

inline constexpr int64_t kWindowTcHeadDim = 128;

// The device the Hopper kernel is built for (sm_90a: Hopper only, not its successors).
inline bool windowed_attention_tc_device(const cudaDeviceProp& props) {
  return props.major == 9 && props.minor == 0;
}

// What both windowed kernels read: q, k, v [S, Hq, D], [Sk, Hkv, D]; the gate [S, Hq] or null;
// the plan's table (ops/windowed_attention.h); y [S, Hq, D]; lse F32 [S, Hq] or null.
struct WindowArgs {
  const void *q, *k, *v, *gate;
  const float* sinks;  // F32 [Hq] natural-log sink logits in the denominator, or null (the
                       // Hopper kernel only: ops::attention's Own plan; windows have none)
  Elt qt, kt, vt, gatet, yt;
  const int* segments;  // [n_seg, 2] begin, end (ascending, disjoint)
  const int* offsets;   // [n_seg + 1] into keys
  const int* keys;      // [*, 2] begin, end
  const int* tiles;     // [n_tiles, 2] segment, first query (the tensor-core kernel's blocks)
  int64_t n_seg, n_tiles;
  int64_t S, Sk, Hq, Hkv, D;
  float scale;
  void* y;
  float* lse;  // nullptr: not wanted
};

// Whether the Hopper kernel takes these operands on this device: sm_90, bf16 q, k, v with D =
// kWindowTcHeadDim, 16-byte aligned (TMA), y BF16 or F32, row counts that fit int, tiles and heads
// that fit one launch. The one test of both callers (the windowed op, ops::attention's Own plan).
bool windowed_attention_tc_takes(const WindowArgs& a, const cudaDeviceProp& props);

// Compiled for sm_90a only: the caller checks windowed_attention_tc_takes.
void windowed_attention_tc(cudaStream_t st, const WindowArgs& a);

}  // namespace avdit::cuda
