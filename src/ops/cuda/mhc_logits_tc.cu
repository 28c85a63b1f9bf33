// MAGI-2's mHC logits on the tensor cores (mma.sync m16n8k16 bf16; fp32 accumulation within a
// 64-k chunk, the chunks added by rounded fp32 adds, since the MMA truncates as it sums). The bf16
// streams are exact as the A operand; each weight row folds into phi (v = g * phi in fp32), split
// into three bf16 terms hi + mid + lo that carry v's 24 bits, so the products move from fp32 FMAs
// (the SIMT kernel in mhc.cu, kept for the other cases) to the tensor cores at fp32 accuracy.
#include <atomic>
#include <climits>
#include <cstdint>

#include "ops/cuda/common.cuh"
#include "ops/cuda/mhc_logits_tc.h"
#include "ops/cuda/mma_sm80.cuh"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::first_of;
using ::avdit::cuda::grid_for;
using ::avdit::cuda::kThreads;
using ::avdit::cuda::load_elt;
using ::avdit::cuda::require_i32;
using ::avdit::cuda::stride_of;

constexpr int kC = 24;              // 2n + n^2 logits of the preview's 4 streams
constexpr int kTerms = 3;           // bf16 terms of each fp32 v
constexpr int kWarps = 4;           // 16 rows each
constexpr int kChunk = 64;          // k per staged B chunk and per A load (128 bytes of a row)
constexpr int kMaxWeightRows = 32;  // one bit each in a warp's mask of the groups it holds

// bt [G, kTerms, kC, K] (B^T of each weight row and term) from w [G, K] (null: no weight) and phi
// [K, kC]: v = g * phi with g = w, 1 + w (one_plus) or 1; hi = bf16(v), mid = bf16(v - hi), lo =
// bf16(v - hi - mid), both differences exact. k runs fastest so that the writes coalesce.
__global__ void mhc_split_weights_kernel(const void* w, Elt wt, int64_t G, int64_t K, bool one_plus,
                                         const float* __restrict__ phi,
                                         __nv_bfloat16* __restrict__ bt) {
  const int64_t n = G * kC * K;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t k = i % K, c = (i / K) % kC, g = i / (K * kC);
    float gk = 1.f;
    if (w) {
      gk = load_elt(w, wt, g * K + k);
      if (one_plus) gk = gk + 1.f;
    }
    const float v = gk * phi[k * kC + c];
    const __nv_bfloat16 hi = __float2bfloat16_rn(v);
    const float r = v - __bfloat162float(hi);
    const __nv_bfloat16 mid = __float2bfloat16_rn(r);
    const __nv_bfloat16 lo = __float2bfloat16_rn(r - __bfloat162float(mid));
    __nv_bfloat16* o = bt + ((g * kTerms) * kC + c) * K + k;
    o[0] = hi;
    o[kC * K] = mid;
    o[2 * kC * K] = lo;
  }
}

// The logits kernel's helpers, absent from the sm_75 pass.
#if __CUDA_ARCH__ >= 800
constexpr int kTiles = kC / 8;        // n8 tiles of the MMA
constexpr int kBStride = kChunk + 8;  // padded B^T row: the fragment reads hit 32 distinct banks

// The weight row of row r: -1 past L or for an index outside [0, G) (then bad: a NaN row).
__device__ __forceinline__ int row_group(const int* group, int64_t r, int64_t L, int G, bool& bad) {
  bad = false;
  if (r >= L) return -1;
  if (!group) return 0;
  const int g = group[r];
  bad = g < 0 || g >= G;
  return bad ? -1 : g;
}

__device__ __forceinline__ float sum_sq2(unsigned v) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  return f.x * f.x + f.y * f.y;
}
#endif

// Warp w of block b owns rows [16 (kWarps b + w), + 16); a lane holds rows qr and qr + 8 of them
// (the MMA's fragment rows). The block stages one weight row's B^T chunk (kTerms x kC x kChunk) at
// a time; a warp whose rows hold several weight rows (a group boundary of the modality-sorted
// layout) runs the K loop once per row present, and each row keeps the sums of its own pass. The
// sums of squares come from the first pass's A fragments.
__global__ void __launch_bounds__(kWarps * 32)
    mhc_logits_tc_kernel(const __nv_bfloat16* __restrict__ s, int64_t L, int K,
                         const int* __restrict__ group, int G, const __nv_bfloat16* __restrict__ bt,
                         float eps, float* __restrict__ out) {
#if __CUDA_ARCH__ >= 800
  __shared__ __align__(16) __nv_bfloat16 sb[kTerms * kC * kBStride];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int qr = lane / 4, qc = (lane % 4) * 2;  // fragment row, first of the lane's column pair
  const int64_t row0 = (int64_t{blockIdx.x} * kWarps + warp) * 16;
  const int64_t r_lo = row0 + qr, r_hi = row0 + qr + 8;
  bool bad_lo, bad_hi;
  const int g_lo = row_group(group, r_lo, L, G, bad_lo),
            g_hi = row_group(group, r_hi, L, G, bad_hi);
  const unsigned present =
      __reduce_or_sync(0xffffffffu, (g_lo >= 0 ? 1u << g_lo : 0u) | (g_hi >= 0 ? 1u << g_hi : 0u));
  // Rows past L read the last row (in bounds) and are not stored.
  const __nv_bfloat16* s_lo = s + (r_lo < L ? r_lo : L - 1) * K;
  const __nv_bfloat16* s_hi = s + (r_hi < L ? r_hi : L - 1) * K;
  float acc_lo[kTiles][2] = {}, acc_hi[kTiles][2] = {};
  float ss_lo = 0.f, ss_hi = 0.f;
  bool first_pass = true;
  for (int g = 0; g < G; ++g) {
    // Every warp stages (the barriers); a warp without rows of g skips the math, a block without
    // any skips g.
    const bool mine = (present >> g) & 1u;
    if (!__syncthreads_or(mine)) continue;
    float d[kTiles][4] = {};
    const __nv_bfloat16* btg = bt + int64_t{g} * kTerms * kC * K;
    for (int k0 = 0; k0 < K; k0 += kChunk) {
      __syncthreads();
      for (int i = threadIdx.x; i < kTerms * kC * (kChunk / 8); i += kWarps * 32) {
        const int row = i / (kChunk / 8), v = i % (kChunk / 8);  // row = term * kC + column
        *reinterpret_cast<uint4*>(sb + row * kBStride + v * 8) =
            *reinterpret_cast<const uint4*>(btg + int64_t{row} * K + k0 + v * 8);
      }
      __syncthreads();
      if (!mine) continue;
      // A: 16 rows x kChunk k as kChunk / 16 fragments; a lane holds k pairs qc and qc + 8 of
      // rows qr (registers 0, 2) and qr + 8 (1, 3).
      unsigned a[kChunk / 16][4];
#pragma unroll
      for (int t = 0; t < kChunk / 16; ++t) {
        const int k = k0 + t * 16 + qc;
        a[t][0] = *reinterpret_cast<const unsigned*>(s_lo + k);
        a[t][1] = *reinterpret_cast<const unsigned*>(s_hi + k);
        a[t][2] = *reinterpret_cast<const unsigned*>(s_lo + k + 8);
        a[t][3] = *reinterpret_cast<const unsigned*>(s_hi + k + 8);
      }
      if (first_pass) {
#pragma unroll
        for (int t = 0; t < kChunk / 16; ++t) {
          ss_lo += sum_sq2(a[t][0]) + sum_sq2(a[t][2]);
          ss_hi += sum_sq2(a[t][1]) + sum_sq2(a[t][3]);
        }
      }
      // The chunk's products into fresh accumulators, added to the running sums by rounded fp32
      // adds: the MMA's own accumulation truncates, which over K = 12,288 in one accumulator lost
      // more than the op test's fp32 bar allows.
      float e[kTiles][4] = {};
#pragma unroll
      for (int t = 0; t < kChunk / 16; ++t)
#pragma unroll
        for (int p = 0; p < kTerms; ++p)
#pragma unroll
          for (int n = 0; n < kTiles; ++n) {
            // B fragment: column n * 8 + qr, k pairs qc and qc + 8 of the k16 step.
            const __nv_bfloat16* b = sb + (p * kC + n * 8 + qr) * kBStride + t * 16 + qc;
            ::avdit::cuda::mma_bf16_16816(e[n], a[t], *reinterpret_cast<const unsigned*>(b),
                                          *reinterpret_cast<const unsigned*>(b + 8));
          }
#pragma unroll
      for (int n = 0; n < kTiles; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) d[n][i] += e[n][i];
    }
    if (!mine) continue;
    first_pass = false;
    // C fragment: d[n][0, 1] row qr, columns n * 8 + qc and + 1; d[n][2, 3] row qr + 8.
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
      if (g_lo == g) acc_lo[n][0] = d[n][0], acc_lo[n][1] = d[n][1];
      if (g_hi == g) acc_hi[n][0] = d[n][2], acc_hi[n][1] = d[n][3];
    }
  }
  // A row's k values are spread over its quad's four lanes.
  for (int o = 1; o < 4; o <<= 1) {
    ss_lo += __shfl_xor_sync(0xffffffffu, ss_lo, o);
    ss_hi += __shfl_xor_sync(0xffffffffu, ss_hi, o);
  }
  const float nan = __int_as_float(0x7fc00000);
  const float inv_lo = bad_lo ? nan : rsqrtf(ss_lo / static_cast<float>(K) + eps);
  const float inv_hi = bad_hi ? nan : rsqrtf(ss_hi / static_cast<float>(K) + eps);
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    const int c = n * 8 + qc;
    if (r_lo < L) {
      out[r_lo * kC + c] = acc_lo[n][0] * inv_lo;
      out[r_lo * kC + c + 1] = acc_lo[n][1] * inv_lo;
    }
    if (r_hi < L) {
      out[r_hi * kC + c] = acc_hi[n][0] * inv_hi;
      out[r_hi * kC + c + 1] = acc_hi[n][1] * inv_hi;
    }
  }
#else
  __trap();  // mhc_logits_tc_takes admits only devices running sm_80+ code of this kernel
#endif
}

// An sm_80+ GPU running device code built for sm_80+ (a build for sm_75 alone would run that code,
// where the kernel is a trap). Asked once per compute capability: the op runs 80 times a step.
bool tensor_cores_here(const cudaDeviceProp& props) {
  if (props.major < 8) return false;
  static std::atomic<int8_t> known[16][16];  // 0 unknown, 1 yes, -1 no
  std::atomic<int8_t>& k = known[props.major & 15][props.minor & 15];
  if (const int8_t v = k.load(std::memory_order_relaxed)) return v > 0;
  cudaFuncAttributes attr{};
  AVDIT_CUDA_CHECK(cudaFuncGetAttributes(&attr, mhc_logits_tc_kernel));
  k.store(attr.ptxVersion >= 80 ? 1 : -1, std::memory_order_relaxed);
  return attr.ptxVersion >= 80;
}

}  // namespace

bool mhc_logits_tc_takes(CudaContext& c, const Tensor& s, const RmsNormWeight& w,
                         const Tensor& phi) {
  if (s.dtype() != DType::BF16 || s.ndim() != 2 || phi.dtype() != DType::F32 || phi.ndim() != 2 ||
      phi.size(1) != kC || phi.size(0) != s.size(1))
    return false;
  const int64_t L = s.size(0), K = s.size(1);
  if (K == 0 || K % kChunk != 0 || K > INT_MAX || (L + kWarps * 16 - 1) / (kWarps * 16) > INT_MAX ||
      reinterpret_cast<uintptr_t>(s.raw()) % 4 != 0)
    return false;
  if (w.w.defined()) {
    if (w.w.dtype() != DType::F32 && w.w.dtype() != DType::BF16) return false;
    if (w.w.numel() % K != 0 || w.w.numel() / K < 1 || w.w.numel() / K > kMaxWeightRows)
      return false;
  }
  return tensor_cores_here(c.dev().props());
}

void mhc_logits_tc(CudaContext& c, const Tensor& s, const RmsNormWeight& w, float eps,
                   const Tensor& phi, Tensor& out) {
  const int64_t L = s.size(0), K = s.size(1);
  if (L == 0) return;
  const int G = w.w.defined() ? static_cast<int>(w.w.numel() / K) : 1;
  if (w.w.defined()) c.require_here(w.w, "mhc_logits weight");
  const int* grp = nullptr;
  if (w.group) {
    require_i32(*w.group, "mhc_logits group");
    AVDIT_CHECK(w.group->numel() >= L, "mhc_logits: {} group ids for {} tokens", w.group->numel(),
                L);
    grp = static_cast<const int*>(w.group->raw());
  }
  Tensor bt = c.empty({int64_t{G} * kTerms * kC, K}, DType::BF16);
  mhc_split_weights_kernel<<<grid_for(int64_t{G} * kC * K), kThreads, 0, c.stream()>>>(
      w.w.defined() ? w.w.raw() : nullptr,
      w.w.defined() ? elt_of(w.w, "mhc_logits weight") : Elt::F32, G, K, w.one_plus,
      static_cast<const float*>(phi.raw()), static_cast<__nv_bfloat16*>(device_ptr(bt)));
  AVDIT_CUDA_CHECK_LAUNCH();
  const unsigned blocks = static_cast<unsigned>((L + kWarps * 16 - 1) / (kWarps * 16));
  mhc_logits_tc_kernel<<<blocks, kWarps * 32, 0, c.stream()>>>(
      static_cast<const __nv_bfloat16*>(s.raw()), L, static_cast<int>(K), grp, G,
      static_cast<const __nv_bfloat16*>(bt.raw()), eps, static_cast<float*>(device_ptr(out)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
