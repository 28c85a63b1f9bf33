// Every GEMM of the CUDA backend: cuBLASLt with fp32 accumulation (CUBLAS_COMPUTE_32F: no TF32, no
// reduced-precision reductions), one plan per problem shape kept for the context's lifetime (the
// heuristic's query is host work), and optionally the fastest of several heuristic candidates,
// timed the first time a large shape runs (the heuristic's first pick is not always the fastest,
// e.g. at rows that are not a multiple of the tile). Timed choices are opt-in: a choice made by
// timing can differ between processes, and so would the output bits.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "backend/cuda/device.h"

namespace avdit::cuda {

// D[M, N] = A[M, K] · op(B) (+ bias[N]) (+ C[M, N]) in row-major terms. A has leading dimension lda
// (>= K); B is W [N, K] (b_kn false: a linear's weight) or [K, N] (b_kn true); C (when set) and D
// have leading dimension ldd. A and B share one dtype (F32, BF16, F16); bias and C are in D's
// dtype; D is F32 or the input dtype.
struct GemmProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldd = 0;
  DType in = DType::F32, out = DType::F32;
  bool b_kn = false;
  // Whether cuBLASLt may add split-K partial sums in D's dtype (its in-place and output-type
  // reduction schemes). Off: only fp32 (compute type) reductions, the house rule; the fp16
  // recipe's `reduction` fix is this rule, switchable for study.
  bool reduced_precision_reduction = false;
};

class GemmPlanner {
 public:
  explicit GemmPlanner(Device& dev) : dev_(dev) {}
  ~GemmPlanner();
  GemmPlanner(const GemmPlanner&) = delete;
  GemmPlanner& operator=(const GemmPlanner&) = delete;

  void run(const GemmProblem& p);

  // Timed choice: the first run of each shape with at least min_rows rows times up to `candidates`
  // heuristic results (three runs each; another must beat the first by 2%) and keeps the fastest.
  // 0 (the default): the heuristic's first pick, no timing. Never while a graph is being captured.
  void set_timed_choice(int candidates, int64_t min_rows = 4096) {
    candidates_ = candidates;
    min_rows_ = min_rows;
  }
  void set_capturing(bool on) { capturing_ = on; }

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
    bool has_algo = false, tuned = false;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, int, bool, bool, bool,
                         uint32_t, uint32_t, uint32_t, uint32_t, bool>;
  Plan& plan(const GemmProblem& p, const Key& key);
  void tune(const GemmProblem& p, Plan& plan);
  void fallback(const GemmProblem& p);

  Device& dev_;
  std::map<Key, Plan> plans_;
  std::vector<TuneRecord> tune_log_;
  int candidates_ = 0;
  int64_t min_rows_ = 4096;
  bool capturing_ = false;
};

// The fallback's epilogue (gemm_epilogue.cu): d[m, n] = y[m, n] + bias[n] + c[m, n], y F32 [M, N]
// contiguous, bias / c / d in d's dtype (bias, c may be null), c and d with leading dimension ldd.
void gemm_epilogue(cudaStream_t st, const float* y, const void* bias, const void* c, void* d,
                   DType dtype, int64_t M, int64_t N, int64_t ldd);

}  // namespace avdit::cuda
