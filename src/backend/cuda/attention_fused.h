// The element-wise passes around the attention core, each fused into one pass over its tensors:
// before it, per-head QK RMSNorm + partial rotate-half RoPE straight from the qkv GEMM output;
// after it, the exact sink correction and MAGI-2's per-head sigmoid gate from the core's LSE.
// CPU references: ops::rms_norm + ops::rope_rotate_half_ (pre), ops::attention with sinks (post).
#pragma once

#include <cstdint>
#include <optional>

#include "backend/cuda/device.h"

namespace avdit::cuda {

// ---- pre-pass: qkv GEMM output -> q, k (normed, rotated), v ----------------------------------------

// Column layout of one token's row of the qkv GEMM output.
enum class QkvLayout {
  kSplit,    // [q heads (Hq*D) | k heads (Hkv*D) | v heads (Hkv*D)], head-major (MAGI-2 linear_qkv)
  kPerHead,  // [head 0: q(D) k(D) v(D) | head 1: ... ] = [H, 3, D], needs Hq == Hkv (H3 qkv_proj)
};

struct Qkv;

struct QkvPrepOptions {
  QkvLayout layout = QkvLayout::kSplit;
  int64_t heads_q = 0, heads_kv = 0, head_dim = 0;  // Hq (a multiple of Hkv), Hkv, D (<= 256)
  // RMSNorm over each head's D values: x / sqrt(mean(x^2) + eps) * g with g = w, or (1 + w) when
  // one_plus_weight. Weights [D] or [G*D] / [G, D] (any float dtype); null: that side is not normed.
  const Tensor* q_weight = nullptr;
  const Tensor* k_weight = nullptr;
  float eps = 1e-6f;
  bool one_plus_weight = false;
  // With G > 1 weight rows: I32 [S] on the device, group[i] = weight row of qkv row i (the source
  // row, e.g. the modality of a token in modality-sorted order).
  const Tensor* group = nullptr;
  // Rotate-half RoPE on dims [0, R) after the norm, as ops::rope_rotate_half_; cos, sin F32
  // [S, R/2] indexed by the OUTPUT row (R = 2 * cos.size(1), even, <= D). Null: no RoPE.
  const Tensor* cos = nullptr;
  const Tensor* sin = nullptr;
  // I32 [S] on the device: output row r reads qkv row rows[r] (a gather, e.g. MAGI-2's
  // modality-sorted -> packed order, layout.inv). Null: identity.
  const Tensor* rows = nullptr;
  // dtype of q, k, v (default: qkv's). All math is fp32 and each value is rounded once.
  std::optional<DType> out;
  // Preallocated outputs (an arena; the benchmark): written instead of allocating. Null: allocate.
  const Qkv* into = nullptr;
};

struct Qkv {
  Tensor q;  // [S, Hq, D]
  Tensor k;  // [S, Hkv, D]
  Tensor v;  // [S, Hkv, D] (a copy of the v columns: the attention reads contiguous q, k, v)
};

// One pass over qkv [S, (Hq + 2 Hkv) * D] (F32/BF16/F16): every value is read once and q, k, v
// written once, in the layout cuda::attention reads. Equal to: split the columns, gather rows,
// q = rope(rms_norm(q)), k = rope(rms_norm(k)) in fp32, round to `out`.
Qkv qkv_norm_rope(Device& dev, const Tensor& qkv, const QkvPrepOptions& opt);

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
