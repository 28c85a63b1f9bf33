// cuBLASLt plans cached per problem (see gemm.h). Row-major D = A B^T is column-major D^T = B A^T:
// cuBLASLt's A operand is the weight ([K, N] column-major read transposed, or [N, K] as is when
// b_kn), its B operand the activations ([K, M] column-major with leading dimension lda).
#include "backend/cuda/gemm.h"

#include <algorithm>

namespace avdit::cuda {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default:
      throw BadInput(fmt::format("GEMM: dtype {} not supported (F32, BF16, F16)", dtype_name(t)));
  }
}

// The largest power of two (up to 256) dividing the address: cuBLASLt assumes 256-byte aligned
// operands unless told, and weight slices (slice_rows) can start anywhere.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

template <class T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  AVDIT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

struct Pref {
  cublasLtMatmulPreference_t p = nullptr;
  Pref(uint64_t workspace, uint32_t aa, uint32_t ab, uint32_t ac, uint32_t ad, bool reduced) {
    AVDIT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
    // Split-K partial sums in fp32 only, unless reduced-precision reductions are allowed.
    set_pref<uint32_t>(p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                       reduced ? static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_MASK)
                               : static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
    set_pref<uint64_t>(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace);
    set_pref<uint32_t>(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, aa);
    set_pref<uint32_t>(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, ab);
    set_pref<uint32_t>(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, ac);
    set_pref<uint32_t>(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, ad);
  }
  ~Pref() { cublasLtMatmulPreferenceDestroy(p); }
};

}  // namespace

GemmPlanner::~GemmPlanner() {
  for (auto& [key, p] : plans_) {
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.op) cublasLtMatmulDescDestroy(p.op);
  }
}

GemmPlanner::Plan& GemmPlanner::plan(const GemmProblem& p, const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan& pl = plans_[key];
  AVDIT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&pl.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = p.b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  AVDIT_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  AVDIT_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (p.bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    AVDIT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  }
  const auto uM = static_cast<uint64_t>(p.M), uN = static_cast<uint64_t>(p.N),
             uK = static_cast<uint64_t>(p.K);
  if (p.b_kn)
    AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl.a, cuda_type(p.in), uN, uK, p.N));
  else
    AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl.a, cuda_type(p.in), uK, uN, p.K));
  AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl.b, cuda_type(p.in), uK, uM, p.lda));
  AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl.c, cuda_type(p.out), uN, uM, p.ldd));
  const Pref pref(dev_.workspace_bytes(), std::get<10>(key), std::get<11>(key), std::get<12>(key),
                  std::get<13>(key), std::get<14>(key));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(dev_.lt(), pl.op, pl.a, pl.b, pl.c, pl.c,
                                                           pref.p, 1, &result, &found);
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) AVDIT_CUBLAS_CHECK(st);
  if (found > 0) {
    pl.algo = result.algo;
    pl.has_algo = true;
  }
  return pl;
}

void GemmPlanner::run(const GemmProblem& p) {
  AVDIT_CHECK(p.lda >= p.K && p.ldd >= p.N, "GEMM: leading dimensions {} / {} for K {} N {}", p.lda,
              p.ldd, p.K, p.N);
  AVDIT_REQUIRE(p.out == DType::F32 || p.out == p.in, "GEMM: output {} for {} inputs",
                dtype_name(p.out), dtype_name(p.in));
  AVDIT_REQUIRE(p.M <= 0x7fffffff && p.N <= 0x7fffffff && p.K <= 0x7fffffff,
                "GEMM: [{}, {}] x [{}, {}] too large", p.M, p.K, p.N, p.K);
  if (p.M == 0 || p.N == 0) return;
  const Key key{p.M,
                p.N,
                p.K,
                p.lda,
                p.ldd,
                static_cast<int>(p.in),
                static_cast<int>(p.out),
                p.b_kn,
                p.bias != nullptr,
                p.c != nullptr,
                alignment_of(p.b),
                alignment_of(p.a),
                alignment_of(p.c ? p.c : p.d),
                alignment_of(p.d),
                p.reduced_precision_reduction};
  Plan& pl = plan(p, key);
  if (!pl.has_algo) return fallback(p);
  if (candidates_ > 0 && !pl.tuned && !capturing_ && p.M >= min_rows_ &&
      (p.c == nullptr || p.c != p.d))
    tune(p, pl);
  if (p.bias)
    AVDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &p.bias, sizeof(p.bias)));
  const float alpha = 1.f, beta = p.c ? 1.f : 0.f;
  const void* c = p.c ? p.c : p.d;
  AVDIT_CUBLAS_CHECK(cublasLtMatmul(dev_.lt(), pl.op, &alpha, p.b, pl.a, p.a, pl.b, &beta, c, pl.c,
                                    p.d, pl.c, &pl.algo, dev_.workspace(), dev_.workspace_bytes(),
                                    dev_.stream()));
}

void GemmPlanner::fallback(const GemmProblem& p) {
  // No cuBLASLt kernel for these sizes / alignments (odd K with half types can do this):
  // cublasGemmEx takes any leading dimension. fp32 result, then bias, C and the output cast in one
  // pass.
  const float alpha = 1.f, beta = 0.f;
  StreamBuffer y(dev_.stream(), static_cast<size_t>(p.M * p.N) * sizeof(float));
  AVDIT_CUBLAS_CHECK(cublasGemmEx(
      dev_.blas(), p.b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(p.N),
      static_cast<int>(p.M), static_cast<int>(p.K), &alpha, p.b, cuda_type(p.in),
      static_cast<int>(p.b_kn ? p.N : p.K), p.a, cuda_type(p.in), static_cast<int>(p.lda), &beta,
      y.p, CUDA_R_32F, static_cast<int>(p.N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  gemm_epilogue(dev_.stream(), static_cast<const float*>(y.p), p.bias, p.c, p.d, p.out, p.M, p.N,
                p.ldd);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void GemmPlanner::tune(const GemmProblem& p, Plan& pl) {
  pl.tuned = true;
  const Pref pref(dev_.workspace_bytes(), alignment_of(p.b), alignment_of(p.a),
                  alignment_of(p.c ? p.c : p.d), alignment_of(p.d), p.reduced_precision_reduction);
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(candidates_));
  int found = 0;
  if (p.bias)
    AVDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &p.bias, sizeof(p.bias)));
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(dev_.lt(), pl.op, pl.a, pl.b, pl.c, pl.c,
                                                           pref.p, candidates_, res.data(), &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return;  // run() keeps the plan's own choice
  cudaEvent_t e0, e1;
  AVDIT_CUDA_CHECK(cudaEventCreate(&e0));
  AVDIT_CUDA_CHECK(cudaEventCreate(&e1));
  const float alpha = 1.f, beta = p.c ? 1.f : 0.f;
  const void* c = p.c ? p.c : p.d;
  auto launch = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(dev_.lt(), pl.op, &alpha, p.b, pl.a, p.a, pl.b, &beta, c, pl.c, p.d, pl.c,
                          &algo, dev_.workspace(), dev_.workspace_bytes(), dev_.stream());
  };
  TuneRecord rec{p.M, p.N, p.K, 0, 0, 0, 0};
  float best = -1;
  for (int i = 0; i < found; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    if (launch(res[i].algo) != CUBLAS_STATUS_SUCCESS)
      continue;  // warm-up; skip a candidate that fails
    AVDIT_CUDA_CHECK(cudaEventRecord(e0, dev_.stream()));
    for (int r = 0; r < 3; ++r) AVDIT_CUBLAS_CHECK(launch(res[i].algo));
    AVDIT_CUDA_CHECK(cudaEventRecord(e1, dev_.stream()));
    AVDIT_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= 3;
    ++rec.tried;
    if (i == 0) rec.first_ms = ms;
    // Another candidate must beat the heuristic's first by 2% (timing noise is ~1%): the choice
    // stays the same from run to run unless there is a real difference to gain.
    if (best < 0 || ms < (rec.chosen == 0 ? 0.98f : 1.0f) * best) {
      best = ms;
      rec.chosen = i;
      pl.algo = res[i].algo;
      pl.has_algo = true;
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  rec.best_ms = std::max(best, 0.f);
  tune_log_.push_back(rec);
}

}  // namespace avdit::cuda
