// The FP8 attention's operand check (ops/attention_fp8.h), shared by the CPU and the GPU so both
// refuse the same inputs with the same words.
#include "ops/attention_fp8.h"

#include "core/error.h"

namespace avdit::ops {

void check_attention_fp8(const Tensor& q, const Tensor& k, const Tensor& v, const Segments& seg,
                         const Tensor* sinks, const Tensor& out) {
  AVDIT_REQUIRE(q.ndim() == 3 && k.ndim() == 3 && v.ndim() == 3,
                "FP8 attention: q, k, v must be [S, H, D], found {}, {}, {}", q.shape_str(),
                k.shape_str(), v.shape_str());
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = k.size(1);
  AVDIT_REQUIRE(k.size(0) == S && v.size(0) == S && k.size(2) == D && v.size(1) == Hkv &&
                    v.size(2) == D && Hkv > 0 && Hq % Hkv == 0,
                "FP8 attention: q {} k {} v {} (k and v alike, q's heads a multiple of theirs)",
                q.shape_str(), k.shape_str(), v.shape_str());
  for (const Tensor* t : {&q, &k, &v, &out})
    AVDIT_REQUIRE(
        t->dtype() == DType::F32 || t->dtype() == DType::BF16 || t->dtype() == DType::F16,
        "FP8 attention: operands in F32, BF16 or F16 (it quantizes them itself), found {}",
        dtype_name(t->dtype()));
  AVDIT_REQUIRE(D % kFp8AttentionHeadDimStep == 0 && D <= kFp8AttentionMaxHeadDim,
                "FP8 attention: head dim {} is not a multiple of {} up to {}; run this model's "
                "attention in bf16 (leave FP8 attention off)",
                D, kFp8AttentionHeadDimStep, kFp8AttentionMaxHeadDim);
  AVDIT_REQUIRE(out.numel() == q.numel(), "FP8 attention: output {} for q {}", out.shape_str(),
                q.shape_str());
  AVDIT_REQUIRE(seg.cu.empty() || seg.rows() == S, "FP8 attention: segments of {} rows for {} rows",
                seg.rows(), S);
  AVDIT_REQUIRE(!seg.causal,
                "FP8 attention is bidirectional; a causal attention (the text encoders') runs in "
                "bf16 (leave FP8 attention off for it)");
  if (sinks)
    AVDIT_REQUIRE(sinks->dtype() == DType::F32 && sinks->numel() == Hq,
                  "FP8 attention: sinks {} {} must be F32 with one per query head ({})",
                  sinks->shape_str(), dtype_name(sinks->dtype()), Hq);
}

}  // namespace avdit::ops
