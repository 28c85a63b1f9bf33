// linear through cuBLASLt: y[M, N] = x[M, K] · w[N, K]^T (+ bias) with CUBLAS_COMPUTE_32F (fp32
// accumulation, no TF32, no reduced-precision reductions). The checkpoint's row-major [N, K]
// weight is column-major [K, N], so the call is D = op(A)·B with A = w transposed, B = x.
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "backend/cuda/ops_cuda.h"

namespace avdit::cuda {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: throw BadInput(fmt::format("linear: dtype {} not supported (F32, BF16, F16)", dtype_name(t)));
  }
}

// The largest power of two (up to 256) dividing the address: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told, and weight slices (slice_rows) can start anywhere.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// cuBLASLt descriptors released on every path out of linear().
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

template <class T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  AVDIT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

// cuBLASLt's heuristic query is host work on every call (a search of its kernel catalogue), and its
// answer depends only on the problem (sizes, types, epilogue, alignments, workspace, GPU): asked once
// per problem and kept, the same algorithm without the query. (On the tiny models' steps the saving
// was inside the run-to-run noise on the H200: bench/NOTES.md, session 4.)
struct AlgoKey {
  int ordinal;
  int64_t M, N, K;
  DType in, out;
  bool bias, accumulate;  // accumulate: C = the residual, beta = 1
  uint32_t align_a, align_b, align_c, align_r;
  uint64_t workspace;
  auto tie() const {
    return std::tie(ordinal, M, N, K, in, out, bias, accumulate, align_a, align_b, align_c, align_r, workspace);
  }
  bool operator<(const AlgoKey& o) const { return tie() < o.tie(); }
};
struct AlgoChoice {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};
std::mutex algo_mu;
std::map<AlgoKey, AlgoChoice>& algo_cache() {
  static std::map<AlgoKey, AlgoChoice> cache;
  return cache;
}
constexpr size_t kAlgoCacheMax = 4096;  // distinct problems kept (cleared when full)

}  // namespace

Tensor linear(Device& dev, const Tensor& x, const Tensor& w, const Tensor* bias, DType out, const Tensor* residual) {
  require_cuda(x, "linear x");
  require_cuda(w, "linear weight");
  AVDIT_REQUIRE(w.ndim() == 2, "linear: weight must be [out, in], got {}", w.shape_str());
  const int64_t K = w.size(1), N = w.size(0);
  AVDIT_REQUIRE(x.ndim() >= 1 && x.size(-1) == K, "linear: x {} does not match weight {}", x.shape_str(),
                w.shape_str());
  AVDIT_REQUIRE(K > 0, "linear: empty inner dimension");
  AVDIT_REQUIRE(out == DType::F32 || out == DType::BF16 || out == DType::F16, "linear: output dtype {} not supported",
                dtype_name(out));
  const int64_t M = x.numel() / K;
  AVDIT_REQUIRE(M <= 0x7fffffff && N <= 0x7fffffff && K <= 0x7fffffff, "linear: x {} · w {} too large for one call",
                x.shape_str(), w.shape_str());
  cuda_type(x.dtype());
  cuda_type(w.dtype());
  // cuBLASLt multiplies equal input types only; mixed operands are widened to F32, which is exact.
  Tensor xa = x, wa = w;
  if (x.dtype() != w.dtype()) {
    if (x.dtype() != DType::F32) xa = cast(dev, x, DType::F32);
    if (w.dtype() != DType::F32) wa = cast(dev, w, DType::F32);
  }
  const DType in = xa.dtype();
  // Supported outputs with 32F compute: F32 always, or the input's own half type.
  const DType gemm_out = (out == DType::F32 || out == in) ? out : DType::F32;
  Tensor b;
  if (bias) {
    require_cuda(*bias, "linear bias");
    AVDIT_REQUIRE(bias->numel() == N, "linear: bias {} for {} outputs", bias->shape_str(), N);
    // The epilogue reads the bias in the output type (as PyTorch's bf16 linear does).
    b = bias->dtype() == gemm_out ? *bias : cast(dev, *bias, gemm_out);
  }
  Shape shape = x.shape();
  shape.back() = N;
  if (residual) {
    require_cuda(*residual, "linear residual");
    AVDIT_REQUIRE(residual->shape() == shape, "linear: residual {} for an output {}", residual->shape_str(),
                  shape_str(shape));
    if (residual->dtype() != gemm_out || gemm_out != out)  // not the GEMM's C: a separate add
      return add(dev, linear(dev, x, w, bias, out), cast(dev, *residual, out));
  }
  Tensor y = cuda_empty(dev, shape, gemm_out);
  if (M > 0 && N > 0) {
    LtCall call;
    AVDIT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    AVDIT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
    AVDIT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
    if (bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      const void* bias_ptr = b.raw();
      AVDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
      AVDIT_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)));
    }
    const auto uK = static_cast<uint64_t>(K), uN = static_cast<uint64_t>(N), uM = static_cast<uint64_t>(M);
    AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.a, cuda_type(in), uK, uN, K));  // w as [K, N] col-major
    AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.b, cuda_type(in), uK, uM, K));  // x as [K, M] col-major
    AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.c, cuda_type(gemm_out), uN, uM, N));  // y as [N, M]
    const uint32_t align_r = residual ? alignment_of(residual->raw()) : alignment_of(y.raw());
    const AlgoKey key{dev.ordinal(),          M,
                      N,                      K,
                      in,                     gemm_out,
                      bias != nullptr,        residual != nullptr,
                      alignment_of(wa.raw()), alignment_of(xa.raw()),
                      alignment_of(y.raw()),  align_r,
                      static_cast<uint64_t>(dev.workspace_bytes())};
    AlgoChoice choice;
    bool known = false;
    {
      std::lock_guard<std::mutex> lock(algo_mu);
      const auto it = algo_cache().find(key);
      if (it != algo_cache().end()) {
        choice = it->second;
        known = true;
      }
    }
    if (!known) {
      AVDIT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
      set_pref<uint64_t>(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, key.workspace);
      set_pref<uint32_t>(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
      set_pref<uint32_t>(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
      set_pref<uint32_t>(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_r);
      set_pref<uint32_t>(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(dev.lt(), call.op, call.a, call.b, call.c, call.c,
                                                               call.pref, 1, &result, &found);
      if (st == CUBLAS_STATUS_NOT_SUPPORTED) found = 0;  // "no algorithm" comes back either way
      else AVDIT_CUBLAS_CHECK(st);
      choice.found = found > 0;
      choice.algo = result.algo;
      std::lock_guard<std::mutex> lock(algo_mu);
      if (algo_cache().size() >= kAlgoCacheMax) algo_cache().clear();
      algo_cache().emplace(key, choice);
    }
    if (!choice.found) {
      // No cuBLASLt kernel for these sizes / alignments (odd K with half types can do this):
      // cublasGemmEx takes any leading dimension. fp32 result, then the bias and the output cast
      // in one pass.
      const float alpha = 1.f, beta = 0.f;
      Tensor y32 = cuda_empty(dev, shape, DType::F32);
      AVDIT_CUBLAS_CHECK(cublasGemmEx(dev.blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                      static_cast<int>(K), &alpha, wa.raw(), cuda_type(in), static_cast<int>(K),
                                      xa.raw(), cuda_type(in), static_cast<int>(K), &beta, device_ptr(y32), CUDA_R_32F,
                                      static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      const Tensor yb = add_bias(dev, y32, bias, out);
      return residual ? add(dev, yb, *residual) : yb;
    }
    const float alpha = 1.f, beta = residual ? 1.f : 0.f;
    const void* c = residual ? residual->raw() : y.raw();
    AVDIT_CUBLAS_CHECK(cublasLtMatmul(dev.lt(), call.op, &alpha, wa.raw(), call.a, xa.raw(), call.b, &beta, c, call.c,
                                      device_ptr(y), call.c, &choice.algo, dev.workspace(), dev.workspace_bytes(),
                                      dev.stream()));
  }
  return gemm_out == out ? y : cast(dev, y, out);
}

}  // namespace avdit::cuda
