// mHC (manifold-constrained hyper-connections, MAGI-2 preview): n residual streams per token, mixed
// by coefficients computed from the RMS-normalised flat state - h_pre (streams -> branch input),
// h_post (branch output -> streams) and a Sinkhorn-normalised h_res (streams -> streams). fp32 math
// in the reference's operation order (the GPU kernels avoid FMA contraction, so both backends agree
// closely).
#pragma once

#include <cstdint>

#include "ops/dispatch.h"
#include "ops/norm.h"

namespace avdit::ops {

// The reference's MHCHandler constants (num_sk_iters = 20, sk_eps = 1e-12), and the most streams
// the GPU kernels hold in registers (the preview uses 4).
inline constexpr int kSinkhornIters = 20;
inline constexpr float kSinkhornEps = 1e-12f;
inline constexpr int64_t kMaxMhcStreams = 8;

// One branch's coefficient parameters: logit scales a_* = alpha_* * (1 / sqrt(n * hidden)) in
// float32 (the reference's alpha * matmul_scale) and the biases, F32 on the context.
struct MhcParams {
  float a_pre = 0, a_post = 0, a_res = 0;
  Tensor bias_pre, bias_post;  // [n]
  Tensor bias_res;             // [n, n]
};

struct MhcCoefficients {
  Tensor h_pre;   // F32 [L, n]
  Tensor h_post;  // F32 [L, n] (the factor 2 included)
  Tensor h_res;   // F32 [L, n, n], row i = output stream
};

namespace cpu {
void mhc_logits(const Tensor& s, const RmsNormWeight& w, float eps, const Tensor& phi, Tensor& out);
void mhc_coefficients(const Tensor& logits, const MhcParams& p, int64_t n, DType round,
                      MhcCoefficients& out);
void mhc_apply_pre(const Tensor& s, const Tensor& h_pre, int64_t n, Tensor& out);
void mhc_hyper_connect_(Tensor& s, const Tensor& o, const Tensor& h_post, const Tensor& h_res,
                        int64_t n);
}  // namespace cpu
namespace cuda {
void mhc_logits(CudaContext& c, const Tensor& s, const RmsNormWeight& w, float eps,
                const Tensor& phi, Tensor& out);
void mhc_coefficients(CudaContext& c, const Tensor& logits, const MhcParams& p, int64_t n,
                      DType round, MhcCoefficients& out);
void mhc_apply_pre(CudaContext& c, const Tensor& s, const Tensor& h_pre, int64_t n, Tensor& out);
void mhc_hyper_connect_(CudaContext& c, Tensor& s, const Tensor& o, const Tensor& h_post,
                        const Tensor& h_res, int64_t n);
}  // namespace cuda

// The coefficient logits h = RMSNorm(s) . phi, F32 [L, C]: the RMS norm of each token's flat state
// s [L, n*hidden] (weight convention and per-token weight rows of `w`, eps) in fp32, times phi F32
// [n*hidden, C]. The CPU forms the normed rows and multiplies them (the reference's two steps); the
// GPU makes one pass over s with the normed rows never stored (sum of squares and the C dot
// products together, the 1/rms factor applied last), so the two differ in fp32 summation order
// only.
inline Tensor mhc_logits(Context& ctx, const Tensor& s, const RmsNormWeight& w, float eps,
                         const Tensor& phi) {
  Tensor out = ctx.empty({s.size(0), phi.size(1)}, DType::F32);
  AVDIT_OP(ctx, mhc_logits, s, w, eps, phi, out);
  return out;
}

// From logits h = RMSNorm(s) . phi (F32 [L, 2n + n*n], columns pre | post | res):
// h_pre = sigmoid(a_pre h + b_pre), h_post = 2 sigmoid(a_post h + b_post), h_res = Sinkhorn(a_res h
// + b_res) (exp(Z - max Z), then columns, then rows, kSinkhornIters times, eps kSinkhornEps). Each
// value is rounded to `round` (the reference casts them to the stream dtype) and stored as F32.
inline MhcCoefficients mhc_coefficients(Context& ctx, const Tensor& logits, const MhcParams& p,
                                        int64_t n, DType round = DType::F32) {
  const int64_t L = logits.size(0);
  MhcCoefficients c{ctx.empty({L, n}, DType::F32), ctx.empty({L, n}, DType::F32),
                    ctx.empty({L, n, n}, DType::F32)};
  AVDIT_OP(ctx, mhc_coefficients, logits, p, n, round, c);
  return c;
}

// out[l, x] = sum_k h_pre[l, k] s[l, k, x] (fp32, k ascending): s [L, n*hidden] -> out [L, hidden],
// rounded once to out's dtype.
inline void mhc_apply_pre(Context& ctx, const Tensor& s, const Tensor& h_pre, int64_t n,
                          Tensor& out) {
  AVDIT_OP(ctx, mhc_apply_pre, s, h_pre, n, out);
}

// In place: s[l, i, x] = sum_j h_res[l, i, j] s[l, j, x] + h_post[l, i] o[l, x] (fp32, j ascending,
// the branch term last), rounded to s's dtype. s [L, n*hidden], o [L, hidden] (any float dtype).
inline void mhc_hyper_connect_(Context& ctx, Tensor& s, const Tensor& o, const Tensor& h_post,
                               const Tensor& h_res, int64_t n) {
  AVDIT_OP(ctx, mhc_hyper_connect_, s, o, h_post, h_res, n);
}

}  // namespace avdit::ops
