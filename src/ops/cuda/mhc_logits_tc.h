// ops::mhc_logits on the tensor cores (mhc_logits_tc.cu): the MAGI-2 preview's case, bf16 streams
// and 24 logits (4 streams), with fp32 accuracy. ops::mhc_logits (mhc.cu) calls it where
// mhc_logits_tc_takes holds and keeps its SIMT kernel for every other case.
#pragma once

#include "backend/cuda/context.h"
#include "ops/norm.h"

namespace avdit::ops::cuda {

// Whether the kernel takes these operands here: s BF16 [L, K] with K a multiple of 64 and 4-byte
// aligned rows, phi F32 [K, 24], no weight or an F32 / BF16 weight of at most 32 rows of K, and
// sm_80+ device code for this GPU (mma.sync bf16; builds for sm_75 run the SIMT kernel there).
bool mhc_logits_tc_takes(CudaContext& c, const Tensor& s, const RmsNormWeight& w,
                         const Tensor& phi);

// out F32 [L, 24] = RMSNorm(s) . phi as ops::mhc_logits defines it (a group index outside the
// weight gives a NaN row, as rms_norm does). Enqueues two kernels on c's stream and takes its
// scratch (the split weights, 144 K bytes a weight row) from c's pool: capturable in a graph.
void mhc_logits_tc(CudaContext& c, const Tensor& s, const RmsNormWeight& w, float eps,
                   const Tensor& phi, Tensor& out);

}  // namespace avdit::ops::cuda
