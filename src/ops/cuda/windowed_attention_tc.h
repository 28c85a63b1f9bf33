// The tensor-core windowed attention (ops/cuda/sm90/windowed_attention_sm90.cu): bf16 q, k, v with
// head dim 128, one block per (128-query tile of the plan, query head), the tile's key ranges read
// in place. windowed_attention.cu calls it on sm_90 for the shapes it takes and keeps the portable
// kernel for the rest.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/cuda/common.cuh"

namespace avdit::cuda {

inline constexpr int64_t kWindowTcHeadDim = 128;

struct WindowTcArgs {
  const void *q, *k, *v;  // bf16 [S, Hq, 128], [Sk, Hkv, 128] contiguous
  const void* gate;       // [S, Hq] or nullptr
  Elt gatet, yt;          // the gate's dtype; the output's (BF16 or F32)
  void* y;
  float* lse;           // F32 [S, Hq] or nullptr
  const int* segments;  // the plan's table (ops/windowed_attention.h)
  const int* offsets;
  const int* keys;
  const int* tiles;  // [tiles, 2]: segment, first query
  int64_t tiles_n, Hq, Hkv;
  float scale;
};

// Compiled for sm_90a only: the caller checks the device.
void windowed_attention_tc(cudaStream_t st, const WindowTcArgs& a);

}  // namespace avdit::cuda
