// mHC on the GPU (see ops/mhc.h): the logits (RMS norm and phi in one pass over the streams; the
// preview's bf16 case on the tensor cores, mhc_logits_tc.cu), the coefficient epilogue (one thread
// per token, Sinkhorn in registers) and the stream mixing (eight columns per thread with 16-byte
// accesses for 16-byte aligned rows; one column per thread otherwise). The mixing and the epilogue
// are fp32 in the CPU reference's operation order with explicitly rounded multiplies and adds, so
// that no FMA contraction separates them; no atomics.
#include <type_traits>

#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/mhc_logits_tc.h"
#include "ops/cuda/vec8.cuh"
#include "ops/linear.h"
#include "ops/mhc.h"
#include "ops/norm.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::first_of;
using ::avdit::cuda::grid_for;
using ::avdit::cuda::kThreads;
using ::avdit::cuda::load8;
using ::avdit::cuda::load_elt;
using ::avdit::cuda::require_i32;
using ::avdit::cuda::sigmoid_f;
using ::avdit::cuda::store8;
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

// ---- logits: RMS norm and phi fused ------------------------------------------------------------
// Each thread owns kLogitRows rows of s [L, K] and all C logits of each; the block stages phi
// [K, C] through shared memory kLogitChunk rows at a time (every thread reads the same phi row:
// broadcasts). 16 elements of a row per step (one 32-byte sector), the weight row of each token
// chosen by `group`; 1/rms multiplies the sums at the end. A group index outside the weight gives
// NaN rows, as rms_norm does.
constexpr int kLogitThreads = 128, kLogitRows = 2, kLogitChunk = 64;

template <class T, class W, int C>
__global__ void __launch_bounds__(kLogitThreads, 4)  // 4 blocks per SM: 128 registers at most
    mhc_logits_kernel(const T* __restrict__ s, int64_t L, int64_t K, const W* __restrict__ w,
                      int64_t w_rows, const int* __restrict__ group, bool one_plus, float eps,
                      const float* __restrict__ phi, float* __restrict__ out) {
  __shared__ __align__(16) float sphi[kLogitChunk * C];
  const int64_t row0 = (int64_t{blockIdx.x} * kLogitThreads + threadIdx.x) * kLogitRows;
  float acc[kLogitRows][C], ss[kLogitRows];
  const W* wrow[kLogitRows];
  bool live[kLogitRows], bad[kLogitRows];
#pragma unroll
  for (int r = 0; r < kLogitRows; ++r) {
    ss[r] = 0.f;
#pragma unroll
    for (int c = 0; c < C; ++c) acc[r][c] = 0.f;
    const int64_t l = row0 + r;
    live[r] = l < L;
    int64_t g = 0;
    bad[r] = false;
    if (group && live[r]) {
      g = group[l];
      bad[r] = g < 0 || g >= w_rows;
      if (bad[r]) g = 0;
    }
    wrow[r] = w ? w + g * K : nullptr;
  }
  for (int64_t k0 = 0; k0 < K; k0 += kLogitChunk) {
    __syncthreads();
    for (int i = threadIdx.x; i < kLogitChunk * C; i += kLogitThreads) sphi[i] = phi[k0 * C + i];
    __syncthreads();
#pragma unroll 1
    for (int kk = 0; kk < kLogitChunk; kk += 16) {
      float t[kLogitRows][16];  // s * g
#pragma unroll
      for (int r = 0; r < kLogitRows; ++r) {
        float v[8], g[8];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t vec = (k0 + kk) / 8 + h;
          if (live[r])
            load8(s + (row0 + r) * K, vec, v);
          else
#pragma unroll
            for (int j = 0; j < 8; ++j) v[j] = 0.f;
          if (wrow[r]) {
            load8(wrow[r], vec, g);
#pragma unroll
            for (int j = 0; j < 8; ++j) g[j] = one_plus ? g[j] + 1.f : g[j];
          } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) g[j] = 1.f;
          }
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            ss[r] = fmaf(v[j], v[j], ss[r]);
            t[r][8 * h + j] = v[j] * g[j];
          }
        }
      }
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const float* ph = sphi + (kk + j) * C;
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const float pv = ph[c];
#pragma unroll
          for (int r = 0; r < kLogitRows; ++r) acc[r][c] = fmaf(t[r][j], pv, acc[r][c]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kLogitRows; ++r) {
    if (!live[r]) continue;
    const float inv =
        bad[r] ? __int_as_float(0x7fc00000) : rsqrtf(ss[r] / static_cast<float>(K) + eps);
#pragma unroll
    for (int c = 0; c < C; ++c) out[(row0 + r) * C + c] = acc[r][c] * inv;
  }
}

// ---- stream mixing, 8 columns per thread -------------------------------------------------------
// The scalar kernels' arithmetic in the same order (same bits); V = hidden / 8 vectors per stream.
template <class T, class O>
__global__ void mhc_apply_pre_vec_kernel(const T* __restrict__ s, const float* __restrict__ h_pre,
                                         int64_t L, int64_t n, int64_t V, O* __restrict__ out) {
  const int64_t total = L * V;
  for (int64_t i = first_of(); i < total; i += stride_of()) {
    const int64_t l = i / V, v = i - l * V;
    float acc[8];
#pragma unroll
    for (int x = 0; x < 8; ++x) acc[x] = 0.f;
    for (int64_t k = 0; k < n; ++k) {
      float in[8];
      load8(s + (l * n + k) * V * 8, v, in);
      const float c = h_pre[l * n + k];
#pragma unroll
      for (int x = 0; x < 8; ++x) acc[x] = __fadd_rn(acc[x], __fmul_rn(c, in[x]));
    }
    store8(out + l * V * 8, v, acc);
  }
}

template <class T, class O, int N>
__global__ void mhc_hyper_connect_vec_kernel(T* __restrict__ s, const O* __restrict__ o,
                                             const float* __restrict__ h_post,
                                             const float* __restrict__ h_res, int64_t L,
                                             int64_t V) {
  const int64_t total = L * V;
  for (int64_t i = first_of(); i < total; i += stride_of()) {
    const int64_t l = i / V, v = i - l * V;
    float in[N][8], ov[8];
#pragma unroll
    for (int j = 0; j < N; ++j) load8(s + (l * N + j) * V * 8, v, in[j]);
    load8(o + l * V * 8, v, ov);
#pragma unroll
    for (int r = 0; r < N; ++r) {
      float acc[8];
#pragma unroll
      for (int x = 0; x < 8; ++x) {
        acc[x] = 0.f;
#pragma unroll
        for (int j = 0; j < N; ++j)
          acc[x] = __fadd_rn(acc[x], __fmul_rn(h_res[(l * N + r) * N + j], in[j][x]));
        acc[x] = __fadd_rn(acc[x], __fmul_rn(h_post[l * N + r], ov[x]));
      }
      store8(s + (l * N + r) * V * 8, v, acc);
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Calls f with a null pointer of the element type of an F32 / BF16 / F16 tensor.
template <class F>
void with_type(DType d, F&& f) {
  switch (d) {
    case DType::F32: f(static_cast<float*>(nullptr)); break;
    case DType::BF16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
    case DType::F16: f(static_cast<__half*>(nullptr)); break;
    default: AVDIT_CHECK(false, "mhc: dtype {} (F32, BF16, F16)", dtype_name(d));
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

void mhc_logits(CudaContext& c, const Tensor& s, const RmsNormWeight& w, float eps,
                const Tensor& phi, Tensor& out) {
  c.require_here(s, "mhc_logits s");
  c.require_here(phi, "mhc_logits phi");
  c.require_here(out, "mhc_logits out");
  AVDIT_CHECK(s.ndim() == 2 && phi.ndim() == 2 && phi.size(0) == s.size(1) &&
                  phi.dtype() == DType::F32 && out.dtype() == DType::F32 &&
                  out.numel() == s.size(0) * phi.size(1),
              "mhc_logits: s {} phi {} {} out {} {}", s.shape_str(), phi.shape_str(),
              dtype_name(phi.dtype()), out.shape_str(), dtype_name(out.dtype()));
  const int64_t L = s.size(0), K = s.size(1), C = phi.size(1);
  if (L == 0) return;
  const bool half_s = s.dtype() == DType::BF16 || s.dtype() == DType::F16;
  const bool weight_ok =
      !w.w.defined() || ((w.w.dtype() == DType::F32 || w.w.dtype() == DType::BF16) &&
                         w.w.numel() % K == 0 && aligned16(w.w.raw()));
  const int64_t w_rows = w.w.defined() ? w.w.numel() / std::max<int64_t>(K, 1) : 1;
  AVDIT_CHECK(w_rows == 1 || w.group, "mhc_logits: {} weight rows need a group index", w_rows);
  if (mhc_logits_tc_takes(c, s, w, phi)) {  // the MAGI-2 preview's case, on the tensor cores
    mhc_logits_tc(c, s, w, eps, phi, out);
    return;
  }
  const bool fused = half_s && weight_ok && K % kLogitChunk == 0 && aligned16(s.raw()) &&
                     (C == 8 || C == 15 || C == 24);
  if (!fused) {  // the reference's two steps: the normed rows in fp32, then the product
    Tensor y = c.empty(s.shape(), DType::F32);
    rms_norm(c, s, w, eps, y);
    matmul(c, y, phi, out);
    return;
  }
  if (w.group) require_i32(*w.group, "mhc_logits group");
  const unsigned blocks =
      static_cast<unsigned>((L + kLogitThreads * kLogitRows - 1) / (kLogitThreads * kLogitRows));
  const int* grp = w.group ? static_cast<const int*>(w.group->raw()) : nullptr;
  auto launch = [&](auto* sp, auto* wp, auto cc) {
    using T = std::remove_pointer_t<decltype(sp)>;
    using W = std::remove_pointer_t<decltype(wp)>;
    constexpr int kC = decltype(cc)::value;
    mhc_logits_kernel<T, W, kC><<<blocks, kLogitThreads, 0, c.stream()>>>(
        static_cast<const T*>(s.raw()), L, K,
        w.w.defined() ? static_cast<const W*>(w.w.raw()) : nullptr, w_rows, grp, w.one_plus, eps,
        static_cast<const float*>(phi.raw()), static_cast<float*>(device_ptr(out)));
  };
  auto by_c = [&](auto* sp, auto* wp) {
    if (C == 8)
      launch(sp, wp, std::integral_constant<int, 8>{});
    else if (C == 15)
      launch(sp, wp, std::integral_constant<int, 15>{});
    else
      launch(sp, wp, std::integral_constant<int, 24>{});
  };
  auto by_w = [&](auto* sp) {
    if (w.w.defined() && w.w.dtype() == DType::BF16)
      by_c(sp, static_cast<__nv_bfloat16*>(nullptr));
    else
      by_c(sp, static_cast<float*>(nullptr));
  };
  if (s.dtype() == DType::BF16)
    by_w(static_cast<__nv_bfloat16*>(nullptr));
  else
    by_w(static_cast<__half*>(nullptr));
  AVDIT_CUDA_CHECK_LAUNCH();
}

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
  if (hidden % 8 == 0 && s.dtype() == out.dtype() && aligned16(s.raw()) && aligned16(out.raw())) {
    const int64_t V = hidden / 8;
    with_type(s.dtype(), [&](auto* tp) {
      using T = std::remove_pointer_t<decltype(tp)>;
      mhc_apply_pre_vec_kernel<T, T><<<grid_for(L * V), kThreads, 0, c.stream()>>>(
          static_cast<const T*>(s.raw()), static_cast<const float*>(h_pre.raw()), L, n, V,
          static_cast<T*>(device_ptr(out)));
    });
    AVDIT_CUDA_CHECK_LAUNCH();
    return;
  }
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
  if (n == 4 && hidden % 8 == 0 && s.dtype() == o.dtype() && aligned16(s.raw()) &&
      aligned16(o.raw())) {  // the preview's 4 streams, in registers
    const int64_t V = hidden / 8;
    with_type(s.dtype(), [&](auto* tp) {
      using T = std::remove_pointer_t<decltype(tp)>;
      mhc_hyper_connect_vec_kernel<T, T, 4><<<grid_for(L * V), kThreads, 0, c.stream()>>>(
          static_cast<T*>(device_ptr(s)), static_cast<const T*>(o.raw()),
          static_cast<const float*>(h_post.raw()), static_cast<const float*>(h_res.raw()), L, V);
    });
    AVDIT_CUDA_CHECK_LAUNCH();
    return;
  }
  mhc_hyper_connect_kernel<<<grid_for(L * hidden), kThreads, 0, c.stream()>>>(
      device_ptr(s), elt_of(s, "mhc_hyper_connect s"), o.raw(),
      elt_of(o, "mhc_hyper_connect branch output"), static_cast<const float*>(h_post.raw()),
      static_cast<const float*>(h_res.raw()), L, n, hidden);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
