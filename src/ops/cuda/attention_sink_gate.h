// The pass after the cuDNN attention core: the exact sink correction from the core's LSE and
// MAGI-2's per-head sigmoid gate, in one pass over the output (CPU reference: ops::cpu::attention
// with sinks and gate); and the ragged offsets cuDNN reads, computed on the device.
#pragma once

#include <cstdint>
#include <optional>

#include "backend/cuda/device.h"

namespace avdit::cuda {

// ---- post-pass: sink correction and gate ------------------------------------------------------------

// The log-sum-exp of the scaled logits of each (token, head) in natural log, F32 on the device,
// at lse[s * stride_s + h * stride_h] (the attention core chooses its layout).
struct LseView {
  Tensor lse;
  int64_t stride_s = 0, stride_h = 0;
};

// y[r, h, :] = o[src, h, :] * c * g with src = rows ? rows[r] : r,
//   c = exp(lse - log(exp(lse) + exp(sink_h))) = 1 / (1 + exp(sink_h - lse))   (sinks: [Hq]; else 1)
//   g = sigmoid(gate[r, h])                                                      (gate: [S, Hq]; else 1)
// which turns softmax attention without the sink into attention with the sink term in the
// denominator (exactly), then applies the per-head output gate. o [S, Hq, D] F32/BF16/F16.
// In place (o is y) when `rows` is null and out is o's dtype; otherwise a new tensor of dtype out.
Tensor sink_gate(Device& dev, const Tensor& o, const LseView& lse, const Tensor* sinks, const Tensor* gate,
                 const Tensor* rows = nullptr, std::optional<DType> out = {});

// ---- helper for the cuDNN path ----------------------------------------------------------------------

// From cu_seqlens (I32 [n + 1] on the device) writes, without a host synchronisation:
//   seq_len[i] = cu[i+1] - cu[i]                              (n values, at dst + 0)
//   off_q[i]   = cu[i] * q_row,  off_kv[i] = cu[i] * kv_row,  off_stats[i] = cu[i] * stats_row
//                                                             (n + 1 values each, at dst + 1, 2, 3 x stride)
// as int32 arrays `stride` elements apart (cuDNN's ragged-offset and sequence-length tensors).
void launch_ragged_offsets(Device& dev, const Tensor& cu_seqlens, int64_t q_row, int64_t kv_row,
                           int64_t stats_row, int32_t* dst, int64_t stride);

}  // namespace avdit::cuda
