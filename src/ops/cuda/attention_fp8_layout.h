// The layout the FP8 attention's kernels share (ops/attention_fp8.h): every document's rows cut
// into 128-row blocks from its first row and laid end to end ("padded rows": a document of n rows
// takes ceil(n / 128) blocks, the rows past n zero codes), so each block's codes start on a tile of
// the Hopper kernel and each has its own scale. The quantize pass (attention_fp8.cu) writes:
//   q8 [Lp, Hq, D], k8 [Lp, Hkv, D], e4m3 codes, Lp = 128 x blocks;
//   v: per kv head, either v8 [Lp, Hkv, D] (the portable kernel) or, for the Hopper kernel (D =
//     128), v^T [Hkv, 128, Lp] with the keys of each 32-key group permuted (vt_key below), because
//     FP8 wgmma takes only K-major operands and so that S's accumulator registers are P's A
//     fragment as they lie;
//   the scales s = a / 448: qs [Hq, blocks], ks [Hkv, blocks], vs [Hkv].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/common.cuh"

namespace avdit::cuda {

inline constexpr int kFp8Block = 128;

// One 128-row block: its first row in the packed sequence, its live rows (1 .. 128), the first
// block of its document and the document's block count.
struct Fp8Block {
  int row0, live, doc_block0, doc_blocks;
};

// The key at logical position p of a 32-key group of v^T: logical k position 4t + j of a thread's
// m16n8k32 A fragment holds key 2t + (j & 1) + 8 (j >> 1) of S's accumulator, +16 for the second
// half.
__host__ __device__ __forceinline__ int fp8_vt_key(int p) {
  const int j = p & 3, t = (p >> 2) & 3;
  return 16 * (p >> 4) + 2 * t + (j & 1) + 8 * (j >> 1);
}

struct Fp8AttentionArgs {
  const uint8_t *q8, *k8, *v8;  // v8: v^T for the Hopper kernel, [Lp, Hkv, D] for the portable one
  const Fp8Block* blocks;       // [n_blocks]
  const float *qs, *ks, *vs;    // the scales above
  const float* sinks;           // F32 [Hq] natural-log sink logits, or null
  int64_t n_blocks, Hq, Hkv, D;
  float scale_log2;             // softmax scale x log2(e)
  void* y;                      // [S, Hq, D]
  Elt yt;
};

// The Hopper kernel (ops/cuda/sm90/attention_fp8_sm90.cu): sm_90, D = 128. The caller checks
// windowed_attention_tc_device.
void attention_fp8_tc(cudaStream_t st, const Fp8AttentionArgs& a);

}  // namespace avdit::cuda
