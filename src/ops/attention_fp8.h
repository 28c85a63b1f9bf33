// FP8 (e4m3) attention: issue 39's option for the attention core, softmax(scale q k^T) v over a
// packed sequence of documents with q, k, v, the probabilities P and the output O in e4m3, as
// cuDNN's FP8 SDPA runs it on Hopper tensor cores. A separate op beside ops::attention (as
// linear_fp8 beside linear) because its contract is narrower: no gate, head dims that cuDNN's FP8
// kernels take, and sinks applied after the FP8 output (below). The CPU emulates the GPU's computation from the same codes, so that a
// score measured on the CPU is the cost of what the GPU runs.
//
// The definition (one set of scales per call, all documents together):
//   q, k, v: per-tensor scales s = 448 / amax over the finite values (1 where all are zero), codes
//     e4m3(x * s) rounded to nearest even and saturating: the FP8 linear's per-tensor quantization
//     (ops/linear_fp8.h), same bits.
//   logits: the codes' dot products in fp32, times scale / (s_q s_k).
//   P: exp(logit - row max), in (0, 1] (a flash kernel's unnormalized probabilities), codes
//     e4m3(448 P): P <= 1 needs no measured scale, and e4m3 being floating point, P keeps its 3
//     mantissa bits down to 2^-6 / 448 (3.5e-5) of the row's largest, where terms stop mattering.
//   O: sum_j P_j v_j from the codes in fp32, times 1 / (448 s_v), divided by the fp32 sum of the
//     unrounded P; then rounded to e4m3 at scale s_o = s_v, because on Hopper cuDNN writes O in
//     FP8 only. Each row of O is a convex combination of rows of v, so |O| <= amax(v) and s_v
//     never overflows (P's rounding may push a value a hair past; the conversion saturates);
//     finally O = code / s_o in the caller's dtype.
//   Sinks (F32 [Hq], MAGI-2's): after O's decode into the caller's dtype, each row is multiplied by
//     1 / (1 + exp(sink_h - lse)), lse = row max + log of the fp32 sum of the unrounded P (the
//     keys' log-sum-exp, natural log), and rounded again: the sink joins the denominator exactly,
//     outside the FP8 rounding (on the GPU: cuDNN's stats output and the sink pass of the bf16
//     LSE path, ops/cuda/attention_sink_gate.h).
//   Short documents: one of fewer than kFp8AttentionMinRows rows attends as ops::attention does, in
//     the inputs' precision (with its sinks), not in FP8; the scales above still come from all rows.
//     cuDNN 9.14's FP8 SDPA on the H200 gave different bytes on two calls with the same codes, and
//     rows far from the definition, for 256- and 336-row documents of 56 heads (H3's padding
//     document) in every run, has no engine for a one-row one, and once did the same for a
//     2,048-row document (an open defect: bench/notes/attention_fp8.md). A document's share of a
//     call's FLOPs goes with its length squared, so this costs nothing measurable at video lengths.
//   More than kFp8AttentionMaxDocuments documents of kFp8AttentionMinRows rows or more: the call
//     runs as ops::attention (each such document is its own cuDNN graph).
// The CPU takes the exact row max; the GPU's running max per key tile scales a tile's P by
// exp(max - tile max) before rounding, so single P codes round differently (same relative error):
// the two agree to the bar of tests/gpu/attention_cudnn_test.cpp, not bit for bit.
#pragma once

#include <optional>

#include "ops/attention.h"
#include "ops/dispatch.h"

namespace avdit::ops {

// cuDNN's FP8 SDPA limits, checked the same on every context: head dims multiple of 16 up to 256.
inline constexpr int64_t kFp8AttentionMaxHeadDim = 256;
inline constexpr int64_t kFp8AttentionHeadDimStep = 16;
// Documents shorter than this attend outside FP8, and a call with more FP8 documents than the
// second runs in the inputs' precision (the definition above).
inline constexpr int64_t kFp8AttentionMinRows = 1024;
inline constexpr int64_t kFp8AttentionMaxDocuments = 8;

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
// documents (GQA as ops::attention; causal when seg is; sinks: F32 [Hq] on ctx, or null).
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
