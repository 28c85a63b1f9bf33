// mHC on the GPU as models/magi2/mhc.h computes it on the CPU: the coefficients of one branch (RMSNorm of the
// flat state with the per-modality mhc_norm rows, the phi GEMM in fp32, then sigmoid / 2 sigmoid / Sinkhorn in
// one kernel). The stream mixing kernels themselves are in kernels.h (mhc_apply_pre, mhc_hyper_connect_).
#pragma once

#include <cstdint>

#include "backend/cuda/models/magi2/weights.h"

namespace avdit::cuda::magi2 {

struct DeviceMhcCoefficients {
  Tensor h_pre;   // [L, n] F32
  Tensor h_post;  // [L, n] F32 (factor 2 included)
  Tensor h_res;   // [L, n, n] F32, row i = output stream
  // The intermediates (normalised state [L, n*hidden], logits [L, 2n + n*n]): returned so that the caller
  // decides when they are released (a release synchronises the device).
  Tensor normed, logits;
};

// s [L, n*hidden] (F32 or BF16, permuted rows); norm_weight [G, n*hidden] F32 ((1 + w), eps 1e-6); group: I32
// [L] row -> weight row, required when G > 1. round_bf16: the coefficients are rounded to bf16 (the bf16
// mode). Enqueues three launches (norm, GEMM, epilogue), no synchronisation.
DeviceMhcCoefficients mhc_coefficients(Device& dev, const Tensor& s, const Tensor& norm_weight, const Tensor* group,
                                       const DeviceMhcBranch& branch, int64_t n, bool round_bf16);

}  // namespace avdit::cuda::magi2
