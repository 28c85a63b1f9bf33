// gemm_rows through cublasGemmEx (see gemm.h). Row-major operands are column-major transposes: the call is
// y^T [N, M] = op(W) [N, K] . x^T [K, M], with op(W) = W^T for a row-major [N, K] weight.
#include "backend/cuda/models/magi2/gemm.h"

namespace avdit::cuda::magi2 {
namespace {

cudaDataType_t gemm_type(DType t, const char* what) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    default: throw BadInput(fmt::format("magi2 gemm: {} has dtype {} (F32 or BF16)", what, dtype_name(t)));
  }
}

}  // namespace

void gemm_rows(Device& dev, const Tensor& x, const Tensor& w, bool w_kn, Tensor& y, int64_t row_begin,
               int64_t row_end, float beta) {
  require_cuda(x, "magi2 gemm x");
  require_cuda(w, "magi2 gemm weight");
  require_cuda(y, "magi2 gemm y");
  AVDIT_REQUIRE(w.ndim() == 2 && x.ndim() == 2 && y.ndim() == 2, "magi2 gemm: x {} w {} y {} (2-D expected)",
                x.shape_str(), w.shape_str(), y.shape_str());
  const int64_t K = w_kn ? w.size(0) : w.size(1), N = w_kn ? w.size(1) : w.size(0);
  const int64_t ldx = x.size(1), ldy = y.size(1), M = row_end - row_begin;
  AVDIT_REQUIRE(K <= ldx && N <= ldy && 0 <= row_begin && row_begin <= row_end && row_end <= x.size(0) &&
                    row_end <= y.size(0),
                "magi2 gemm: rows [{}, {}) of x {} . w {}{} into y {}", row_begin, row_end, x.shape_str(),
                w.shape_str(), w_kn ? "" : "^T", y.shape_str());
  AVDIT_REQUIRE(x.dtype() == w.dtype(), "magi2 gemm: x {} and weight {} dtypes differ ({} vs {})", x.shape_str(),
                w.shape_str(), dtype_name(x.dtype()), dtype_name(w.dtype()));
  AVDIT_REQUIRE(y.dtype() == DType::F32 || y.dtype() == x.dtype(), "magi2 gemm: {} output from {} inputs",
                dtype_name(y.dtype()), dtype_name(x.dtype()));
  AVDIT_REQUIRE(K <= 0x7fffffff && N <= 0x7fffffff && M <= 0x7fffffff && ldx <= 0x7fffffff && ldy <= 0x7fffffff,
                "magi2 gemm: sizes above 2^31");
  if (M == 0 || N == 0) return;
  const cudaDataType_t in = gemm_type(x.dtype(), "x"), out = gemm_type(y.dtype(), "y");
  const int64_t xe = dtype_nbytes(x.dtype(), 1), ye = dtype_nbytes(y.dtype(), 1);
  const char* xp = static_cast<const char*>(x.raw()) + row_begin * ldx * xe;
  char* yp = static_cast<char*>(device_ptr(y)) + row_begin * ldy * ye;
  const float alpha = 1.f;
  AVDIT_CUBLAS_CHECK(cublasGemmEx(dev.blas(), w_kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                                  static_cast<int>(M), static_cast<int>(K), &alpha, w.raw(), in,
                                  static_cast<int>(w_kn ? N : K), xp, in, static_cast<int>(ldx), &beta, yp, out,
                                  static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace avdit::cuda::magi2
