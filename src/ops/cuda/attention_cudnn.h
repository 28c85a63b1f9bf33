// Attention through cuDNN's fused flash SDPA (cudnn-frontend graph API), returning O and the
// softmax log-sum-exp that the sink correction needs; and its FP8 variant (cudnn_sdpa_fp8). Graphs
// are built once per shape and kept. Without cuDNN in the build, cudnn_attention_available() and
// cudnn_fp8_attention_available() are false, cudnn_sdpa throws RuntimeFailure and cudnn_sdpa_fp8
// BadInput.
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

// ---- FP8 (ops/attention_fp8.h defines what it computes) -----------------------------------------

// True when this build has cuDNN and its FP8 SDPA runs on this device: sm_90 or newer, cuDNN >= 9.1
// and not 9.10.0 (cudnn-frontend's limits).
bool cudnn_fp8_attention_available(const Device& dev);

// The e4m3 operands of cudnn_sdpa_fp8 and their scales. The scales are F32 [1] tensors on the
// device, each 16-byte aligned (cuDNN's default), so that scales computed on the device reach cuDNN
// without the host waiting and a CUDA graph captures the call.
struct SdpaFp8In {
  Tensor q, k, v;                          // F8_E4M3 [S, Hq, D], [S, Hkv, D]: codes e4m3(x * s_x)
  Tensor descale_q, descale_k, descale_v;  // 1 / s_x
  Tensor descale_s, scale_s;               // P's codes are e4m3(P * scale_s); descale_s = 1 / scale_s
  Tensor scale_o;                          // O's codes are e4m3(O * scale_o)
};

// o (F8_E4M3 [S, Hq, D], preallocated) = e4m3(softmax(scale q k^T) v * scale_o) computed from the
// codes: logits descaled by descale_q descale_k, P rounded to e4m3 at scale_s, the P.V product
// descaled by descale_s descale_v. O is e4m3 because on Hopper cuDNN's FP8 SDPA writes FP8 only
// (BF16 output is Blackwell's, cuDNN >= 9.13); the caller decodes it. Head dims: multiples of 16 up
// to 256; no bias, no bottom-right causal mask (Hopper). cu_seqlens, max_seqlen and causal as
// cudnn_sdpa (ragged THD over segments). Returns false, launching nothing, where cuDNN refuses the
// configuration (the reason logged once per shape): whether Hopper takes ragged FP8 depends on the
// cuDNN version, so callers keep a way around it (ops/cuda/attention_fp8.cu). stats (F32 with S x Hq
// elements, token-major [S, Hq], or undefined): also write each (token, head)'s log-sum-exp of the
// scaled logits, natural log (what the sink correction needs); refused before cuDNN 9.12 outside
// the ragged layout, whose stats strides older versions do not honour.
bool cudnn_sdpa_fp8(Device& dev, const SdpaFp8In& in, float scale, Tensor& o, const Tensor& cu_seqlens = {},
                    int64_t max_seqlen = 0, bool causal = false, const Tensor& stats = {});

}  // namespace avdit::cuda
