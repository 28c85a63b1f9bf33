// NVFP4 routed-expert weights on the GPU: dequantisation of the packed K-major layout of
// quant/nvfp4.h to bf16, bit-identical to quant::dequantize_nvfp4 (the CPU reference), for the MoE
// path to expand the experts it needs in front of the grouped GEMM.
#pragma once

#include <cstdint>

#include "backend/cuda/device.h"

namespace avdit::cuda {

// Experts [g0, g1) of a packed stack (quant::Nvfp4Matrix's parts, on the device):
//   packed        U8      [G, N, K/2]   byte (g, n, j) = code(k = 2j) | code(k = 2j + 1) << 4
//   scales        F8_E4M3 [G, N, K/16]  block scale of k in [16b, 16b + 16) of column n
//   global_scale  F32     [G]           the encode scale S of expert g (decode divides by it)
// decoded to out BF16 [g1 - g0, N, K] (K-major: element (g, n, k) = bf16((e2m1(q) * e4m3(bs)) / S),
// i.e. the transpose of quant::dequantize_nvfp4's [.., K, N] output, in the layout a GEMM B operand
// "w[N, K]" takes). `out` must be allocated by the caller (cuda_empty). Enqueues on dev.stream().
// row_step / row_offset interleave two matrices into one: row n of expert g goes to row
// n * row_step + row_offset of out [g1-g0, N * row_step, K] (the grouped GEMMs' gate/up layout,
// moe/grouped.h: gate with (2, 0), up with (2, 1)); the other rows are left as they are.
void dequantize_nvfp4_bf16(Device& dev, const Tensor& packed /*U8 [G, N, K/2]*/,
                           const Tensor& scales /*F8_E4M3 [G, N, K/16]*/,
                           const Tensor& global_scale /*F32 [G]*/, int64_t g0, int64_t g1,
                           Tensor& out /*BF16 [g1-g0, N * row_step, K]*/, int row_step = 1,
                           int row_offset = 0);

}  // namespace avdit::cuda
