// linear and matmul on the CPU through OpenBLAS sgemm on float32 operands; non-F32 weights are
// widened in blocks of rows, so a memory-mapped BF16 weight is never copied whole.
#include <algorithm>
#include <vector>

#include "ops/cpu/common.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/linear.h"

namespace avdit::ops::cpu {
namespace {
constexpr int64_t kRowBlock = 512;
}

void linear(const Tensor& x_in, const Tensor& w, const Tensor* bias, const Tensor* acc, Tensor& y) {
  AVDIT_CHECK(w.ndim() == 2, "linear: weight must be [out, in], got {}", w.shape_str());
  const int64_t in = w.size(1), out = w.size(0);
  AVDIT_CHECK(x_in.ndim() >= 1 && x_in.size(-1) == in, "linear: x {} does not match weight {}",
              x_in.shape_str(), w.shape_str());
  const int64_t m = x_in.numel() / std::max<int64_t>(in, 1);
  AVDIT_CHECK(y.numel() == m * out, "linear: output {} for x {} and weight {}", y.shape_str(),
              x_in.shape_str(), w.shape_str());
  const Tensor x = f32(x_in);
  // The fp32 result: y itself when it is F32 (acc may alias it: read below before the GEMM
  // overwrites).
  Tensor accf;
  if (acc) {
    AVDIT_CHECK(acc->numel() == m * out, "linear: acc {} for an output of {}", acc->shape_str(),
                y.shape_str());
    accf = acc->to_f32().clone();
  }
  Tensor y32 = y.dtype() == DType::F32 ? y : Tensor::empty({m, out}, DType::F32);
  float* py = y32.f32();
  if (m > 0 && out > 0) {
    if (w.dtype() == DType::F32) {
      sgemm_fixed(true, m, out, in, 1.f, x.f32(), in, w.f32(), in, 0.f, py, out);
    } else {
      std::vector<float> block(static_cast<size_t>(std::min(out, kRowBlock) * in));
      for (int64_t r0 = 0; r0 < out; r0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, out - r0);
        convert(static_cast<const char*>(w.raw()) + dtype_nbytes(w.dtype(), r0 * in), w.dtype(),
                block.data(), DType::F32, rows * in);
        sgemm_fixed(true, m, rows, in, 1.f, x.f32(), in, block.data(), in, 0.f, py + r0, out);
      }
    }
  } else if (m > 0) {
    std::fill(py, py + m * out, 0.f);
  }
  if (bias) {
    AVDIT_CHECK(bias->numel() == out, "linear: bias {} for {} outputs", bias->shape_str(), out);
    const Tensor b = f32(*bias);
    const float* pb = b.f32();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < out; ++j) py[i * out + j] += pb[j];
  }
  if (acc) {
    const float* pa = accf.f32();
    for (int64_t i = 0; i < m * out; ++i) py[i] += pa[i];
  }
  if (y32.raw() != y.raw()) store(y, py);
}

void matmul(const Tensor& a_in, const Tensor& b_in, Tensor& c) {
  AVDIT_CHECK(a_in.ndim() == 2 && b_in.ndim() == 2 && a_in.size(1) == b_in.size(0),
              "matmul: {} x {}", a_in.shape_str(), b_in.shape_str());
  const Tensor a = f32(a_in), b = f32(b_in);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  AVDIT_CHECK(c.numel() == m * n, "matmul: output {} for {} x {}", c.shape_str(), a.shape_str(),
              b.shape_str());
  Tensor c32 = c.dtype() == DType::F32 ? c : Tensor::empty({m, n}, DType::F32);
  if (m > 0 && n > 0) sgemm_fixed(false, m, n, k, 1.f, a.f32(), k, b.f32(), n, 0.f, c32.f32(), n);
  if (c32.raw() != c.raw()) store(c, c32.f32());
}

}  // namespace avdit::ops::cpu
