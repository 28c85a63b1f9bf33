// ops::attention_fp8 on the device (ops/attention_fp8.h): q, k, v quantized per tensor by the FP8
// linear's kernels (cuda::quantize_fp8: amax by an atomic max, then the codes), cuDNN's FP8 SDPA
// with every scale a device scalar (attention_cudnn.h), O decoded to the caller's dtype in one
// pass (then, with sinks, the bf16 LSE path's sink pass from cuDNN's stats); nothing waits for the
// host, so a CUDA graph captures it. Documents: each one of kFp8AttentionMinRows rows or more a
// dense FP8 graph (at most kFp8AttentionMaxDocuments of them; H3's layouts have one, MAGI-2's two),
// shorter ones as ops::attention, as the definition says. Where cuDNN refuses an FP8 graph the call
// runs ops::attention in bf16 instead, saying so once on stderr.
#include <cuda_fp8.h>

#include <cstdio>

#include "backend/cuda/context.h"
#include "ops/attention_fp8.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/common.cuh"
#include "ops/linear_fp8.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::SdpaFp8In;

// P's scales, fixed (P in (0, 1]): descale_s at p[0], scale_s at p[4] (16-byte slots, cuDNN's
// alignment).
__global__ void p_scales_kernel(float* p) {
  p[0] = 1.f / 448.f;
  p[4] = 448.f;
}

// out[i] = e4m3 code[i] * descale, in out's dtype.
__global__ void decode_kernel(const uint8_t* codes, const float* descale, void* out, Elt t,
                              int64_t n) {
  const float d = *descale;
  for (int64_t i = ::avdit::cuda::first_of(); i < n; i += ::avdit::cuda::stride_of())
    ::avdit::cuda::store_elt(
        out, t, i, __half2float(__half(__nv_cvt_fp8_to_halfraw(codes[i], __NV_E4M3))) * d);
}

// in's rows [r0, r0 + n) (the scales shared).
SdpaFp8In rows(const SdpaFp8In& in, int64_t r0, int64_t n) {
  SdpaFp8In r = in;
  r.q = in.q.slice_rows(r0, r0 + n);
  r.k = in.k.slice_rows(r0, r0 + n);
  r.v = in.v.slice_rows(r0, r0 + n);
  return r;
}

using Documents = std::vector<std::pair<int64_t, int64_t>>;  // first row, rows

// The FP8 core: each document a dense graph into o8's rows; false as soon as cuDNN refuses one.
// lse (F32 [S, Hq], or undefined): the keys' log-sum-exp of each row, for the sinks.
bool fp8_core(CudaContext& c, const SdpaFp8In& in, float scale, const Documents& docs, bool causal,
              Tensor& o8, const Tensor& lse) {
  for (const auto& [r0, n] : docs) {
    Tensor o = o8.slice_rows(r0, r0 + n);
    if (!::avdit::cuda::cudnn_sdpa_fp8(c.dev(), rows(in, r0, n), scale, o, {}, 0, causal,
                                       lse.defined() ? lse.slice_rows(r0, r0 + n) : Tensor()))
      return false;
  }
  return true;
}

__global__ void one_document_kernel(int32_t* cu, int32_t n) {
  cu[0] = 0;
  cu[1] = n;
}

// A short document as ops::attention runs it, into out's rows; its boundaries written on the
// device, so a CUDA graph captures the call.
void short_document(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                    bool causal, const Tensor* sinks, int64_t r0, int64_t n, Tensor& out) {
  Segments one;
  one.cu = {0, n};
  one.cu_ctx = c.empty({2}, DType::I32);
  one.dense_rows = n;
  one.causal = causal;
  one_document_kernel<<<1, 1, 0, c.stream()>>>(static_cast<int32_t*>(device_ptr(one.cu_ctx)),
                                               static_cast<int32_t>(n));
  AVDIT_CUDA_CHECK_LAUNCH();
  Tensor o = out.slice_rows(r0, r0 + n);
  attention(c, q.slice_rows(r0, r0 + n), k.slice_rows(r0, r0 + n), v.slice_rows(r0, r0 + n),
            scale, one, sinks, nullptr, o);
}

}  // namespace

void attention_fp8(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                   const Segments& seg, const Tensor* sinks, Tensor& out) {
  check_attention_fp8(q, k, v, seg, sinks, out);
  for (const Tensor* t : {&q, &k, &v}) c.require_here(*t, "FP8 attention q/k/v");
  if (sinks) c.require_here(*sinks, "FP8 attention sinks");
  c.require_here(out, "FP8 attention output");
  AVDIT_REQUIRE(seg.cu_ctx.defined(), "FP8 attention: segments not planned on this CUDA context");
  const auto& props = c.dev().props();
  AVDIT_REQUIRE(
      ::avdit::cuda::cudnn_fp8_attention_available(c.dev()),
      "FP8 attention runs cuDNN's FP8 SDPA: sm_90 or newer with cuDNN >= 9.1 in the build; "
      "this is sm_{}{} with cuDNN {}: leave FP8 attention off here",
      props.major, props.minor, ::avdit::cuda::cudnn_version());
  const int64_t S = q.size(0), D = q.size(2);
  if (S == 0) return;
  // The definition's split (ops/attention_fp8.h): long documents in FP8, short ones as
  // ops::attention; too many long ones, the whole call as ops::attention.
  const std::vector<int64_t> cu = seg.cu.empty() ? std::vector<int64_t>{0, S} : seg.cu;
  Documents fp8_docs, short_docs;
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    const int64_t n = cu[i + 1] - cu[i];
    if (n > 0) (n >= kFp8AttentionMinRows ? fp8_docs : short_docs).emplace_back(cu[i], n);
  }
  if (fp8_docs.size() > static_cast<size_t>(kFp8AttentionMaxDocuments)) {
    attention(c, q, k, v, scale, seg, sinks, nullptr, out);
    return;
  }
  auto shorts = [&] {
    for (const auto& [r0, n] : short_docs)
      short_document(c, q, k, v, scale, seg.causal, sinks, r0, n, out);
  };
  if (fp8_docs.empty()) {
    shorts();
    return;
  }
  auto quantized = [&](const Tensor& x) {
    return quantize_fp8(c, x.reshape({x.size(0) * x.size(1), D}), Fp8Scaling::Tensor);
  };
  const Fp8Weight qq = quantized(q), kq = quantized(k), vq = quantized(v);
  Tensor p = c.empty({8}, DType::F32);
  p_scales_kernel<<<1, 1, 0, c.stream()>>>(static_cast<float*>(device_ptr(p)));
  AVDIT_CUDA_CHECK_LAUNCH();
  // O's scale is v's: each row of O is a convex combination of v's rows (ops/attention_fp8.h).
  SdpaFp8In in;
  in.q = qq.codes.reshape(q.shape());
  in.k = kq.codes.reshape(k.shape());
  in.v = vq.codes.reshape(v.shape());
  in.descale_q = qq.dequant;
  in.descale_k = kq.dequant;
  in.descale_v = vq.dequant;
  in.descale_s = p.slice_rows(0, 1);
  in.scale_s = p.slice_rows(4, 5);
  in.scale_o = vq.scales;
  Tensor o8 = c.empty(q.shape(), DType::F8_E4M3);
  const Tensor lse = sinks ? c.empty({S, q.size(1)}, DType::F32) : Tensor();
  if (!fp8_core(c, in, scale, fp8_docs, seg.causal, o8, lse)) {
    static bool said = false;
    if (!said) {
      said = true;
      fmt::print(
          stderr,
          "FP8 attention: cuDNN has no FP8 SDPA for [{}, {}, {}] over {} documents here (see "
          "the warning above); these attentions run in bf16\n",
          S, q.size(1), D, cu.size() - 1);
    }
    attention(c, q, k, v, scale, seg, sinks, nullptr, out);
    return;
  }
  // The whole tensor in one pass (short documents' rows are written again below).
  const int64_t n = out.numel();
  decode_kernel<<<::avdit::cuda::grid_for(n), ::avdit::cuda::kThreads, 0, c.stream()>>>(
      static_cast<const uint8_t*>(o8.raw()), static_cast<const float*>(vq.dequant.raw()),
      device_ptr(out), ::avdit::cuda::elt_of(out, "FP8 attention output"), n);
  AVDIT_CUDA_CHECK_LAUNCH();
  // The sinks join the denominator exactly, in place: o * 1 / (1 + exp(sink_h - lse)).
  if (sinks) ::avdit::cuda::sink_gate(c.dev(), out, {lse, q.size(1), 1}, sinks, nullptr);
  shorts();
}

}  // namespace avdit::ops::cuda
