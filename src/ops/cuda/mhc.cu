// mHC on the GPU (see ops/mhc.h): the coefficient epilogue (one thread per token, Sinkhorn in
// registers) and the stream mixing (one thread per token and column). fp32 in the CPU reference's
// operation order with explicitly rounded multiplies and adds, so that no FMA contraction separates
// them; no atomics.
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/mhc.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::first_of;
using ::avdit::cuda::grid_for;
using ::avdit::cuda::kThreads;
using ::avdit::cuda::load_elt;
using ::avdit::cuda::sigmoid_f;
using ::avdit::cuda::store_elt;
using ::avdit::cuda::stride_of;

// v rounded to the dtype `round` stands for (F32: unchanged), as an F32 value.
__device__ __forceinline__ float rounded(float v, Elt round) {
  switch (round) {
    case Elt::BF16: return __bfloat162float(__float2bfloat16_rn(v));
    case Elt::F16: return __half2float(__float2half_rn(v));
    default: return v;
  }
}

struct Scalars {
  float a_pre, a_post, a_res;
};

// One thread per token: the n x n Sinkhorn matrix in registers / local memory (n <=
// kMaxMhcStreams).
__global__ void mhc_coefficients_kernel(const float* h, int64_t L, int64_t n, Scalars a,
                                        const float* bpre, const float* bpost, const float* bres,
                                        Elt round, float* pre, float* post, float* res) {
  const int64_t cols = 2 * n + n * n;
  for (int64_t l = first_of(); l < L; l += stride_of()) {
    const float* r = h + l * cols;
    for (int64_t k = 0; k < n; ++k) {
      pre[l * n + k] = rounded(sigmoid_f(__fadd_rn(__fmul_rn(a.a_pre, r[k]), bpre[k])), round);
      post[l * n + k] = rounded(
          __fmul_rn(2.0f, sigmoid_f(__fadd_rn(__fmul_rn(a.a_post, r[n + k]), bpost[k]))), round);
    }
    float m[kMaxMhcStreams * kMaxMhcStreams];
    for (int64_t k = 0; k < n * n; ++k) m[k] = __fadd_rn(__fmul_rn(a.a_res, r[2 * n + k]), bres[k]);
    // Sinkhorn-Knopp as the CPU: exp(Z - max Z), then columns, then rows.
    float mx = m[0];
    for (int64_t k = 0; k < n * n; ++k) mx = fmaxf(mx, m[k]);
    for (int64_t k = 0; k < n * n; ++k) m[k] = expf(m[k] - mx);
    for (int it = 0; it < kSinkhornIters; ++it) {
      for (int64_t j = 0; j < n; ++j) {
        float col = 0.f;
        for (int64_t i = 0; i < n; ++i) col = __fadd_rn(col, m[i * n + j]);
        const float d = __fadd_rn(col, kSinkhornEps);
        for (int64_t i = 0; i < n; ++i) m[i * n + j] = __fdiv_rn(m[i * n + j], d);
      }
      for (int64_t i = 0; i < n; ++i) {
        float row = 0.f;
        for (int64_t j = 0; j < n; ++j) row = __fadd_rn(row, m[i * n + j]);
        const float d = __fadd_rn(row, kSinkhornEps);
        for (int64_t j = 0; j < n; ++j) m[i * n + j] = __fdiv_rn(m[i * n + j], d);
      }
    }
    for (int64_t k = 0; k < n * n; ++k) res[l * n * n + k] = rounded(m[k], round);
  }
}

__global__ void mhc_apply_pre_kernel(const void* s, Elt st, const float* h_pre, int64_t L,
                                     int64_t n, int64_t hidden, void* out, Elt ot) {
  const int64_t total = L * hidden;
  for (int64_t i = first_of(); i < total; i += stride_of()) {
    const int64_t l = i / hidden, x = i % hidden;
    float acc = 0.f;
    for (int64_t k = 0; k < n; ++k)
      acc = __fadd_rn(acc, __fmul_rn(h_pre[l * n + k], load_elt(s, st, (l * n + k) * hidden + x)));
    store_elt(out, ot, i, acc);
  }
}

// Each thread owns column x of all n streams of token l, so the in-place update has no hazard.
__global__ void mhc_hyper_connect_kernel(void* s, Elt st, const void* o, Elt ot,
                                         const float* h_post, const float* h_res, int64_t L,
                                         int64_t n, int64_t hidden) {
  const int64_t total = L * hidden;
  for (int64_t i = first_of(); i < total; i += stride_of()) {
    const int64_t l = i / hidden, x = i % hidden;
    float in[kMaxMhcStreams];
    for (int64_t j = 0; j < n; ++j) in[j] = load_elt(s, st, (l * n + j) * hidden + x);
    const float ov = load_elt(o, ot, i);
    for (int64_t r = 0; r < n; ++r) {
      float acc = 0.f;
      for (int64_t j = 0; j < n; ++j)
        acc = __fadd_rn(acc, __fmul_rn(h_res[(l * n + r) * n + j], in[j]));
      acc = __fadd_rn(acc, __fmul_rn(h_post[l * n + r], ov));
      store_elt(s, st, (l * n + r) * hidden + x, acc);
    }
  }
}

Elt rounding_of(DType d) {
  AVDIT_CHECK(d == DType::F32 || d == DType::BF16 || d == DType::F16, "mhc: rounding to {}",
              dtype_name(d));
  return d == DType::F32 ? Elt::F32 : d == DType::BF16 ? Elt::BF16 : Elt::F16;
}

void check_f32(CudaContext& c, const Tensor& t, const char* what) {
  c.require_here(t, what);
  AVDIT_CHECK(t.dtype() == DType::F32, "{}: expected F32, got {} {}", what, dtype_name(t.dtype()),
              t.shape_str());
}

}  // namespace

void mhc_coefficients(CudaContext& c, const Tensor& logits, const MhcParams& p, int64_t n,
                      DType round, MhcCoefficients& out) {
  check_f32(c, logits, "mhc logits");
  const Tensor* operands[] = {&p.bias_pre, &p.bias_post, &p.bias_res,
                              &out.h_pre,  &out.h_post,  &out.h_res};
  for (const Tensor* t : operands) check_f32(c, *t, "mhc operand");
  AVDIT_CHECK(n >= 1 && n <= kMaxMhcStreams, "mhc: {} streams (the kernel holds at most {})", n,
              kMaxMhcStreams);
  const int64_t cols = 2 * n + n * n;
  AVDIT_CHECK(logits.ndim() == 2 && logits.size(1) == cols,
              "mhc: logits {} for {} streams (expected [L, {}])", logits.shape_str(), n, cols);
  const int64_t L = logits.size(0);
  AVDIT_CHECK(p.bias_pre.numel() == n && p.bias_post.numel() == n && p.bias_res.numel() == n * n,
              "mhc: biases {} {} {} for {} streams", p.bias_pre.shape_str(),
              p.bias_post.shape_str(), p.bias_res.shape_str(), n);
  AVDIT_CHECK(
      out.h_pre.numel() == L * n && out.h_post.numel() == L * n && out.h_res.numel() == L * n * n,
      "mhc: outputs {} {} {} for {} tokens", out.h_pre.shape_str(), out.h_post.shape_str(),
      out.h_res.shape_str(), L);
  if (L == 0) return;
  const Elt r = rounding_of(round);
  mhc_coefficients_kernel<<<grid_for(L), kThreads, 0, c.stream()>>>(
      static_cast<const float*>(logits.raw()), L, n, Scalars{p.a_pre, p.a_post, p.a_res},
      static_cast<const float*>(p.bias_pre.raw()), static_cast<const float*>(p.bias_post.raw()),
      static_cast<const float*>(p.bias_res.raw()), r, static_cast<float*>(device_ptr(out.h_pre)),
      static_cast<float*>(device_ptr(out.h_post)), static_cast<float*>(device_ptr(out.h_res)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void mhc_apply_pre(CudaContext& c, const Tensor& s, const Tensor& h_pre, int64_t n, Tensor& out) {
  c.require_here(s, "mhc_apply_pre s");
  check_f32(c, h_pre, "mhc_apply_pre h_pre");
  c.require_here(out, "mhc_apply_pre out");
  AVDIT_CHECK(s.ndim() == 2 && n >= 1 && s.size(1) % n == 0, "mhc_apply_pre: s {} for {} streams",
              s.shape_str(), n);
  const int64_t L = s.size(0), hidden = s.size(1) / n;
  AVDIT_CHECK(h_pre.numel() == L * n && out.numel() == L * hidden,
              "mhc_apply_pre: h_pre {} out {} for s {}", h_pre.shape_str(), out.shape_str(),
              s.shape_str());
  if (L * hidden == 0) return;
  mhc_apply_pre_kernel<<<grid_for(L * hidden), kThreads, 0, c.stream()>>>(
      s.raw(), elt_of(s, "mhc_apply_pre s"), static_cast<const float*>(h_pre.raw()), L, n, hidden,
      device_ptr(out), elt_of(out, "mhc_apply_pre out"));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void mhc_hyper_connect_(CudaContext& c, Tensor& s, const Tensor& o, const Tensor& h_post,
                        const Tensor& h_res, int64_t n) {
  c.require_here(s, "mhc_hyper_connect s");
  c.require_here(o, "mhc_hyper_connect branch output");
  check_f32(c, h_post, "mhc_hyper_connect h_post");
  check_f32(c, h_res, "mhc_hyper_connect h_res");
  AVDIT_CHECK(n >= 1 && n <= kMaxMhcStreams && s.ndim() == 2 && s.size(1) % n == 0,
              "mhc_hyper_connect: s {} for {} streams", s.shape_str(), n);
  const int64_t L = s.size(0), hidden = s.size(1) / n;
  AVDIT_CHECK(o.numel() == L * hidden && h_post.numel() == L * n && h_res.numel() == L * n * n,
              "mhc_hyper_connect: branch output {} h_post {} h_res {} for s {}", o.shape_str(),
              h_post.shape_str(), h_res.shape_str(), s.shape_str());
  if (L * hidden == 0) return;
  mhc_hyper_connect_kernel<<<grid_for(L * hidden), kThreads, 0, c.stream()>>>(
      device_ptr(s), elt_of(s, "mhc_hyper_connect s"), o.raw(),
      elt_of(o, "mhc_hyper_connect branch output"), static_cast<const float*>(h_post.raw()),
      static_cast<const float*>(h_res.raw()), L, n, hidden);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
