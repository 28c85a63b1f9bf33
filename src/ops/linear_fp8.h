// FP8 (e4m3) linear: y = x · w^T where x and w are scaled to e4m3's range and rounded to e4m3
// (nearest even, saturating), the products of the e4m3 values summed in fp32 and the sum divided
// by the scales: what a Hopper FP8 GEMM with fp32 accumulation computes, up to the order of the
// sum. Two scalings (Fp8Scaling): per tensor (s = 448 / amax of all of x, of all of w) or per row
// (448 / amax of each token's row of x and of each output channel's row of w: cuBLASLt's
// outer-vector scales). w is quantized once (Fp8Weight), x at every call. This is issue 39's FP8
// option for the dense GEMMs; the CPU implementation measures its quality (`avdit score`); a CUDA
// path (cuBLASLt e4m3) is not written yet and the op says so.
#pragma once

#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace avdit::ops {

inline constexpr float kE4m3Max = 448.0f;

enum class Fp8Scaling { Tensor, Row };

struct Fp8Weight {
  Tensor codes;               // F8_E4M3 [N, K] on the host: e4m3(w * scale)
  std::vector<float> scales;  // one (Tensor) or N (Row): 448 / amax (1 where all are zero)
  Fp8Scaling scaling = Fp8Scaling::Tensor;
};

// Quantizes a weight [N, K] (any float dtype, host or a context's) once.
Fp8Weight quantize_fp8(Context& ctx, const Tensor& w, Fp8Scaling scaling);

// 448 / amax over n values' finite entries (1 when all are zero).
float fp8_scale(const float* x, int64_t n);

// "tensor" or "row" (BadInput otherwise, naming `what`).
Fp8Scaling parse_fp8_scaling(const std::string& s, const char* what);

namespace cpu {
void linear_fp8(const Tensor& x, const Fp8Weight& w, Tensor& y);
}
namespace cuda {
void linear_fp8(CudaContext& c, const Tensor& x, const Fp8Weight& w, Tensor& y);
}

// y [..., N] = x [..., K] · w^T through e4m3, y in `out`.
inline Tensor linear_fp8(Context& ctx, const Tensor& x, const Fp8Weight& w, DType out) {
  Shape shape = x.shape();
  shape.back() = w.codes.size(0);
  Tensor y = ctx.empty(shape, out);
  AVDIT_OP(ctx, linear_fp8, x, w, y);
  return y;
}

}  // namespace avdit::ops
