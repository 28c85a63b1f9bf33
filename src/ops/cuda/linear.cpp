// linear and matmul on the device through the context's GEMM planner (backend/cuda/gemm.h).
#include "ops/linear.h"
#include "backend/cuda/context.h"
#include "ops/activation.h"
#include "ops/rows.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;

// The product in fp32-or-input dtype into y (cast through a temporary when y's dtype is neither).
void gemm(CudaContext& c, const Tensor& x_in, const Tensor& w_in, bool w_kn, const Tensor* bias,
          const Tensor* acc, Tensor& y) {
  c.require_here(x_in, "linear x");
  c.require_here(w_in, "linear weight");
  AVDIT_CHECK(w_in.ndim() == 2, "linear: weight must be 2-D, got {}", w_in.shape_str());
  const int64_t K = w_kn ? w_in.size(0) : w_in.size(1), N = w_kn ? w_in.size(1) : w_in.size(0);
  AVDIT_CHECK(x_in.ndim() >= 1 && x_in.size(-1) == K, "linear: x {} does not match weight {}",
              x_in.shape_str(), w_in.shape_str());
  const int64_t M = K ? x_in.numel() / K : 0;
  AVDIT_CHECK(y.numel() == M * N, "linear: output {} for x {} and weight {}", y.shape_str(),
              x_in.shape_str(), w_in.shape_str());
  // cuBLASLt multiplies equal input types only; mixed operands are widened to F32, which is exact.
  Tensor x = x_in, w = w_in;
  if (x.dtype() != w.dtype()) {
    x = ops::cast(c, x, DType::F32);
    w = ops::cast(c, w, DType::F32);
  }
  const DType in = x.dtype();
  const DType out = (y.dtype() == DType::F32 || y.dtype() == in) ? y.dtype() : DType::F32;
  Tensor d = out == y.dtype() ? y : c.empty(y.shape(), out);
  Tensor b, a;
  if (bias) {
    c.require_here(*bias, "linear bias");
    AVDIT_CHECK(bias->numel() == N, "linear: bias {} for {} outputs", bias->shape_str(), N);
    b = ops::cast(c, *bias,
                  out);  // the epilogue reads the bias in the output type (as torch's bf16 linear)
  }
  if (acc) {
    c.require_here(*acc, "linear acc");
    AVDIT_CHECK(acc->numel() == M * N, "linear: acc {} for an output of {}", acc->shape_str(),
                y.shape_str());
    a = ops::cast(c, *acc, out);
  }
  ::avdit::cuda::GemmProblem p;
  p.a = x.raw();
  p.b = w.raw();
  p.bias = bias ? b.raw() : nullptr;
  p.c = acc ? a.raw() : nullptr;
  p.d = device_ptr(d);
  p.M = M;
  p.N = N;
  p.K = K;
  p.lda = K;
  p.ldd = N;
  p.in = in;
  p.out = out;
  p.b_kn = w_kn;
  c.gemm().run(p);
  if (d.raw() != y.raw()) ops::copy_(c, y, d);
}

}  // namespace

void linear(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* acc,
            Tensor& y) {
  gemm(c, x, w, false, bias, acc, y);
}

void matmul(CudaContext& c, const Tensor& a, const Tensor& b, Tensor& out) {
  AVDIT_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.size(1) == b.size(0), "matmul: {} x {}",
              a.shape_str(), b.shape_str());
  gemm(c, a, b, true, nullptr, nullptr, out);
}

}  // namespace avdit::ops::cuda
