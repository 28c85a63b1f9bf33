// Around the attention core of a layer whose activations live in modality-sorted order (MAGI-2):
// the prologue after the fused QKV linear (per-head QK RMSNorm with per-modality weight rows,
// partial rotate-half RoPE, and the move into packed token order, where a document's tokens are
// contiguous), and the epilogue (the per-head sigmoid gate and the move back). Each rounds where
// the reference's separate ops round, so the fused GPU kernels and the step-by-step CPU reference
// agree.
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void qkv_prologue(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                  const Tensor* group, const Tensor& inv, const Tensor& rope, int64_t half,
                  Tensor& q, Tensor& k, Tensor& v);
void gate_unpermute(const Tensor& o, const Tensor& g, const Tensor& perm, Tensor& out);
}  // namespace cpu
namespace cuda {
void qkv_prologue(CudaContext& c, const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                  const Tensor* group, const Tensor& inv, const Tensor& rope, int64_t half,
                  Tensor& q, Tensor& k, Tensor& v);
void gate_unpermute(CudaContext& c, const Tensor& o, const Tensor& g, const Tensor& perm,
                    Tensor& out);
}  // namespace cuda

// For packed token p (permuted row inv[p] of qkv [L, (Hq + 2 Hkv) D], columns q | k | v
// head-major): q and k heads RMS-normalised over D with the weight row of the token's group ((1 +
// w), eps 1e-6; q_norm, k_norm F32 [G, D], group I32 [L] per permuted row, null when G = 1), then
// rotate-half RoPE on dims [0, 2 half) with the table rope F32 [L, >= 2 half] = [sin | cos | ...]
// of packed token p, stored rounded once; v copied. q [L, Hq, D], k, v [L, Hkv, D] preallocated
// (their dtype: the reference's FA3 inputs).
inline void qkv_prologue(Context& ctx, const Tensor& qkv, const Tensor& q_norm,
                         const Tensor& k_norm, const Tensor* group, const Tensor& inv,
                         const Tensor& rope, int64_t half, Tensor& q, Tensor& k, Tensor& v) {
  AVDIT_OP(ctx, qkv_prologue, qkv, q_norm, k_norm, group, inv, rope, half, q, k, v);
}

// out[r, h, :] = R(o[perm[r], h, :] * R(sigmoid(g[r, h]))), R rounding to out's dtype (torch's bf16
// sigmoid and product): o [L, Hq, D] packed, g [L, Hq] permuted, out [L, Hq * D] permuted.
inline void gate_unpermute(Context& ctx, const Tensor& o, const Tensor& g, const Tensor& perm,
                           Tensor& out) {
  AVDIT_OP(ctx, gate_unpermute, o, g, perm, out);
}

}  // namespace avdit::ops
