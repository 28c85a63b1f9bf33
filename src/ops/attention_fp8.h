// FP8 (e4m3) attention, issue 41's option of the project's Hopper attention kernel: softmax(scale
// q k^T) v over a packed sequence of documents with q, k, v and the probabilities P in e4m3 under
// per-block scales, the products summed in fp32, MAGI-2's per-head sink in the denominator. A
// separate op beside ops::attention (as linear_fp8 beside linear): bidirectional, no gate. The CPU
// emulates the GPU's computation from the same codes, so a score measured on the CPU is the cost of
// what the GPU runs. Off by default (the models' fp8_attention knob).
//
// The definition, per document (any length, any number of them), query head h and its kv head:
//   Blocks: the document's rows cut into kFp8AttentionBlock-row blocks from its first row (the last
//     one may be shorter).
//   Scales: q per (block, query head), k per (block, kv head), v per kv head over all S rows:
//     a = max(amax of the values, 2^-60), s = a / 448 (fp32), codes e4m3(x * (1 / s)), 1 / s one
//     fp32 division, the product rounded to nearest even and saturating (the FP8 linear's e4m3).
//   Logits, base 2: y_ij = dot(q codes_i, k codes_j) (fp32 sums of exact products) times
//     f = ((scale * log2(e)) * s_q(block of i)) * s_k(block of j), log2(e) = 1.4426950408889634f.
//   P_ij = 2^(y_ij - m_i + 8) in (0, 256], m_i the row's max of y over the document's keys;
//     l_i = sum_j P_ij in fp32 (unrounded); e4m3(P_ij) enters the product with v.
//   O_i = s_v * sum_j e4m3(P_ij) * (v codes_j) / (l_i + 256 * 2^(sink_h * log2(e) - m_i)) (no sink:
//     / l_i), rounded once to the output's dtype.
// The GPU's running max m moves per key tile, so a key seen before its row's max has P relative to
// the max so far: P's codes round differently (the same relative error), and the two sides agree to
// the bar of tests/gpu/attention_fp8_test.cpp, not bit for bit. Head dim 128 on sm_90 runs the
// Hopper kernel (ops/cuda/sm90/attention_fp8_sm90.cu); other head dims and GPUs a portable kernel
// of the same definition.
#pragma once

#include <optional>

#include "ops/attention.h"
#include "ops/dispatch.h"

namespace avdit::ops {

// Head dims the op takes (multiples of 16 up to 256, as the e4m3 GEMMs), and the scale blocks.
inline constexpr int64_t kFp8AttentionMaxHeadDim = 256;
inline constexpr int64_t kFp8AttentionHeadDimStep = 16;
inline constexpr int64_t kFp8AttentionBlock = 128;

// BadInput naming the limit when q [S, Hq, D], k, v [S, Hkv, D] (float dtypes), seg, sinks (F32
// [Hq] or null) or out do not fit this op; the same check on the CPU and the GPU.
void check_attention_fp8(const Tensor& q, const Tensor& k, const Tensor& v, const Segments& seg,
                         const Tensor* sinks, const Tensor& out);

namespace cpu {
void attention_fp8(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                   const Segments& seg, const Tensor* sinks, Tensor& out);
}
namespace cuda {
void attention_fp8(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                   const Segments& seg, const Tensor* sinks, Tensor& out);
}

// out [S, Hq, D] (any float dtype, preallocated) = the FP8 attention of q, k, v over seg's
// documents (GQA as ops::attention; bidirectional; sinks: F32 [Hq] on ctx, or null).
inline void attention_fp8_into(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                               float scale, const Segments& seg, Tensor& out,
                               const Tensor* sinks = nullptr) {
  AVDIT_OP(ctx, attention_fp8, q, k, v, scale, seg, sinks, out);
}
inline Tensor attention_fp8(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                            float scale, const Segments& seg, const Tensor* sinks = nullptr,
                            std::optional<DType> out = {}) {
  Tensor o = ctx.empty(q.shape(), out.value_or(q.dtype()));
  attention_fp8_into(ctx, q, k, v, scale, seg, o, sinks);
  return o;
}

}  // namespace avdit::ops
