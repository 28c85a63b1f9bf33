// FP8 (e4m3) linear: y = x · w^T where x and w are scaled to e4m3's range and rounded to e4m3
// (nearest even, saturating), the products of the e4m3 values summed in fp32 and the sum multiplied
// by the inverse scales: what a Hopper FP8 GEMM with fp32 accumulation computes, up to the order
// of the sum. Two scalings (Fp8Scaling): per tensor (s = 448 / amax of all of x, of all of w) or
// per row (448 / amax of each token's row of x and of each output channel's row of w: cuBLASLt's
// outer-vector scales). w is quantized once (Fp8Weight), x at every call. This is issue 39's FP8
// option for the dense GEMMs: on the CPU the definition that `avdit score` measures, on the GPU
// cuBLASLt's e4m3 GEMM (a plain kernel where cuBLASLt has none for the shape), the codes and
// scales the same bits as the CPU's.
#pragma once

#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace avdit::ops {

inline constexpr float kE4m3Max = 448.0f;

enum class Fp8Scaling { Tensor, Row };

struct Fp8Weight {
  Tensor codes;    // F8_E4M3 [N, K]: e4m3(w * scale), on the device of the context that made it
  Tensor scales;   // F32 [1] (Tensor) or [N] (Row): 448 / amax (1 where all are zero); same device
  Tensor dequant;  // F32, 1 / scales: what the GEMM multiplies its sums by
  Fp8Scaling scaling = Fp8Scaling::Tensor;
};

namespace cpu {
Fp8Weight quantize_fp8(const Tensor& w, Fp8Scaling scaling);
void linear_fp8(const Tensor& x, const Fp8Weight& w, Tensor& y);
}  // namespace cpu
namespace cuda {
Fp8Weight quantize_fp8(CudaContext& c, const Tensor& w, Fp8Scaling scaling);
void linear_fp8(CudaContext& c, const Tensor& x, const Fp8Weight& w, Tensor& y);
}  // namespace cuda

// Quantizes a weight [N, K] (F32, BF16 or F16, on ctx) once.
inline Fp8Weight quantize_fp8(Context& ctx, const Tensor& w, Fp8Scaling scaling) {
  return AVDIT_OP(ctx, quantize_fp8, w, scaling);
}

// 448 / amax over n values' finite entries (1 when all are zero).
float fp8_scale(const float* x, int64_t n);

// "tensor" or "row" (BadInput otherwise, naming `what`).
Fp8Scaling parse_fp8_scaling(const std::string& s, const char* what);

// y [..., N] = x [..., K] · w^T through e4m3, y in `out`.
inline Tensor linear_fp8(Context& ctx, const Tensor& x, const Fp8Weight& w, DType out) {
  Shape shape = x.shape();
  shape.back() = w.codes.size(0);
  Tensor y = ctx.empty(shape, out);
  AVDIT_OP(ctx, linear_fp8, x, w, y);
  return y;
}

}  // namespace avdit::ops
