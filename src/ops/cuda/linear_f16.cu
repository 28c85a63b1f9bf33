// The fp16 recipe's linear on the device (ops/linear_f16.h): a row pass that rounds the input to
// fp16 (scaling rows past the limit by 2^-k under rowscale), one cuBLASLt fp16 GEMM with fp32
// accumulation, and a row pass that multiplies the scaled rows' fp32 results by 2^k. Plain CUDA on
// half and float only (the fp16 path must build for sm_70).
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/context.h"
#include "ops/linear_f16.h"

namespace avdit::cuda {
namespace {

constexpr int kRowThreads = 256;

// One block per row: max |x| over the row (fp32 max is order-free, so deterministic), the
// exponent k, then x 2^-k rounded to fp16. factor[r] = 2^k.
__global__ void __launch_bounds__(kRowThreads)
    row_scale_kernel(const float* x, __half* xs, float* factor, int64_t K, bool rowscale, float limit) {
  __shared__ float warp_max[kRowThreads / 32];
  const int64_t r = blockIdx.x;
  const float* row = x + r * K;
  int k = 0;
  if (rowscale) {
    float m = 0.f;
    for (int64_t c = threadIdx.x; c < K; c += kRowThreads) m = fmaxf(m, fabsf(row[c]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    m = 0.f;
    for (int w = 0; w < kRowThreads / 32; ++w) m = fmaxf(m, warp_max[w]);
    // As ops::row_scale_exponent: 0 within the limit and for a non-finite maximum.
    if (m > limit && m < 3.0e38f)
      while (m > limit) {
        m *= 0.5f;
        ++k;
      }
  }
  for (int64_t c = threadIdx.x; c < K; c += kRowThreads) xs[r * K + c] = __float2half_rn(ldexpf(row[c], -k));
  if (threadIdx.x == 0) factor[r] = ldexpf(1.0f, k);
}

// y[r, :] = y32[r, :] * factor[r], into fp32 (in place) or fp16.
__global__ void scale_rows_kernel(const float* y32, const float* factor, void* y, bool y_f16, int64_t N) {
  const int64_t r = blockIdx.x;
  const float f = factor[r];
  for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
    const float v = y32[r * N + c] * f;
    if (y_f16) static_cast<__half*>(y)[r * N + c] = __float2half_rn(v);
    else static_cast<float*>(y)[r * N + c] = v;
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {

using ::avdit::cuda::device_ptr;

void linear_f16(CudaContext& c, const Tensor& x, const Tensor& w, Tensor& y, F16Linear opt) {
  c.require_here(x, "linear_f16 x");
  c.require_here(w, "linear_f16 weight");
  AVDIT_CHECK(w.ndim() == 2 && w.dtype() == DType::F16, "linear_f16: weight must be F16 [out, in], got {} {}",
              dtype_name(w.dtype()), w.shape_str());
  AVDIT_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::F16, "linear_f16: x must be F32 or F16, got {}",
              dtype_name(x.dtype()));
  AVDIT_CHECK(y.dtype() == DType::F32 || y.dtype() == DType::F16, "linear_f16: y must be F32 or F16, got {}",
              dtype_name(y.dtype()));
  const int64_t K = w.size(1), N = w.size(0);
  AVDIT_CHECK(x.ndim() >= 1 && x.size(-1) == K, "linear_f16: x {} does not match weight {}", x.shape_str(),
              w.shape_str());
  const int64_t M = K ? x.numel() / K : 0;
  AVDIT_CHECK(y.numel() == M * N, "linear_f16: output {} for x {} and weight {}", y.shape_str(), x.shape_str(),
              w.shape_str());
  if (M == 0 || N == 0) return;
  // The fp16 input: x itself, or the row pass's rounded (and scaled) copy of an F32 x.
  Tensor xs = x, factor;
  const bool scaled = x.dtype() == DType::F32;
  if (scaled) {
    AVDIT_CHECK(M <= 0x7fffffff, "linear_f16: {} rows", M);
    xs = c.empty({M, K}, DType::F16);
    factor = c.empty({M}, DType::F32);
    ::avdit::cuda::row_scale_kernel<<<static_cast<unsigned>(M), ::avdit::cuda::kRowThreads, 0, c.stream()>>>(
        x.data<float>(), static_cast<__half*>(device_ptr(xs)), static_cast<float*>(device_ptr(factor)), K, opt.rowscale,
        kRowScaleLimit);
    AVDIT_CUDA_CHECK_LAUNCH();
  }
  const bool rescale = scaled && opt.rowscale;
  Tensor d = rescale && y.dtype() != DType::F32 ? c.empty({M, N}, DType::F32) : y;
  ::avdit::cuda::GemmProblem p;
  p.a = xs.raw();
  p.b = w.raw();
  p.d = device_ptr(d);
  p.M = M;
  p.N = N;
  p.K = K;
  p.lda = K;
  p.ldd = N;
  p.in = DType::F16;
  p.out = d.dtype();
  p.reduced_precision_reduction = !opt.reduction;
  c.gemm().run(p);
  if (rescale) {
    ::avdit::cuda::scale_rows_kernel<<<static_cast<unsigned>(M), 256, 0, c.stream()>>>(
        static_cast<const float*>(d.raw()), static_cast<const float*>(factor.raw()),
                                                                 device_ptr(y), y.dtype() == DType::F16, N);
    AVDIT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace avdit::ops::cuda
