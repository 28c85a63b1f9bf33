// RMSNorm with the weight conventions of both DiTs: w or (1 + w), and per-modality weight rows
// chosen per token by an index. The sum of squares reduces in a fixed order (no atomics), so
// results are bit-reproducible. Two kernels: half-precision rows of up to 4,096 (multiples of 8)
// take one warp per row with the row held in registers (16-byte loads and stores: one read of x,
// one write of y); everything else takes one block per row.
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "backend/cuda/context.h"
#include "ops/norm.h"

namespace avdit::cuda {
namespace {

constexpr int kNormThreads = 256;

// The weight row of row r of x (rows_per_token rows share a token's row); -1 for an index outside
// the weight (a caller bug: the row comes out NaN rather than reading out of bounds).
__device__ __forceinline__ int64_t weight_row(const int* group, int64_t r, int64_t rows_per_token, int64_t w_rows) {
  if (!group) return 0;
  const int64_t wrow = group[r / rows_per_token];
  return wrow < 0 || wrow >= w_rows ? -1 : wrow;
}
// g = w[i] or 1 + w[i] of weight row wrow (NaN for -1).
__device__ __forceinline__ float weight_at(const void* w, Elt wt, int64_t wrow, int64_t i, bool one_plus) {
  const float g = wrow < 0 ? __int_as_float(0x7fc00000) : load_elt(w, wt, i);
  return one_plus ? g + 1.f : g;
}

// rows_per_token: consecutive rows of x that share one token's weight row (the heads of q / k).
__global__ void rms_norm_kernel(const void* x, Elt xt, const void* w, Elt wt, int64_t w_rows, const int* group,
                                int64_t rows_per_token, bool one_plus, float eps, void* y, Elt yt, int64_t D) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * D;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = load_elt(x, xt, base + i);
    ss += v * v;
  }
  // Warp butterfly then one warp over the warp sums: a fixed order, same bits every run.
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float warp_sums[kNormThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    ss = lane < kNormThreads / 32 ? warp_sums[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) warp_sums[0] = ss;
  }
  __syncthreads();
  const float inv = rsqrtf(warp_sums[0] / static_cast<float>(D) + eps);
  const int64_t wrow = weight_row(group, r, rows_per_token, w_rows);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float g = w ? weight_at(w, wt, wrow, wrow * D + i, one_plus) : 1.f;
    store_elt(y, yt, base + i, load_elt(x, xt, base + i) * inv * g);
  }
}

// G lanes per row of D = 8 * nv halves (nv <= 32 * kMaxVec; G the power of two >= nv up to 32, so
// a warp takes 32 / G short rows: the video VAEs' 64- and 128-channel rows left 3/4 and 1/2 of the
// lanes idle at one row a warp): lane l of a group holds the 16-byte vectors l, l + G, ... of its
// row; sum of squares lane by lane, then the group's butterfly. Lanes without a vector hold 0, so
// the sums are the bits of one row a warp.
constexpr int kMaxVec = 16, kWarpRows = 8;  // vectors per lane (D <= 4,096), rows (warps) per block

template <class H>
__device__ __forceinline__ float half_to_float(H v) {
  if constexpr (std::is_same_v<H, __nv_bfloat16>) return __bfloat162float(v);
  else return __half2float(v);
}

template <class H>
__global__ void __launch_bounds__(32 * kWarpRows)
    rms_norm_warp_kernel(const H* x, const void* w, Elt wt, int64_t w_rows, const int* group, int64_t rows_per_token,
                         bool one_plus, float eps, void* y, Elt yt, int64_t rows, int nv, int G) {
  const int lane = threadIdx.x % 32;
  const int64_t r = (blockIdx.x * int64_t{kWarpRows} + threadIdx.x / 32) * (32 / G) + lane / G;
  const bool live = r < rows;
  if (__all_sync(0xffffffffu, !live)) return;
  const int sub = lane % G;
  const int64_t D = 8 * int64_t{nv};
  const uint4* xr = reinterpret_cast<const uint4*>(x + (live ? r : 0) * D);
  uint4 v[kMaxVec];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int c = sub + G * j;
    if (live && c < nv) {
      v[j] = xr[c];
      const H* h = reinterpret_cast<const H*>(&v[j]);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float f = half_to_float(h[e]);
        ss += f * f;
      }
    }
  }
  for (int o = G / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (!live) return;
  const float inv = rsqrtf(ss / static_cast<float>(D) + eps);
  const int64_t wrow = weight_row(group, r, rows_per_token, w_rows);
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int c = sub + G * j;
    if (c >= nv) continue;
    const H* h = reinterpret_cast<const H*>(&v[j]);
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float g = w ? weight_at(w, wt, wrow, wrow * D + 8 * c + e, one_plus) : 1.f;
      o[e] = half_to_float(h[e]) * inv * g;
    }
    if (yt == Elt::F32) {
      float4* yr = reinterpret_cast<float4*>(static_cast<float*>(y) + r * D + 8 * c);
      yr[0] = make_float4(o[0], o[1], o[2], o[3]);
      yr[1] = make_float4(o[4], o[5], o[6], o[7]);
    } else {
      uint4 out;
      uint32_t* q = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (yt == Elt::BF16) {
          const __nv_bfloat162 b = __floats2bfloat162_rn(o[2 * e], o[2 * e + 1]);
          q[e] = *reinterpret_cast<const uint32_t*>(&b);
        } else {
          const __half2 b = __floats2half2_rn(o[2 * e], o[2 * e + 1]);
          q[e] = *reinterpret_cast<const uint32_t*>(&b);
        }
      }
      reinterpret_cast<uint4*>(static_cast<char*>(y) + (r * D + 8 * c) * 2)[0] = out;
    }
  }
}

}  // namespace

}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void rms_norm(CudaContext& c, const Tensor& x, const RmsNormWeight& wt_in, float eps, Tensor& y) {
  c.require_here(x, "rms_norm x");
  AVDIT_CHECK(x.ndim() >= 1 && y.numel() == x.numel(), "rms_norm: output {} for x {}", y.shape_str(), x.shape_str());
  const Tensor& w = wt_in.w;
  const Tensor* group = wt_in.group;
  const bool one_plus_weight = wt_in.one_plus;
  const int64_t D = x.size(-1), rows = D ? x.numel() / D : 0;
  int64_t w_rows = 0, rows_per_token = 1;
  Elt wt = Elt::F32;
  if (w.defined()) {
    c.require_here(w, "rms_norm weight");
    wt = elt_of(w, "rms_norm weight");
    AVDIT_CHECK(w.numel() % D == 0 && w.numel() > 0, "rms_norm: weight {} for rows of {}", w.shape_str(), D);
    w_rows = w.numel() / D;
    AVDIT_CHECK(w_rows == 1 || group, "rms_norm: {} weight rows but no group index", w_rows);
  }
  if (group && w_rows > 1) {
    require_i32(*group, "rms_norm group");
    const int64_t tokens = group->numel();
    AVDIT_CHECK(tokens > 0 && rows % tokens == 0, "rms_norm: {} rows do not split into {} tokens", rows, tokens);
    rows_per_token = rows / tokens;
  }
  if (rows == 0) return;
  AVDIT_CHECK(rows <= 0x7fffffff, "rms_norm: {} rows exceed one launch", rows);
  const Elt xt = elt_of(x, "rms_norm"), yt = elt_of(y, "rms_norm");
  const bool aligned =
      reinterpret_cast<uintptr_t>(x.raw()) % 16 == 0 && reinterpret_cast<uintptr_t>(y.raw()) % 16 == 0;
  const int* grp = group && w_rows > 1 ? group->data<int32_t>() : nullptr;
  const void* wp = w.defined() ? w.raw() : nullptr;
  if (xt != Elt::F32 && D % 8 == 0 && D <= 8 * 32 * kMaxVec && aligned) {
    const int nv = static_cast<int>(D / 8);
    int G = 1;
    while (G < nv && G < 32) G *= 2;
    const int64_t per_block = int64_t{kWarpRows} * (32 / G);
    const unsigned blocks = static_cast<unsigned>((rows + per_block - 1) / per_block);
    if (xt == Elt::BF16)
      rms_norm_warp_kernel<<<blocks, 32 * kWarpRows, 0, c.stream()>>>(
          static_cast<const __nv_bfloat16*>(x.raw()), wp, wt, w_rows, grp, rows_per_token, one_plus_weight, eps,
          device_ptr(y), yt, rows, nv, G);
    else
      rms_norm_warp_kernel<<<blocks, 32 * kWarpRows, 0, c.stream()>>>(
          static_cast<const __half*>(x.raw()), wp, wt, w_rows, grp, rows_per_token, one_plus_weight, eps,
          device_ptr(y), yt, rows, nv, G);
    AVDIT_CUDA_CHECK_LAUNCH();
    return;
  }
  rms_norm_kernel<<<static_cast<unsigned>(rows), kNormThreads, 0, c.stream()>>>(
      x.raw(), xt, wp, wt, w_rows, grp, rows_per_token, one_plus_weight, eps, device_ptr(y), yt, D);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
