// mHC (manifold-constrained hyper-connections) of the MAGI-2 preview: n residual streams mixed per token by
// h_pre (streams -> branch input), h_post (branch output -> streams) and a Sinkhorn-normalised h_res (streams ->
// streams), all computed from the RMS-normalised flat state.
#pragma once

#include "core/tensor.h"
#include "models/magi2/token_layout.h"
#include "models/magi2/weights.h"

namespace avdit::models::magi2 {

// The reference's MHCHandler constants (num_sk_iters = 20, sk_eps = 1e-12).
inline constexpr int kSinkhornIters = 20;
inline constexpr float kSinkhornEps = 1e-12f;

struct MhcCoefficients {
  Tensor h_pre;   // [L, n]
  Tensor h_post;  // [L, n] (includes the factor 2)
  Tensor h_res;   // [L, n, n], row i = output stream
};

// s: [L, n*hidden] in permuted order; norm_weight: [G*n*hidden] (mhc_norm, shared by both branches).
MhcCoefficients mhc_coefficients(const Tensor& s, const Tensor& norm_weight, int64_t groups, const TokenLayout& layout,
                                 const MhcBranchWeights& w, int64_t n, int64_t hidden);

// sum_k h_pre[k] s[k]: s [L, n*hidden] -> [L, hidden].
Tensor mhc_apply_pre(const Tensor& s, const Tensor& h_pre, int64_t n);

// s'[i] = sum_j h_res[i, j] s[j] + h_post[i] * out: s [L, n*hidden], out [L, hidden] -> [L, n*hidden].
Tensor mhc_hyper_connect(const Tensor& s, const Tensor& out, const Tensor& h_post, const Tensor& h_res, int64_t n);

}  // namespace avdit::models::magi2
