// Attention by GEMMs, for head dims the flash kernels do not take (cuDNN's and the portable kernel
// stop at 256; Wan2.2's VAE attends with one head of 1,024): per document and head, the fp32 scores
// q k^T, a row softmax, then P v with P in v's dtype (as flash kernels keep P). One document's
// n x n fp32 scores are held at a time. No sinks, gate or causal mask.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

// q [S, Hq, D], k, v [S, Hkv, D] (Hq a multiple of Hkv), the documents' row offsets cu (host,
// 0 .. S), out [S, Hq, D] preallocated.
void gemm_attention(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                    const std::vector<int64_t>& cu, Tensor& out);

}  // namespace avdit::ops::cuda
