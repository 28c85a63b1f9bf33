// y[M, N] = x[M, K] · w[N, K]^T (+ bias[N]) through cuBLASLt into a caller-owned output: the H3
// forward writes every GEMM result into its preallocated activation arena, so no GEMM allocates
// (cudaMalloc/cudaFree would synchronise the device inside the block loop). fp32 accumulation
// (CUBLAS_COMPUTE_32F: no TF32, no reduced-precision reductions). The heuristic's choice is cached
// per shape, so repeated blocks cost one cublasLtMatmul call each.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

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

  // Algorithm selection for one shape: times up to `candidates` of cuBLASLt's heuristic results on
  // these operands (the caller's scratch: their values are read, y is overwritten) and keeps the
  // fastest for every later run() of the shape. The heuristic's first pick is not always the
  // fastest at the H3 shapes (rows not a multiple of the tile, N = 5376 = 42 x 128). Synchronises
  // the device: call it while planning, never inside a forward.
  void tune(const Mat& x, const Mat& w, void* y, DType y_dtype, int candidates);
  struct TuneRecord {
    int64_t m = 0, n = 0, k = 0;
    int tried = 0, chosen = 0;  // index of the chosen candidate in the heuristic's order
    float first_ms = 0, best_ms = 0;
  };
  const std::vector<TuneRecord>& tune_log() const { return tune_log_; }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool has_algo = false;
    bool tuned = false;
  };
  // (M, N, K, in dtype, out dtype, bias)
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool>;
  Plan& plan(const Key& key);

  Device& dev_;
  std::map<Key, Plan> plans_;
  std::vector<TuneRecord> tune_log_;
};

}  // namespace avdit::cuda::h3
