// y[M, N] = x[M, K] · w[N, K]^T (+ bias[N]) through cuBLASLt into a caller-owned output: the H3
// forward writes every GEMM result into its preallocated activation arena, so no GEMM allocates
// (cudaMalloc/cudaFree would synchronise the device inside the block loop). fp32 accumulation
// (CUBLAS_COMPUTE_32F: no TF32, no reduced-precision reductions). The heuristic's choice is cached
// per shape, so repeated blocks cost one cublasLtMatmul call each.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "backend/cuda/device.h"

namespace avdit::cuda::h3 {

// A row-major matrix view on the device.
struct Mat {
  const void* p = nullptr;
  int64_t rows = 0, cols = 0;
  DType dtype = DType::F32;
};

class Gemm {
 public:
  explicit Gemm(Device& dev) : dev_(dev) {}
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x and w of one dtype (F32 or BF16); bias (optional) and y in y_dtype (F32, or BF16 with BF16
  // inputs). BadInput on shape or dtype mismatches.
  void run(const Mat& x, const Mat& w, const void* bias, void* y, DType y_dtype);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool has_algo = false;
  };
  // (M, N, K, in dtype, out dtype, bias)
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool>;
  Plan& plan(const Key& key);

  Device& dev_;
  std::map<Key, Plan> plans_;
};

}  // namespace avdit::cuda::h3
