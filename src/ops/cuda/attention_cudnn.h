// Attention through cuDNN's fused flash SDPA (cudnn-frontend graph API), returning O and the
// softmax log-sum-exp that the sink correction needs. Graphs are built once per shape and kept.
// Without cuDNN in the build, cudnn_attention_available() is false and cudnn_sdpa throws.
#pragma once

#include <optional>

#include "ops/cuda/attention_sink_gate.h"
#include "backend/cuda/device.h"

namespace avdit::cuda {

// True when this build has cuDNN and its SDPA takes these operands: q, k, v of one dtype BF16 or
// F16 on the device, head dim a multiple of 8 up to 256 (128 on sm_80), sm_80 or newer. Does not
// build a graph, so a configuration cuDNN still refuses surfaces as an error of cudnn_sdpa.
bool cudnn_attention_available(const Device& dev, const Tensor& q, const Tensor& k, const Tensor& v);

// The cuDNN backend version (e.g. 91900), 0 without cuDNN.
int cudnn_version();

struct SdpaOut {
  Tensor o;    // [S, Hq, D] in q's dtype: softmax(scale q k^T) v, without sinks
  LseView lse;  // F32, natural log of sum_j exp(scale q.k_j) over the token's segment (scale included)
};

// q [S, Hq, D], k, v [S, Hkv, D] (GQA: Hq a multiple of Hkv). cu_seqlens: I32 [n + 1] on the device
// (undefined: one segment). Segments run as cuDNN's ragged (THD) layout with a padding mask: the
// graph sees n sequences of at most S tokens, and the per-segment lengths and offsets are computed
// on the device from cu_seqlens, so nothing waits for the host. RuntimeFailure when cuDNN refuses.
// `into`: write into these preallocated outputs (o like q, lse F32 with S * Hq elements; the
// returned view says its layout) instead of allocating (benchmarks; callers with an arena).
// Variants measured by the benchmark: stats = false returns no LSE (what torch's inference SDPA
// runs); native_sinks (F32 [Hq], cuDNN >= 9.13) has cuDNN add exp(sink_h) to the denominator itself.
// max_seqlen (ragged only; 0: S): the graph's sequence dimension. cuDNN launches its grid over B x
// max_seqlen query rows and masks what lies past each segment's length, so a graph sized S for
// segments much shorter than S launches mostly-empty tiles; callers that know the longest segment
// on the host (a packing plan) pass it here. It must be >= every segment's length (not checked:
// that would need the lengths on the host). causal: query i of a segment sees the segment's keys
// j <= i only (the diagonal at each segment's top left).
SdpaOut cudnn_sdpa(Device& dev, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                   const Tensor& cu_seqlens = {}, const SdpaOut* into = nullptr, const Tensor* native_sinks = nullptr,
                   bool stats = true, int64_t max_seqlen = 0, bool causal = false);

}  // namespace avdit::cuda
