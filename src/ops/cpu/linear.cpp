// linear and matmul on the CPU through sgemm_fixed (bit-identical for any thread count); non-F32
// weights are widened in blocks of rows so that a memory-mapped BF16 weight is never copied whole.
#include <algorithm>

#include "core/error.h"
#include "ops/cpu/gemm_fixed.h"
#include "ops/ops.h"

namespace avdit::ops {

namespace {
constexpr int64_t kRowBlock = 512;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  AVDIT_CHECK(x.dtype() == DType::F32, "linear: x must be F32, got {}", dtype_name(x.dtype()));
  AVDIT_CHECK(w.ndim() == 2, "linear: weight must be [out, in], got {}", w.shape_str());
  const int64_t in = w.size(1), out = w.size(0);
  AVDIT_CHECK(x.ndim() >= 1 && x.size(-1) == in, "linear: x {} does not match weight {}", x.shape_str(),
              w.shape_str());
  const int64_t m = x.numel() / in;
  Shape shape = x.shape();
  shape.back() = out;
  Tensor y = Tensor::empty(shape, DType::F32);
  float* py = y.f32();
  if (m > 0 && out > 0) {
    if (w.dtype() == DType::F32) {
      sgemm_fixed(true, m, out, in, 1.f, x.f32(), in, w.f32(), in, 0.f, py, out);
    } else {
      std::vector<float> block(static_cast<size_t>(std::min(out, kRowBlock) * in));
      for (int64_t r0 = 0; r0 < out; r0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, out - r0);
        convert(static_cast<const char*>(w.raw()) + dtype_nbytes(w.dtype(), r0 * in), w.dtype(), block.data(),
                DType::F32, rows * in);
        sgemm_fixed(true, m, rows, in, 1.f, x.f32(), in, block.data(), in, 0.f, py + r0, out);
      }
    }
  }
  if (bias) {
    AVDIT_CHECK(bias->numel() == out, "linear: bias {} for {} outputs", bias->shape_str(), out);
    const Tensor b = bias->to_f32();
    const float* pb = b.f32();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < out; ++j) py[i * out + j] += pb[j];
  }
  return y;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  AVDIT_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.size(1) == b.size(0), "matmul: {} x {}", a.shape_str(),
              b.shape_str());
  const Tensor bf = b.to_f32();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor c = Tensor::empty({m, n}, DType::F32);
  if (m > 0 && n > 0) sgemm_fixed(false, m, n, k, 1.f, a.f32(), k, bf.f32(), n, 0.f, c.f32(), n);
  return c;
}

}  // namespace avdit::ops
