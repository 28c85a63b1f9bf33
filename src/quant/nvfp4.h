// NVFP4 (e2m1 values, one e4m3 scale per 16 elements along K, one fp32 scale per matrix) for the
// routed-expert weights, with the TransformerEngine recipe: quantise, pack, dequantise and fake
// quantisation, bit-exact by construction so that the GPU kernels can reproduce the CPU exactly.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace avdit::quant {

inline constexpr int64_t kNvfp4Block = 16;  // elements per e4m3 block scale, along K

// The scalar recipe, TransformerEngine's exactly (transformer_engine/common/cast/nvfp4/
// core_nvfp4.cuh and quantize_transpose_nvfp4.cuh, checked against TE at d0067d0, 2026-08; its
// PyTorch emulation custom_recipes/reference_nvfp4.py does the same operations). Every step is one
// fp32 operation rounded to nearest even, so a CUDA kernel doing the same operations in the same
// order (no FMA contraction) is bit-identical:
//
//   S     = min(2688.f / amax, FLT_MAX)   (2688 = 448 * 6; S = 1 if amax == 0 or S == 0)
//   bs    = e4m3_satfinite(min(block_amax * (S * (1.f / 6.f)), FLT_MAX))
//           (TE folds 1/6 into the global scale: rn(1/6), then rn(S * that), then rn(amax_b * it))
//   inv   = min(1.f / (e4m3_to_f32(bs) * (1.f / S)), FLT_MAX)
//           (TE's S_enc_b: through the global decode scale rn(1/S), not S / bs; a zero block scale
//           gives FLT_MAX, so non-zero values of such a block encode as +-6 and decode to +-0)
//   q     = e2m1_rn_satfinite(x * inv)    (the fp32 product rounded, then RNE to e2m1, +-6 at most)
// Decoding is ours (TE decodes from the stored amax, q * ((bs * amax) * (1.f / 2688)); the packed
// format here stores S, as the GEMM's global scale, so decode divides by it once):
//   x'    = (e2m1_to_f32(q) * e4m3_to_f32(bs)) / S
//           (the product is exact: <= 2 + 4 significant bits; the divide is the only rounding),
//           then f32_to_bf16(x') for bf16 output (a second rounding, part of the definition).
float nvfp4_global_scale(float amax);
uint8_t nvfp4_block_scale(float block_amax, float global_scale);  // the e4m3 code
float nvfp4_block_encode_scale(uint8_t block_scale, float global_scale);  // inv (FLT_MAX when bs == 0)
uint8_t nvfp4_e2m1_rn(float v);  // f32_to_e2m1 for non-NaN v (the fast path nvfp4_encode uses)
uint8_t nvfp4_encode(float x, float encode_scale);  // the e2m1 code of x * encode_scale
float nvfp4_decode(uint8_t code, uint8_t block_scale, float global_scale);

// A packed stack of G matrices [K, N] (the MAGI-2 expert layout [G, K, N], stored [in, out], so
// K = the GEMM reduction = dim 1). Layout, chosen K-major like the B operand of an NVFP4 tensor-core
// GEMM (the swizzled scale layout of the kernels can be derived from it later):
//   values        U8      [G, N, K/2]   byte (g, n, j) = code(k = 2j) | code(k = 2j + 1) << 4
//   block_scales  F8_E4M3 [G, N, K/16]  scale (g, n, b) covers k in [16b, 16b + 16) of column n
//   global_scales F32     [G]           S of expert g (the encode scale: decode divides by it)
// One global scale per expert matrix (not per stacked tensor), so one large expert does not cost
// the others their range and an expert range can be dequantised alone. A 2-D [K, N] input is G = 1.
// Memory: 4 bits + 8 bits / 16 + 32 bits / (K N) per weight, about 4.5 bits.
struct Nvfp4Matrix {
  Tensor values;
  Tensor block_scales;
  Tensor global_scales;
  Shape shape;         // the original shape: [G, K, N] or [K, N]
  int reduce_dim = 1;  // the blocked dimension of `shape` (always ndim - 2)

  int64_t groups() const { return shape.size() == 3 ? shape[0] : 1; }
  int64_t k() const { return shape[shape.size() - 2]; }
  int64_t n() const { return shape.back(); }
};

// w: F32 or BF16, [G, K, N] (reduce_dim 1) or [K, N] (reduce_dim 0). K must be a multiple of 16
// (no padding: the MAGI-2 expert widths are), and w must be finite; otherwise BadInput.
Nvfp4Matrix quantize_nvfp4(const Tensor& w, int reduce_dim);

// Experts [g0, g1) (g1 < 0: to the end) as F32 or BF16 in the original layout: [g1 - g0, K, N]
// ([K, N] for a 2-D input dequantised whole).
Tensor dequantize_nvfp4(const Nvfp4Matrix& m, DType out, int64_t g0 = 0, int64_t g1 = -1);

// dequantize(quantize(w)) in bf16, computed directly on the [.., K, N] layout without packing
// (an independent path: the tests check it against pack -> dequantise, bit for bit).
Tensor fake_quantize_nvfp4(const Tensor& w, int reduce_dim = -1);

}  // namespace avdit::quant
