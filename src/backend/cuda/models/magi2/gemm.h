// Row-range GEMMs writing into preallocated outputs, for the MAGI-2 preview's per-modality (grouped) linears:
// a group's rows of the activation times that group's weight rows land directly in its rows of one output,
// with no concatenation, and input column slices (the embedders read the first C_m columns of the packed
// rows) need no copy. cublasGemmEx with CUBLAS_COMPUTE_32F: fp32 accumulation, no TF32, no reduced-precision
// reductions (the Device's math mode), deterministic for a given device and shape.
#pragma once

#include <cstdint>

#include "backend/cuda/device.h"

namespace avdit::cuda::magi2 {

// y[rows, :N] = x[rows, :K] . W^T with W [N, K] (w_kn = false, a linear's weight) or y = x . W with
// W [K, N] (w_kn = true, e.g. mHC phi). rows = [row_begin, row_end) of x and of y; K = the weight's inner
// size (x may be wider: its leading dimension is x.size(-1)); y may be wider than N (columns [0, N) are
// written, the rest untouched). x and W must have the same dtype (F32 or BF16); y F32, or BF16 with BF16
// inputs. beta = 1 adds into y.
void gemm_rows(Device& dev, const Tensor& x, const Tensor& w, bool w_kn, Tensor& y, int64_t row_begin,
               int64_t row_end, float beta = 0.f);

}  // namespace avdit::cuda::magi2
