// Softmax attention over a packed sequence of documents (segments), bidirectional or causal, with
// MAGI-2's per-head sink logit and sigmoid output gate, and GQA. The CPU computes it exactly in fp32 (the oracle); the GPU
// runs cuDNN's flash SDPA on bf16/f16 (one dense graph for the first document, one ragged graph for
// the rest, or all ragged: Segments::dense_rows) plus one pass for the gate, and a portable fp32
// kernel otherwise (the parity mode, and where cuDNN refuses a shape).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/dispatch.h"

namespace avdit::ops {

// The documents of a packed sequence of S rows: rows [cu[i], cu[i+1]) attend to each other only.
// Planned once per layout (plan_segments), so the forward never waits for the host.
enum class SegmentPlan;  // below

struct Segments {
  std::vector<int64_t> cu;  // host: 0 = cu[0] <= ... <= cu[n] = S
  Tensor cu_ctx;            // I32 [n + 1] on the context (GPU only)
  // GPU core plan: rows [0, dense_rows) run as one dense sequence (no mask, the fastest kernel),
  // the non-empty documents after it as one ragged call (tail_cu relative to dense_rows, sequence
  // dimension tail_max). dense_rows 0: everything ragged.
  int64_t dense_rows = 0;
  Tensor tail_cu;
  int64_t tail_max = 0;
  // Causal (the text encoders' decoders): row i of a document attends to the document's rows <= i.
  bool causal = false;
  // SegmentPlan::Own: the project's Hopper kernel's table (ops/cuda/windowed_attention_tc.h: each
  // non-empty document a segment whose one key range is itself, and its 128-query tiles), I32 on
  // the context; undefined for the other plans.
  Tensor own_table;
  int64_t own_docs = 0, own_tiles = 0;
  SegmentPlan plan{};  // the plan this was made for (GPU)
  int64_t rows() const { return cu.empty() ? 0 : cu.back(); }
};

// How the GPU covers the documents: Split (the first document dense, the rest ragged) or Ragged
// (all ragged, sequence dimension = the longest document), both through cuDNN, or Own: the
// project's Hopper kernel (FlashAttention-3's arrangement, every document in one launch without
// padding, the sink and gate inside) where it applies (sm_90, bf16, head dim 128, not causal),
// Split's cuDNN calls elsewhere. None wins everywhere (bench/notes/attention.md); a CUDA context
// with timing on (CudaContext::set_timed_choices) times them once per layout and keeps the
// fastest; otherwise Own where the longest document has 32,768 rows or more and is not a multiple
// of 128 (where cuDNN slows down) or has 65,536 rows or more, Split elsewhere.
enum class SegmentPlan { Split, Ragged, Own };
inline const char* segment_plan_name(SegmentPlan p) {
  return p == SegmentPlan::Split ? "split" : p == SegmentPlan::Ragged ? "ragged" : "own";
}

namespace cpu {
void attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const Segments& seg,
               const Tensor* sinks, const Tensor* gate, Tensor& out);
}
namespace cuda {
Segments plan_segments(CudaContext& c, std::vector<int64_t> cu, int64_t heads, int64_t head_dim,
                       DType dtype);
// This plan, not a timed choice (benchmarks and tests of each path).
Segments plan_segments_as(CudaContext& c, std::vector<int64_t> cu, SegmentPlan plan);
void attention(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
               const Segments& seg, const Tensor* sinks, const Tensor* gate, Tensor& out);
}  // namespace cuda

// cu: document boundaries (BadInput unless 0 first, non-decreasing). heads / head_dim / dtype: the
// attention this plan will serve (a timed choice is made for that shape).
Segments plan_segments(Context& ctx, std::vector<int64_t> cu, int64_t heads = 0,
                       int64_t head_dim = 0, DType dtype = DType::BF16);

// out[s, h] = sum_j p_j v[j, h / (Hq / Hkv)] over the keys j of s's document, p = softmax(scale
// q.k) with exp(sinks[h]) added to the denominator only (sinks F32 [Hq]: one logit per head), times
// sigmoid(gate[s, h]) (gate [S, Hq], rounded to out's dtype before the product where out is not
// F32, as torch's bf16 sigmoid). q [S, Hq, D], k, v [S, Hkv, D]; out [S, Hq, D] preallocated.
inline void attention_into(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                           float scale, const Segments& seg, const Tensor* sinks,
                           const Tensor* gate, Tensor& out) {
  AVDIT_OP(ctx, attention, q, k, v, scale, seg, sinks, gate, out);
}
inline Tensor attention(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                        float scale, const Segments& seg, const Tensor* sinks = nullptr,
                        const Tensor* gate = nullptr, std::optional<DType> out = {}) {
  Tensor o = ctx.empty(q.shape(), out.value_or(q.dtype()));
  attention_into(ctx, q, k, v, scale, seg, sinks, gate, o);
  return o;
}

}  // namespace avdit::ops
