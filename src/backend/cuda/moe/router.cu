// The MAGI-2 router in one kernel (moe.h route()): per block 64 tokens of one head, the fp32 logits
// x_h · gate_h^T on the CUDA cores (x widened from bf16 in registers, exact), kept in registers, then
// the scores (sigmoid or softmax), score + bias, the top-K with the CPU's tie rule, the weights.
// It replaces cuBLAS's strided-batched SGEMM, the bf16 -> fp32 cast of x before it and a separate
// top-K kernel that read the [T, heads, E] logits back (at T = 65,536 the logits are 805 MB each way;
// bench/NOTES.md, session 6). CPU oracle: src/models/magi2/moe.cpp route.
//
// Arithmetic: each logit is one fp32 fma chain over k = 0 .. D-1 in order (no split, no tensor
// cores), so integer inputs give exact logits and the rest differs from the CPU only by fp32 rounding.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <cmath>

#include "backend/cuda/common.cuh"
#include "backend/cuda/moe/moe_internal.h"

namespace avdit::cuda::moe {
namespace {

constexpr int kBT = 64;          // tokens per block
constexpr int kBK = 32;          // head_dim per shared-memory stage
constexpr int kEP = kMaxExperts; // experts computed per block (E <= 256; the rest are zero columns)
constexpr int kRouterThreads = 256;    // 8 warps: warp w owns tokens 8w .. 8w+7 for the logits and the top-K
constexpr int kSmemBytes = 2 * (kBK * kBT + kBK * kEP) * int(sizeof(float));  // two stages of A and B: 80 KB

// Lane l holds experts 4l .. 4l+3 (slots 0-3) and 128 + 4l .. 128 + 4l + 3 (slots 4-7): its shared-memory
// reads of a B row are two 16-byte pieces, the warp's 512 contiguous bytes each, without bank conflicts.
// Within a lane the slot order is the expert order, which the tie rule below relies on.
__device__ __forceinline__ int expert_of(int lane, int j) { return (j < 4 ? 0 : 128) + 4 * lane + (j & 3); }

// A uint32 with the order of the float (for non-NaN values); the caller folds -0 into +0 so that
// equal floats give equal keys. Key 0 (a NaN pattern) marks "no candidate".
__device__ __forceinline__ unsigned order_key(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// gate [H*E, D] -> gt [H, Dp, 256] (k-major, zero rows k >= D and zero columns e >= E), so that the
// router's B stages are plain 16-byte copies with no bounds. 3 MB for the preview's 12 x 256 x 256.
__global__ void transpose_gate_kernel(const float* gate, int H, int E, int D, int Dp, float* gt) {
  const int64_t n = int64_t(H) * Dp * kEP;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int e = static_cast<int>(i % kEP), k = static_cast<int>((i / kEP) % Dp), h = static_cast<int>(i / (int64_t(kEP) * Dp));
    gt[i] = (k < D && e < E) ? gate[(int64_t(h) * E + e) * D + k] : 0.f;
  }
}

__device__ __forceinline__ unsigned warp_max_u32(unsigned v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xffffffffu, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
#endif
}

__device__ __forceinline__ unsigned warp_min_u32(unsigned v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_min_sync(0xffffffffu, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
#endif
}

// 16-byte global -> shared copies that do not hold registers (sm_80+; a plain copy on the sm_75 build).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
#else
  *static_cast<float4*>(smem) = *static_cast<const float4*>(gmem);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

struct RouterArgs {
  const void* x;  // [T, H*D], F32 or BF16
  const float* gt;  // transpose_gate_kernel's output
  const float* bias;  // [H*E]
  int64_t T;
  int H, E, K, D, Dp;
  bool softmax, norm;
  float scale;
  int* idx;       // [T, H, K]
  float* w;       // [T, H, K]
  float* logits;  // [T, H, E] or null
};

// x tile rows t0 .. t0+63, columns k0 .. k0+31 of head h: thread i loads token i / 4, 8 values from
// column (i % 4) * 8, into registers (the next stage is fetched while the current one computes).
// kVec: BF16 x with D % 8 == 0, one 16-byte load; else element loads with bounds.
template <bool kVec>
__device__ __forceinline__ void load_x(const RouterArgs& a, int64_t t0, int h, int k0, Elt xt, float (&v)[8]) {
  const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 8;
  const int64_t t = t0 + r;
  const int64_t HD = int64_t(a.H) * a.D;
  if constexpr (kVec) {
    if (t < a.T && k0 + c < a.D) {
      const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(a.x) + t * HD + int64_t(h) * a.D + k0 + c);
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(p[j]);
        v[2 * j] = f.x;
        v[2 * j + 1] = f.y;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = 0.f;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int k = k0 + c + j;
      v[j] = (t < a.T && k < a.D) ? load_elt(a.x, xt, t * HD + int64_t(h) * a.D + k) : 0.f;
    }
  }
}

__device__ __forceinline__ void store_x(float* As, const float (&v)[8]) {
  const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) As[(c + j) * kBT + r] = v[j];
}

// B stage: rows k0 .. k0+31 of gt[h] (32 x 256 floats), 8 16-byte pieces per thread.
__device__ __forceinline__ void load_gate_async(const RouterArgs& a, int h, int k0, float* Bs) {
  const float* src = a.gt + (int64_t(h) * a.Dp + k0) * kEP;
#pragma unroll
  for (int j = 0; j < kBK * kEP / 4 / kRouterThreads; ++j) {
    const int q = threadIdx.x + j * kRouterThreads;  // 16-byte piece
    cp_async16(Bs + q * 4, src + q * 4);
  }
  cp_async_commit();
}

template <bool kVec>
__global__ void __launch_bounds__(kRouterThreads, 2) router_kernel(RouterArgs a, Elt xt) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  // Stage s: A at smem + s * kStage, B at smem + s * kStage + kBK * kBT (pointer arithmetic, not an
  // array of pointers, which a run-time stage index would put in local memory).
  constexpr int kStage = kBK * kBT + kBK * kEP;
  const int h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t0 = int64_t{blockIdx.x} * kBT;

  float acc[8][8];  // [token 8 warp + i][slot j]
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  float xv[8];
  load_gate_async(a, h, 0, smem + kBK * kBT);
  load_x<kVec>(a, t0, h, 0, xt, xv);
  store_x(smem, xv);
  cp_async_wait_all();
  __syncthreads();
  const int nk = a.Dp / kBK;
  for (int kt = 0, buf = 0; kt < nk; ++kt, buf ^= 1) {
    const bool more = kt + 1 < nk;
    if (more) {
      load_gate_async(a, h, (kt + 1) * kBK, smem + (buf ^ 1) * kStage + kBK * kBT);
      load_x<kVec>(a, t0, h, (kt + 1) * kBK, xt, xv);
    }
    const float* A = smem + buf * kStage;
    const float* B = A + kBK * kBT;
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(A + k * kBT + 8 * warp);
      const float4 a1 = *reinterpret_cast<const float4*>(A + k * kBT + 8 * warp + 4);
      const float4 b0 = *reinterpret_cast<const float4*>(B + k * kEP + 4 * lane);
      const float4 b1 = *reinterpret_cast<const float4*>(B + k * kEP + 128 + 4 * lane);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    if (more) {
      store_x(smem + (buf ^ 1) * kStage, xv);
      cp_async_wait_all();
    }
    __syncthreads();
  }

  // Top-K of each of the warp's 8 tokens: K rounds of a warp arg-max over (key, expert): the max key,
  // then the lowest expert among the lanes holding it (the CPU's tie rule, lower expert index first).
  const unsigned full = 0xffffffffu;
  float bias_v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int e = expert_of(lane, j);
    bias_v[j] = e < a.E ? a.bias[int64_t(h) * a.E + e] : 0.f;
  }
#pragma unroll  // acc[i] needs a compile-time i (a run-time index would put acc in local memory)
  for (int i = 0; i < 8; ++i) {
    const int64_t t = t0 + 8 * warp + i;
    if (t >= a.T) break;  // uniform across the warp
    const int64_t p = t * a.H + h;
    float sc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) sc[j] = acc[i][j];
    if (a.logits) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (expert_of(lane, j) < a.E) a.logits[p * a.E + expert_of(lane, j)] = sc[j];
    }
    float mx = 0.f;
    if (a.softmax) {
      mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (expert_of(lane, j) < a.E) mx = fmaxf(mx, sc[j]);
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(full, mx, o));
    }
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float l = sc[j];
      sc[j] = 0.f;
      if (expert_of(lane, j) < a.E) {
        sc[j] = a.softmax ? expf(l - mx) : 1.0f / (1.0f + expf(-l));
        sum += sc[j];
      }
    }
    if (a.softmax) {
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(full, sum, o);
#pragma unroll
      for (int j = 0; j < 8; ++j) sc[j] /= sum;
    }
    unsigned key[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float b = sc[j] + bias_v[j];
      b = b == 0.f ? 0.f : b;  // -0 == +0 on the CPU: one key for both
      key[j] = expert_of(lane, j) < a.E ? order_key(b) : 0u;
    }
    unsigned taken = 0;  // bit j: slot j already chosen
    int my_e = 0;        // lane k keeps the k-th choice
    float my_s = 0.f, l1 = 0.f;
    for (int k = 0; k < a.K; ++k) {
      // This lane's best untaken key, the lowest slot (= lowest expert) among equal keys.
      unsigned kb = 0;
      int eb = INT_MAX;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (!((taken >> j) & 1u) && key[j] > kb) {
          kb = key[j];
          eb = expert_of(lane, j);
        }
      const unsigned m = warp_max_u32(kb);
      int w = static_cast<int>(warp_min_u32(kb == m && kb != 0u ? static_cast<unsigned>(eb) : 0xffffffffu));
      if (w < 0 || w >= a.E) w = 0;  // unreachable for K <= E (checked on the host)
      const int owner = (w & 127) >> 2, slot = (w >> 7) * 4 + (w & 3);
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (lane == owner && j == slot) {
          s = sc[j];
          taken |= 1u << j;
        }
      s = __shfl_sync(full, s, owner);
      l1 += fabsf(s);  // the CPU's order: k = 0, 1, ...
      if (lane == k) {
        my_e = w;
        my_s = s;
      }
    }
    if (lane < a.K) {
      const float denom = a.norm ? fmaxf(l1, 1e-12f) : 1.0f;
      a.idx[p * a.K + lane] = my_e;
      a.w[p * a.K + lane] = (a.norm ? my_s / denom : my_s) * a.scale;
    }
  }
}

}  // namespace

void launch_router(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias, const RouterConfig& cfg,
                   int64_t T, int* idx, float* w, float* logits) {
  const Elt xt = elt_of(x, "moe route x");
  const int H = static_cast<int>(cfg.heads), E = static_cast<int>(cfg.experts), D = static_cast<int>(cfg.head_dim);
  const int Dp = (D + kBK - 1) / kBK * kBK;
  Tensor gt = cuda_empty(dev, {int64_t(H) * Dp * kEP}, DType::F32);
  transpose_gate_kernel<<<grid_for(gt.numel()), kRouterThreads, 0, dev.stream()>>>(cptr<float>(gate), H, E, D, Dp,
                                                                             static_cast<float*>(device_ptr(gt)));
  AVDIT_CUDA_CHECK_LAUNCH();
  RouterArgs a{x.raw(), cptr<float>(gt), cptr<float>(bias), T, H, E, static_cast<int>(cfg.top_k), D, Dp,
               cfg.softmax, cfg.route_norm, cfg.route_scale, idx, w, logits};
  const bool vec = xt == Elt::BF16 && D % 8 == 0 && reinterpret_cast<uintptr_t>(x.raw()) % 16 == 0;
  auto kernel = vec ? router_kernel<true> : router_kernel<false>;
  AVDIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  const dim3 grid(static_cast<unsigned>((T + kBT - 1) / kBT), static_cast<unsigned>(H));
  kernel<<<grid, kRouterThreads, kSmemBytes, dev.stream()>>>(a, xt);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda::moe
