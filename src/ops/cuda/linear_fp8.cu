// The FP8 linear on the GPU (see ops/linear_fp8.h). Quantization: one kernel per row scale (a block
// reduces the row's finite amax, then writes its codes) or two for a tensor scale (amax by an
// atomic max over the float bits, then the codes); the scale is 448 / amax in fp32 and the codes
// cvt.rn.satfinite e4m3 of x * scale: the CPU's bits. The GEMM is cuBLASLt's e4m3 x e4m3 with fp32
// accumulation (fast accumulation off) and the inverse scales as its A / B scales (scalar or outer
// vector; without an outer-vector kernel, unit scales into F32 and a scaling pass); where cuBLASLt
// has no kernel (K or N not a multiple of 16, or no heuristic result) a plain tiled kernel decodes
// the codes and sums in fp32, and says so once on stderr for products above 2^24 outputs.
#include <cublasLt.h>
#include <cuda_fp8.h>

#include <map>
#include <mutex>
#include <tuple>

#include "backend/cuda/context.h"
#include "ops/cuda/block_sum.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/linear_fp8.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::block_reduce;
using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::from_e4m3;
using ::avdit::cuda::load_elt;
using ::avdit::cuda::store_elt;
using ::avdit::cuda::to_e4m3;

constexpr int kQuantThreads = 256;

__device__ __forceinline__ float finite_abs(float v) { return isfinite(v) ? fabsf(v) : 0.f; }

__device__ __forceinline__ float scale_of(float amax) { return amax > 0.f ? 448.f / amax : 1.f; }

// One block per row: amax, scale, codes.
__global__ void __launch_bounds__(kQuantThreads)
    quantize_rows_kernel(const void* x, Elt t, int64_t K, uint8_t* codes, float* scales,
                         float* dequant) {
  __shared__ float scratch[kQuantThreads / 32];
  const int64_t row = blockIdx.x;
  float m = 0.f;
  for (int64_t k = threadIdx.x; k < K; k += kQuantThreads)
    m = fmaxf(m, finite_abs(load_elt(x, t, row * K + k)));
  m = block_reduce<kQuantThreads>(m, scratch, [](float a, float b) { return fmaxf(a, b); });
  const float s = scale_of(m);
  if (threadIdx.x == 0) {
    scales[row] = s;
    dequant[row] = 1.f / s;
  }
  for (int64_t k = threadIdx.x; k < K; k += kQuantThreads)
    codes[row * K + k] = to_e4m3(load_elt(x, t, row * K + k) * s);
}

// The amax of all n values into *amax_bits (zeroed before): non-negative floats order as their
// bits.
__global__ void __launch_bounds__(kQuantThreads)
    amax_kernel(const void* x, Elt t, int64_t n, unsigned* amax_bits) {
  __shared__ float scratch[kQuantThreads / 32];
  float m = 0.f;
  for (int64_t i = ::avdit::cuda::first_of(); i < n; i += ::avdit::cuda::stride_of())
    m = fmaxf(m, finite_abs(load_elt(x, t, i)));
  m = block_reduce<kQuantThreads>(m, scratch, [](float a, float b) { return fmaxf(a, b); });
  if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(m));
}

__global__ void __launch_bounds__(kQuantThreads)
    quantize_tensor_kernel(const void* x, Elt t, int64_t n, const unsigned* amax_bits,
                           uint8_t* codes, float* scales, float* dequant) {
  const float s = scale_of(__uint_as_float(*amax_bits));
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    scales[0] = s;
    dequant[0] = 1.f / s;
  }
  for (int64_t i = ::avdit::cuda::first_of(); i < n; i += ::avdit::cuda::stride_of())
    codes[i] = to_e4m3(load_elt(x, t, i) * s);
}

// x [rows, K] -> codes, and scales / dequant of `rows` (per row) or 1 (per tensor) floats.
void quantize(CudaContext& c, const Tensor& x, int64_t rows, int64_t K, bool per_row, Tensor& codes,
              Tensor& scales, Tensor& dequant) {
  const Elt t = elt_of(x, "FP8 quantize input");
  auto* cp = static_cast<uint8_t*>(device_ptr(codes));
  auto* sp = static_cast<float*>(device_ptr(scales));
  auto* dp = static_cast<float*>(device_ptr(dequant));
  if (rows == 0 || K == 0) return;
  if (per_row) {
    quantize_rows_kernel<<<static_cast<unsigned>(rows), kQuantThreads, 0, c.stream()>>>(
        x.raw(), t, K, cp, sp, dp);
  } else {
    Tensor amax = c.zeros({1}, DType::I32);
    auto* ap = static_cast<unsigned*>(device_ptr(amax));
    const int64_t n = rows * K;
    const unsigned blocks = std::min<unsigned>(::avdit::cuda::grid_for(n), 1024);
    amax_kernel<<<blocks, kQuantThreads, 0, c.stream()>>>(x.raw(), t, n, ap);
    AVDIT_CUDA_CHECK_LAUNCH();
    quantize_tensor_kernel<<<::avdit::cuda::grid_for(n), kQuantThreads, 0, c.stream()>>>(
        x.raw(), t, n, ap, cp, sp, dp);
  }
  AVDIT_CUDA_CHECK_LAUNCH();
}

// ---- the plain GEMM (shapes cuBLASLt does not take) -----------------------------------------
constexpr int kTile = 16;

__global__ void fp8_gemm_tiled_kernel(const uint8_t* x, const uint8_t* w, const float* dx,
                                      const float* dw, bool per_row, void* y, Elt yt, int64_t M,
                                      int64_t N, int64_t K) {
  __shared__ float xs[kTile][kTile + 1], ws[kTile][kTile + 1];
  const int64_t m = blockIdx.y * int64_t{kTile} + threadIdx.y;
  const int64_t n = blockIdx.x * int64_t{kTile} + threadIdx.x;
  const int64_t wn = blockIdx.x * int64_t{kTile} + threadIdx.y;  // the w row this thread loads
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    const int64_t k = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = m < M && k < K ? from_e4m3(x[m * K + k]) : 0.f;
    ws[threadIdx.y][threadIdx.x] = wn < N && k < K ? from_e4m3(w[wn * K + k]) : 0.f;
    __syncthreads();
    for (int j = 0; j < kTile; ++j) acc += xs[threadIdx.y][j] * ws[threadIdx.x][j];
    __syncthreads();
  }
  if (m < M && n < N)
    store_elt(y, yt, m * N + n, acc * (dx[per_row ? m : 0] * dw[per_row ? n : 0]));
}

// The unit scale the row path's product takes (cuBLASLt reads scales from device memory): a
// device constant (its address on the current device, a host-side lookup without a copy),
// instead of a buffer filled on every call.
__device__ float unit_scale_value = 1.f;
const void* unit_scale() {
  void* a = nullptr;
  AVDIT_CUDA_CHECK(cudaGetSymbolAddress(&a, unit_scale_value));
  return a;
}

// Row scales where cuBLASLt has no outer-vector kernel: y = acc (unit scales, F32) * dx[m] * dw[n].
__global__ void outer_scale_kernel(const float* acc, const float* dx, const float* dw, void* y,
                                   Elt yt, int64_t M, int64_t N) {
  for (int64_t i = ::avdit::cuda::first_of(); i < M * N; i += ::avdit::cuda::stride_of())
    store_elt(y, yt, i, acc[i] * (dx[i / N] * dw[i % N]));
}

// ---- cuBLASLt ----------------------------------------------------------------------------------
// Row-major Y [M, N] = X [M, K] · W [N, K]^T is column-major Y^T = W^T' X': cuBLASLt's A is W
// read transposed (the TN layout FP8 requires), its B is X; A's scale is w's (N values in
// outer-vector mode), B's is x's (M values).
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
};
using Key = std::tuple<int64_t, int64_t, int64_t, int, bool>;

cudaDataType_t out_type(DType t) {
  return t == DType::BF16 ? CUDA_R_16BF : t == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}

// Plans live for the process (descriptors are host objects; an algorithm depends on the device
// kind and the problem only).
Plan& plan_for(CudaContext& c, int64_t M, int64_t N, int64_t K, DType out, bool outer_vec) {
  static std::mutex mu;
  static std::map<Key, Plan> plans;
  std::lock_guard<std::mutex> lock(mu);
  const Key key{M, N, K, static_cast<int>(out), outer_vec};
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  Plan& p = plans[key];
  AVDIT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  AVDIT_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  AVDIT_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const int8_t fast = 0;
  AVDIT_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
  if (outer_vec) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    AVDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                      &mode, sizeof(mode)));
    AVDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                      &mode, sizeof(mode)));
  }
  const auto uM = static_cast<uint64_t>(M), uN = static_cast<uint64_t>(N),
             uK = static_cast<uint64_t>(K);
  AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, uK, uN, K));
  AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, uK, uM, K));
  AVDIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, out_type(out), uN, uM, N));
  cublasLtMatmulPreference_t pref = nullptr;
  AVDIT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = c.dev().workspace_bytes();
  AVDIT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(c.dev().lt(), p.op, p.a, p.b, p.d, p.d,
                                                           pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = result.algo;
    p.ok = true;
  }
  return p;
}

// y = x · w^T through cuBLASLt; false where it has no kernel (the caller runs the plain one). Row
// scales go to cuBLASLt's outer-vector mode, or, where it has none, to a unit-scale F32 product
// and outer_scale_kernel.
bool cublaslt_fp8(CudaContext& c, const void* xc, const float* dx, const Fp8Weight& w, Tensor& y,
                  int64_t M, int64_t N, int64_t K) {
  if (K % 16 != 0 || N % 16 != 0) return false;
  const bool per_row = w.scaling == Fp8Scaling::Row;
  auto matmul = [&](Plan& p, const void* a_scale, const void* b_scale, void* d) {
    AVDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                      &a_scale, sizeof(a_scale)));
    AVDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                      &b_scale, sizeof(b_scale)));
    const float alpha = 1.f, beta = 0.f;
    return cublasLtMatmul(c.dev().lt(), p.op, &alpha, w.codes.raw(), p.a, xc, p.b, &beta, d, p.d, d,
                          p.d, &p.algo, c.dev().workspace(), c.dev().workspace_bytes(), c.stream());
  };
  Plan& p = plan_for(c, M, N, K, y.dtype(), per_row);
  if (p.ok) {
    const cublasStatus_t st = matmul(p, w.dequant.raw(), dx, device_ptr(y));
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    if (st != CUBLAS_STATUS_NOT_SUPPORTED) AVDIT_CUBLAS_CHECK(st);
    p.ok = false;
  }
  if (!per_row) return false;
  Plan& u = plan_for(c, M, N, K, DType::F32, false);
  if (!u.ok) return false;
  static bool said = false;
  if (!said) {
    said = true;
    fmt::print(stderr,
               "FP8 linear: cuBLASLt has no outer-vector (row) scale kernel here; unit scales "
               "into F32, then a scaling pass\n");
  }
  Tensor acc = c.empty({M, N}, DType::F32);
  const void* one = unit_scale();
  const cublasStatus_t st = matmul(u, one, one, device_ptr(acc));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  AVDIT_CUBLAS_CHECK(st);
  outer_scale_kernel<<<::avdit::cuda::grid_for(M * N), kQuantThreads, 0, c.stream()>>>(
      static_cast<const float*>(acc.raw()), dx, static_cast<const float*>(w.dequant.raw()),
      device_ptr(y), elt_of(y, "FP8 linear output"), M, N);
  AVDIT_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace

Fp8Weight quantize_fp8(CudaContext& c, const Tensor& w, Fp8Scaling scaling) {
  AVDIT_REQUIRE(w.ndim() == 2, "FP8 weight: expected [N, K], found {}", w.shape_str());
  c.require_here(w, "FP8 weight");
  const int64_t N = w.size(0), K = w.size(1), S = scaling == Fp8Scaling::Row ? N : 1;
  Fp8Weight q;
  q.scaling = scaling;
  q.codes = c.empty({N, K}, DType::F8_E4M3);
  q.scales = c.empty({S}, DType::F32);
  q.dequant = c.empty({S}, DType::F32);
  quantize(c, w, N, K, scaling == Fp8Scaling::Row, q.codes, q.scales, q.dequant);
  return q;
}

void linear_fp8(CudaContext& c, const Tensor& x, const Fp8Weight& w, Tensor& y) {
  AVDIT_CHECK(w.codes.ndim() == 2 && w.codes.dtype() == DType::F8_E4M3,
              "linear_fp8: weight codes {} {}", dtype_name(w.codes.dtype()), w.codes.shape_str());
  const int64_t N = w.codes.size(0), K = w.codes.size(1);
  AVDIT_CHECK(x.ndim() >= 1 && x.size(-1) == K && y.numel() == x.numel() / K * N,
              "linear_fp8: x {} y {} for a weight [{}, {}]", x.shape_str(), y.shape_str(), N, K);
  const bool per_row = w.scaling == Fp8Scaling::Row;
  AVDIT_CHECK(w.dequant.numel() == (per_row ? N : 1), "linear_fp8: {} weight scales for {} rows",
              w.dequant.numel(), N);
  for (const Tensor* t : {&x, &w.codes, &w.dequant}) c.require_here(*t, "FP8 linear operand");
  c.require_here(y, "FP8 linear output");
  const int64_t M = x.numel() / K;
  if (M == 0 || N == 0) return;
  Tensor xc = c.empty({M, K}, DType::F8_E4M3);
  Tensor xs = c.empty({per_row ? M : 1}, DType::F32), xd = c.empty({per_row ? M : 1}, DType::F32);
  quantize(c, x, M, K, per_row, xc, xs, xd);
  const auto* dx = static_cast<const float*>(xd.raw());
  if (cublaslt_fp8(c, xc.raw(), dx, w, y, M, N, K)) return;
  static bool said = false;
  if (!said && M * N > (int64_t{1} << 24)) {
    said = true;
    fmt::print(stderr,
               "FP8 linear [{}, {}] x [{}, {}]: no cuBLASLt FP8 kernel for this shape here; the "
               "plain kernel runs (far slower)\n",
               M, K, N, K);
  }
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile),
                  static_cast<unsigned>((M + kTile - 1) / kTile));
  fp8_gemm_tiled_kernel<<<grid, block, 0, c.stream()>>>(
      static_cast<const uint8_t*>(xc.raw()), static_cast<const uint8_t*>(w.codes.raw()), dx,
      static_cast<const float*>(w.dequant.raw()), per_row, device_ptr(y),
      elt_of(y, "FP8 linear output"), M, N, K);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
