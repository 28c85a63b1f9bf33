// The MAGI-2 router in one kernel (moe.h route()): per block 64 tokens of one head, the fp32 logits
// x_h . gate_h^T, then the scores (sigmoid or softmax), score + bias, the top-K with the CPU's tie
// rule, the weights - without writing the [T, heads, E] logits out and reading them back (unless
// asked to). CPU oracle: ops/cpu/moe.cpp route. Two kernels compute the logits, and share the
// scoring and top-K code (select_top_k):
// - router_mma_kernel, for BF16 x on sm_80+ (the model's path): bf16 tensor-core MMAs (mma.sync
// m16n8k16,
//   fp32 accumulation) on an exact three-way bf16 split of the fp32 gate; logits staged in shared
//   memory;
// - router_kernel, for F32 x and older GPUs: fp32 FMA chains on the CUDA cores (x widened from bf16
// in
//   registers, exact), logits kept in registers.
//
// Arithmetic. router_kernel: each logit is one fp32 fma chain over k = 0 .. D-1 in order (no
// split), so integer inputs give exact logits and the rest differs from the CPU only by fp32
// rounding. router_mma_kernel: the gate is split per call into hi = bf16(g), mid = bf16(g - hi), lo
// = bf16(g - hi - mid), and g == hi + mid + lo exactly (24 significand bits = 3 x 8; each residual
// is exact in fp32 and the last one fits bf16), for |g| in fp32's normal range. x is bf16, so every
// product x.hi, x.mid, x.lo is exact in fp32; per 16 values of k the MMAs add x.lo, then x.mid,
// then x.hi (the smallest first) into one fp32 accumulator. Only the tensor cores' fp32 summation
// (16 products and the accumulator per MMA, truncating rather than rounding to nearest) differs
// from an fma chain: integer inputs still give exact logits (every partial sum is a small integer),
// equal gate rows give equal bits (every column goes through the same sequence of MMAs), and the
// rest is ~1e-6 relative off the float64 logits, at most ~4e-6 at D 256, inside the tests' 1e-5.
#include <cuda_bf16.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "ops/cuda/common.cuh"
#include "ops/cuda/mma_sm80.cuh"
#include "ops/cuda/moe/moe_internal.h"

namespace avdit::cuda::moe {
namespace {

constexpr int kBT = 64;  // tokens per block
constexpr int kBK = 32;  // head_dim per shared-memory stage
constexpr int kEP =
    kMaxExperts;  // experts computed per block (E <= 256; the rest are zero columns)
constexpr int kRouterThreads =
    256;  // 8 warps: warp w owns tokens 8w .. 8w+7 for the logits and the top-K
constexpr int kSmemBytes =
    2 * (kBK * kBT + kBK * kEP) * int(sizeof(float));  // two stages of A and B: 80 KB

// router_mma_kernel's shared memory: kMmaStages stages of the x tile (64 tokens) and the three gate
// planes (3 x 256 experts), each row kBK bf16 = 64 bytes, k contiguous. The 16-byte chunk c of row
// r sits at chunk c ^ ((r / 2) % 4) of its row, so the 8 rows an ldmatrix reads (one chunk each)
// fall in 8 different 16-byte bank groups. After the MMAs the same memory holds the fp32 logits
// tile [64][kLogitStride]: the stride's 8 extra floats put the rows of a warp's float2 stores 8
// banks apart.
constexpr int kMmaStages = 2;
constexpr int kPlanes = 3;                                             // hi, mid, lo
constexpr int kRowBytes = kBK * 2;                                     // 64
constexpr int kXStageBytes = kBT * kRowBytes;                          // 4 KB
constexpr int kStageBytes = kXStageBytes + kPlanes * kEP * kRowBytes;  // 52 KB
constexpr int kLogitStride = kEP + 8;
constexpr int kMmaSmemBytes = kMmaStages * kStageBytes;  // 104 KB
static_assert(kBT * kLogitStride * int(sizeof(float)) <= kMmaSmemBytes,
              "the logits tile reuses the stages");
static_assert(kBK % 16 == 0 && kRowBytes == 64, "the swizzle assumes four 16-byte chunks per row");

// Lane l holds experts 4l .. 4l+3 (slots 0-3) and 128 + 4l .. 128 + 4l + 3 (slots 4-7): its
// shared-memory reads of a B row are two 16-byte pieces, the warp's 512 contiguous bytes each,
// without bank conflicts. Within a lane the slot order is the expert order, which the tie rule
// below relies on.
__device__ __forceinline__ int expert_of(int lane, int j) {
  return (j < 4 ? 0 : 128) + 4 * lane + (j & 3);
}

// A uint32 with the order of the float (for non-NaN values); the caller folds -0 into +0 so that
// equal floats give equal keys. Key 0 (a NaN pattern) marks "no candidate".
__device__ __forceinline__ unsigned order_key(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The float of a key (order_key's inverse; key 0, "none", is not passed here).
__device__ __forceinline__ float key_value(unsigned k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// gate [H*E, D] -> gt [H, Dp, 256] (k-major, zero rows k >= D and zero columns e >= E), so that the
// router's B stages are plain 16-byte copies with no bounds. 3 MB for the preview's 12 x 256 x 256.
__global__ void transpose_gate_kernel(const float* gate, int H, int E, int D, int Dp, float* gt) {
  const int64_t n = int64_t(H) * Dp * kEP;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int e = static_cast<int>(i % kEP), k = static_cast<int>((i / kEP) % Dp),
              h = static_cast<int>(i / (int64_t(kEP) * Dp));
    gt[i] = (k < D && e < E) ? gate[(int64_t(h) * E + e) * D + k] : 0.f;
  }
}

// gate [H*E, D] fp32 -> gp [H, 3, 256, Dp] bf16, planes hi, mid, lo with g == hi + mid + lo exactly
// (see the header), expert rows k-contiguous (the MMA's "col" B operand as it is), zero for k >= D
// and e >= E, so that router_mma_kernel's stages are plain 16-byte copies with no bounds. 4.5 MB
// for the preview's 12 x 256 x 256.
__global__ void split_gate_kernel(const float* gate, int H, int E, int D, int Dp,
                                  __nv_bfloat16* gp) {
  const int64_t plane = int64_t(kEP) * Dp, n = int64_t(H) * plane;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int k = static_cast<int>(i % Dp), e = static_cast<int>((i / Dp) % kEP),
              h = static_cast<int>(i / plane);
    const float g = (k < D && e < E) ? gate[(int64_t(h) * E + e) * D + k] : 0.f;
    const __nv_bfloat16 hi = __float2bfloat16_rn(g);
    const float r = g - __bfloat162float(hi);  // exact: the rounding error of a round to nearest
    const __nv_bfloat16 mid = __float2bfloat16_rn(r);
    const __nv_bfloat16 lo =
        __float2bfloat16_rn(r - __bfloat162float(mid));  // exact: <= 8 significant bits left
    __nv_bfloat16* o = gp + int64_t(h) * kPlanes * plane + (i - int64_t(h) * plane);
    o[0] = hi;
    o[plane] = mid;
    o[2 * plane] = lo;
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

// 16-byte global -> shared copies that do not hold registers (sm_80+; a plain copy on the sm_75
// build).
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
  const void* x;      // [T, H*D], F32 or BF16
  const float* gt;    // transpose_gate_kernel's output (router_kernel)
  const float* bias;  // [H*E]
  int64_t T;
  int H, E, K, D, Dp;  // Dp: D rounded up to kBK (the k extent of gt / gp)
  bool softmax, norm;
  float scale;
  int* idx;                 // [T, H, K]
  float* w;                 // [T, H, K]
  float* logits;            // [T, H, E] or null
  const __nv_bfloat16* gp;  // split_gate_kernel's output (router_mma_kernel)
  float* gap;               // [T, H] or null: K-th minus (K+1)-th biased score (router statistics)
};

// This lane's bias in the slot order of expert_of.
__device__ __forceinline__ void load_bias(const RouterArgs& a, int h, int lane,
                                          float (&bias_v)[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int e = expert_of(lane, j);
    bias_v[j] = e < a.E ? a.bias[int64_t(h) * a.E + e] : 0.f;
  }
}

// This lane's best two (key, slot) pairs among the slots not in `taken`, best first; among equal
// keys the lower slot (= the lower expert) first, as the strict compares in slot order keep it. Key
// 0 = none.
__device__ __forceinline__ void lane_top2(const unsigned (&key)[8], unsigned taken, unsigned& k1,
                                          int& j1, unsigned& k2, int& j2) {
  k1 = k2 = 0u;
  j1 = j2 = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const unsigned v = (taken >> j) & 1u ? 0u : key[j];
    const bool c1 = v > k1, c2 = v > k2;
    k2 = c1 ? k1 : (c2 ? v : k2);
    j2 = c1 ? j1 : (c2 ? j : j2);
    k1 = c1 ? v : k1;
    j1 = c1 ? j : j1;
  }
}

// The round's winner lane among the lanes whose best key equals the warp max m: lane l's slots are
// experts 4l .. 4l+3 and 128 + 4l .. 128 + 4l + 3, so the lowest expert is in the lowest such lane
// whose best is below 128 (`low`), else in the lowest such lane (two ballots: shorter than a second
// warp reduction). `any`: some lane still holds a candidate (key 0 = none).
__device__ __forceinline__ int winner_lane(unsigned best, unsigned m, bool low, bool& any) {
  const bool tied = best == m && best != 0u;
  const unsigned lo = __ballot_sync(0xffffffffu, tied && low),
                 all = __ballot_sync(0xffffffffu, tied);
  any = all != 0u;
  return lo ? __ffs(lo) - 1 : (all ? __ffs(all) - 1 : 0);
}

// Lane k < K stores choice k of token slot p (expert e, unbiased score s) with the weight s / l1
// (when normalised) x route_scale; tokens past T (valid false) are not stored.
__device__ __forceinline__ void store_choice(const RouterArgs& a, int64_t p, bool valid, int lane,
                                             int e, float s, float l1) {
  if (valid && lane < a.K) {
    const float denom = a.norm ? fmaxf(l1, 1e-12f) : 1.0f;
    a.idx[p * a.K + lane] = e;
    a.w[p * a.K + lane] = (a.norm ? s / denom : s) * a.scale;
  }
}

// The K rounds: each lane keeps its best two untaken (key, slot) pairs and a round pops the
// winner's; the scores are fetched once after the rounds, summed into l1 in the CPU's order k = 0,
// 1, ... With a.gap, one more round finds the (K+1)-th best key, and lane 0 stores the K-th biased
// score minus it (+inf when no expert is left: K = E), the CPU's subtraction of the same floats.
template <int NT>
__device__ __forceinline__ void top_k_pairs(const RouterArgs& a, int lane, const float (&sc)[NT][8],
                                            unsigned (&key)[NT][8], const int64_t (&p)[NT],
                                            const bool (&valid)[NT]) {
  const unsigned full = 0xffffffffu;
  // Each lane keeps its best two untaken (key, slot) pairs, made by one pass over its 8 slots; a
  // round pops the winner lane's first pair. Only when a lane has popped both does every lane
  // rescan its untaken slots (the taken ones are bits of `taken`) - for ~40% of tokens once,
  // instead of a scan of all 8 slots in every round.
  int my_e[NT];  // lane k keeps the k-th choice
  unsigned k1[NT], k2[NT], taken[NT];
  int j1[NT], j2[NT], popped[NT];
  unsigned kth[NT], next[NT];  // the K-th and (K+1)-th best keys (with a.gap)
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    my_e[n] = 0;
    taken[n] = 0;
    popped[n] = 0;
    kth[n] = next[n] = 0u;
    lane_top2(key[n], 0u, k1[n], j1[n], k2[n], j2[n]);
  }
  const int rounds = a.K + (a.gap != nullptr ? 1 : 0);  // uniform across the warp
  for (int k = 0; k < rounds; ++k) {
    unsigned m[NT];
#pragma unroll
    for (int n = 0; n < NT; ++n) m[n] = warp_max_u32(k1[n]);
    if (k == a.K) {  // the extra round: only its best key, nothing is chosen
#pragma unroll
      for (int n = 0; n < NT; ++n) next[n] = m[n];
      break;
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      if (k == a.K - 1) kth[n] = m[n];
      bool all;
      const int wl = winner_lane(k1[n], m[n], j1[n] < 4, all);  // slot < 4: expert < 128
      const int jw = __shfl_sync(full, j1[n], wl);
      // No candidate left (unreachable for K <= E, checked on the host): expert 0, lane 0's slot 0.
      const int w = all ? expert_of(wl, jw) : 0;
      if (all && lane == wl) {  // pop; the taken bit keeps the slot out of any rescan
        taken[n] |= 1u << jw;
        k1[n] = k2[n];
        j1[n] = j2[n];
        k2[n] = 0u;
        ++popped[n];
      }
      if (lane == k) my_e[n] = w;
      // The winner used up its pair: rescan.
      if (__any_sync(full, popped[n] == 2) && k + 1 < rounds) {
        lane_top2(key[n], taken[n], k1[n], j1[n], k2[n], j2[n]);
        popped[n] = 0;
      }
    }
  }
  // The scores of the choices: lane k takes its expert's score from the lane holding it (8 shuffles
  // and a select, once per token instead of once per round), then every lane sums |score| in the
  // CPU's order k = 0, 1, ... - the same values in the same order as when each round fetched its
  // winner's score.
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int owner = (my_e[n] & 127) >> 2, js = (my_e[n] >> 7) * 4 + (my_e[n] & 3);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float v = __shfl_sync(full, sc[n][j], owner);
      if (j == js) s = v;
    }
    float l1 = 0.f;
    for (int k = 0; k < a.K; ++k) l1 += fabsf(__shfl_sync(full, s, k));
    store_choice(a, p[n], valid[n], lane, my_e[n], s, l1);
    if (a.gap && valid[n] && lane == 0)
      a.gap[p[n]] = next[n] != 0u ? key_value(kth[n]) - key_value(next[n]) : INFINITY;
  }
}

// NT tokens t[n] of head h, one warp: each token's logits in this lane's 8 slots (expert_of; sc[n],
// overwritten with the scores) -> logits out (when kept), the scores, the top-K of score + bias: K
// rounds of a warp arg-max over (key, expert): the max key, then the lowest expert among the lanes
// holding it (the CPU's tie rule, lower expert index first); the weights. Tokens with t[n] >= T are
// computed (on the zero rows the caller passes) and not stored. Both kernels call it, so both
// choose with the same code. Why NT tokens at once: each round is a dependent chain (a warp max,
// then the tie among the lanes holding it and the winner's score) whose latency the 16 warps of an
// SM did not hide; the NT chains interleave. Each token's arithmetic is the same as alone (the same
// bits).
template <int NT>
__device__ __forceinline__ void select_top_k(const RouterArgs& a, int h, const int64_t (&t)[NT],
                                             int lane, float (&sc)[NT][8],
                                             const float (&bias_v)[8]) {
  const unsigned full = 0xffffffffu;
  int64_t p[NT];
  bool valid[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    p[n] = t[n] * a.H + h;
    valid[n] = t[n] < a.T;
  }
  if (a.logits) {
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (valid[n] && expert_of(lane, j) < a.E)
          a.logits[p[n] * a.E + expert_of(lane, j)] = sc[n][j];
  }
  float mx[NT], sum[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    mx[n] = 0.f;
    sum[n] = 0.f;
  }
  if (a.softmax) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      mx[n] = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (expert_of(lane, j) < a.E) mx[n] = fmaxf(mx[n], sc[n][j]);
    }
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int n = 0; n < NT; ++n) mx[n] = fmaxf(mx[n], __shfl_xor_sync(full, mx[n], o));
  }
  // The scores, branch-free: every slot is computed and the slots past E are zeroed by a select
  // (the branch per slot cost a BSSY/BSYNC pair each), and 1 / (1 + e) as __frcp_rn, which rounds
  // the reciprocal as the IEEE division does (the same bits) without the division's slow-path
  // check.
  if (a.softmax) {
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float v = expf(sc[n][j] - mx[n]);
        sc[n][j] = expert_of(lane, j) < a.E ? v : 0.f;
        sum[n] += sc[n][j];
      }
  } else {
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float v = __frcp_rn(1.0f + expf(-sc[n][j]));
        sc[n][j] = expert_of(lane, j) < a.E ? v : 0.f;
      }
  }
  if (a.softmax) {
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int n = 0; n < NT; ++n) sum[n] += __shfl_xor_sync(full, sum[n], o);
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int j = 0; j < 8; ++j) sc[n][j] /= sum[n];
  }
  unsigned key[NT][8];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float b = sc[n][j] + bias_v[j];
      b = b == 0.f ? 0.f : b;  // -0 == +0 on the CPU: one key for both
      key[n][j] = expert_of(lane, j) < a.E ? order_key(b) : 0u;
    }
  top_k_pairs<NT>(a, lane, sc, key, p, valid);
}

// ---- router_kernel: fp32 logits on the CUDA cores
// ------------------------------------------------------

// x tile rows t0 .. t0+63, columns k0 .. k0+31 of head h: thread i loads token i / 4, 8 values from
// column (i % 4) * 8, into registers (the next stage is fetched while the current one computes).
// kVec: BF16 x with D % 8 == 0, one 16-byte load; else element loads with bounds.
template <bool kVec>
__device__ __forceinline__ void load_x(const RouterArgs& a, int64_t t0, int h, int k0, Elt xt,
                                       float (&v)[8]) {
  const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 8;
  const int64_t t = t0 + r;
  const int64_t HD = int64_t(a.H) * a.D;
  if constexpr (kVec) {
    if (t < a.T && k0 + c < a.D) {
      const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(a.x) +
                                                      t * HD + int64_t(h) * a.D + k0 + c);
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

  float bias_v[8];
  load_bias(a, h, lane, bias_v);
#pragma unroll  // acc[i] needs a compile-time i (a run-time index would put acc in local memory)
  for (int i = 0; i < 8; ++i) {
    const int64_t t = t0 + 8 * warp + i;
    if (t >= a.T) break;  // uniform across the warp
    const int64_t tt[1] = {t};
    float sc[1][8];
#pragma unroll
    for (int j = 0; j < 8; ++j) sc[0][j] = acc[i][j];
    select_top_k<1>(a, h, tt, lane, sc, bias_v);
  }
}

// ---- router_mma_kernel: bf16 tensor-core logits (sm_80+)
// -----------------------------------------------

#if __CUDA_ARCH__ >= 800
// Byte offset of 16-byte chunk c of row r in a stage tile (the swizzle described at kMmaStages).
__device__ __forceinline__ unsigned swizzle(int r, int c) {
  return static_cast<unsigned>(r * kRowBytes + ((c ^ ((r >> 1) & 3)) << 4));
}

// Stage `stage` <- k columns k0 .. k0+31: the x tile (64 tokens; thread i: token i / 4, chunk i %
// 4) and the three gate planes' 768 expert rows (12 chunks per thread). kVec: 16-byte cp.async of x
// (zeros past T and D); else element loads with bounds (D % 8 != 0 or x not 16-byte aligned),
// stored synchronously.
template <bool kVec>
__device__ __forceinline__ void load_mma_stage(const RouterArgs& a, int h, int64_t t0, int k0,
                                               unsigned char* smem, int stage) {
  unsigned char* st = smem + stage * kStageBytes;
  const unsigned sst = static_cast<unsigned>(__cvta_generic_to_shared(st));
  const int r = threadIdx.x / 4, c = threadIdx.x % 4;
  const int64_t t = t0 + r;
  const int k = k0 + 8 * c;
  const __nv_bfloat16* xs = static_cast<const __nv_bfloat16*>(a.x);
  const int64_t xi = t * (int64_t(a.H) * a.D) + int64_t(h) * a.D + k;
  if constexpr (kVec) {
    const bool valid = t < a.T && k < a.D;  // D % 8 == 0: a chunk is all in or all out
    cp_async16_zfill(sst + swizzle(r, c), valid ? xs + xi : xs, valid);
  } else {
    const unsigned short* xu = static_cast<const unsigned short*>(a.x);
    unsigned v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = (t < a.T && k + j < a.D) ? xu[xi + j] : 0u;
    *reinterpret_cast<uint4*>(st + swizzle(r, c)) = make_uint4(
        v[0] | (v[1] << 16), v[2] | (v[3] << 16), v[4] | (v[5] << 16), v[6] | (v[7] << 16));
  }
  const __nv_bfloat16* g = a.gp + int64_t(h) * kPlanes * kEP * a.Dp + k;  // + row * Dp
  const unsigned sg = sst + kXStageBytes;
#pragma unroll
  for (int j = 0; j < kPlanes * kEP * 4 / kRouterThreads; ++j) {
    const int row = r + j * (kRouterThreads / 4);  // plane * 256 + expert
    cp_async16_zfill(sg + swizzle(row, c), g + int64_t(row) * a.Dp, true);
  }
}
#endif

// Per block 64 tokens x 256 experts of head h; warp w computes the 64 x 32 logits of experts 32w ..
// 32w+31 (4 x 4 MMA tiles of 16 x 8, 64 accumulators per thread). Per 16 values of k a warp loads
// its A fragments once (4 ldmatrix.x4) and, per plane, its B fragments (2 ldmatrix.x4) for 16 MMAs:
// 10 ldmatrix per 48 MMAs. Then the logits go through shared memory into select_top_k's layout:
// warp w, tokens 8w .. 8w+7.
template <bool kVec>
__global__ void __launch_bounds__(kRouterThreads, 2) router_mma_kernel(RouterArgs a) {
#if __CUDA_ARCH__ >= 800
  extern __shared__ float4 smem4[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem4);
  const unsigned ssmem = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t0 = int64_t{blockIdx.x} * kBT;

  float acc[4][4][4];  // [token tile 16 mt][expert tile 32 warp + 8 nt][mma fragment]
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][nt][q] = 0.f;

  // ldmatrix.x4 rows: lanes 8j .. 8j+7 address matrix j. A (16 x 16 of x): matrices (rows 0-7 |
  // 8-15) x (k 0-7 | 8-15) in the order a0..a3. B (16 experts x 16 k): (experts 0-7, k 0-7), (0-7,
  // 8-15), (8-15, 0-7), (8-15, 8-15) = b0, b1 of expert tile 2np and of 2np+1. The swizzle of a row
  // depends only on its low 3 bits.
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_chunk = lane >> 4;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_chunk = (lane >> 3) & 1;
  const int a_swz = (a_row >> 1) & 3, b_swz = (b_row >> 1) & 3;
  const bool active = 32 * warp < a.E;  // warp-uniform: experts past E are zero columns

  const int nk = a.Dp / kBK;
#pragma unroll
  for (int s = 0; s < kMmaStages - 1; ++s) {
    if (s < nk) load_mma_stage<kVec>(a, h, t0, s * kBK, smem, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < nk; ++kt) {
    cp_async_wait_group<kMmaStages - 2>();  // stage kt has landed (this thread's copies) ...
    __syncthreads();  // ... everyone's, and every warp is done with the stage the next load
                      // overwrites
    const int kn = kt + kMmaStages - 1;
    if (kn < nk) load_mma_stage<kVec>(a, h, t0, kn * kBK, smem, kn % kMmaStages);
    cp_async_commit();
    if (active) {
      const unsigned sx = ssmem + (kt % kMmaStages) * kStageBytes, sg = sx + kXStageBytes;
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks) {
        unsigned af[4][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
          ldmatrix_x4(sx + (16 * mt + a_row) * kRowBytes + (((2 * ks + a_chunk) ^ a_swz) << 4),
                      af[mt]);
#pragma unroll
        for (int p = kPlanes - 1; p >= 0; --p) {  // lo, mid, hi: the smallest terms first
          unsigned bf[2][4];
#pragma unroll
          for (int np = 0; np < 2; ++np)
            ldmatrix_x4(sg + (p * kEP + 32 * warp + 16 * np + b_row) * kRowBytes +
                            (((2 * ks + b_chunk) ^ b_swz) << 4),
                        bf[np]);
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
              mma_bf16_16816(acc[mt][nt], af[mt], bf[nt / 2][2 * (nt % 2)],
                             bf[nt / 2][2 * (nt % 2) + 1]);
        }
      }
    }
  }
  cp_async_wait_group<0>();  // (only empty groups are left)
  __syncthreads();           // every warp is done with the stages: they become the logits tile

  // Fragment (mt, nt): d0, d1 at token 16 mt + lane / 4, experts 32 warp + 8 nt + 2 (lane % 4) +
  // {0, 1}; d2, d3 eight tokens further.
  float* tile = reinterpret_cast<float*>(smem);
  const int fr = lane >> 2, fc = 2 * (lane & 3);
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      float* o = tile + (16 * mt + fr) * kLogitStride + 32 * warp + 8 * nt + fc;
      *reinterpret_cast<float2*>(o) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
      *reinterpret_cast<float2*>(o + 8 * kLogitStride) =
          make_float2(acc[mt][nt][2], acc[mt][nt][3]);
    }
  __syncthreads();

  // Tokens per select_top_k call (their chains interleave): 2 (4 fit in 128 registers, no faster).
  constexpr int kTopKTokens = 2;
  float bias_v[8];
  load_bias(a, h, lane, bias_v);
  for (int i = 0; i < 8; i += kTopKTokens) {
    const int r = 8 * warp + i;
    if (t0 + r >= a.T)
      break;  // uniform across the warp (tokens past T in the group are not stored)
    int64_t tt[kTopKTokens];
    float logit[kTopKTokens][8];
#pragma unroll
    for (int n = 0; n < kTopKTokens; ++n) {
      tt[n] = t0 + r + n;
      const float4 l0 = *reinterpret_cast<const float4*>(tile + (r + n) * kLogitStride + 4 * lane);
      const float4 l1 =
          *reinterpret_cast<const float4*>(tile + (r + n) * kLogitStride + 128 + 4 * lane);
      const float v[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
#pragma unroll
      for (int q = 0; q < 8; ++q) logit[n][q] = v[q];
    }
    select_top_k<kTopKTokens>(a, h, tt, lane, logit, bias_v);
  }
#else
  __trap();  // launch_router only launches it where the device code was built for sm_80+
#endif
}

// Whether router_mma_kernel can run here: an sm_80+ GPU, device code built for sm_80+ (not
// JIT-compiled from older PTX, where the kernel is an empty trap) and room for its shared memory
// (not on sm_86 / sm_89: 99 KB).
bool mma_router_available(Device& dev) {
  if (dev.props().major < 8 || dev.props().sharedMemPerBlockOptin < size_t{kMmaSmemBytes})
    return false;
  cudaFuncAttributes attr{};
  AVDIT_CUDA_CHECK(cudaFuncGetAttributes(&attr, router_mma_kernel<true>));
  return attr.ptxVersion >= 80;
}

}  // namespace

bool launch_router(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias,
                   const RouterConfig& cfg, int64_t T, int* idx, float* w, float* logits,
                   bool allow_tensor_cores) {
  return launch_router(dev, x, gate, bias, cfg, T, idx, w, logits, nullptr, allow_tensor_cores);
}

bool launch_router(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias,
                   const RouterConfig& cfg, int64_t T, int* idx, float* w, float* logits,
                   float* gap, bool allow_tensor_cores) {
  const Elt xt = elt_of(x, "moe route x");
  const int H = static_cast<int>(cfg.heads), E = static_cast<int>(cfg.experts),
            D = static_cast<int>(cfg.head_dim);
  const int Dp = (D + kBK - 1) / kBK * kBK;
  RouterArgs a{x.raw(),
               nullptr,
               cptr<float>(bias),
               T,
               H,
               E,
               static_cast<int>(cfg.top_k),
               D,
               Dp,
               cfg.softmax,
               cfg.route_norm,
               cfg.route_scale,
               idx,
               w,
               logits,
               nullptr,
               gap};
  const bool vec = xt == Elt::BF16 && D % 8 == 0 && reinterpret_cast<uintptr_t>(x.raw()) % 16 == 0;
  const dim3 grid(static_cast<unsigned>((T + kBT - 1) / kBT), static_cast<unsigned>(H));
  if (allow_tensor_cores && xt == Elt::BF16 && mma_router_available(dev)) {
    Tensor gp = cuda_empty(dev, {int64_t(H) * kPlanes * kEP * Dp}, DType::BF16);
    a.gp = static_cast<const __nv_bfloat16*>(device_ptr(gp));
    split_gate_kernel<<<grid_for(int64_t(H) * kEP * Dp), kRouterThreads, 0, dev.stream()>>>(
        cptr<float>(gate), H, E, D, Dp, static_cast<__nv_bfloat16*>(device_ptr(gp)));
    AVDIT_CUDA_CHECK_LAUNCH();
    auto kernel = vec ? router_mma_kernel<true> : router_mma_kernel<false>;
    AVDIT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMmaSmemBytes));
    kernel<<<grid, kRouterThreads, kMmaSmemBytes, dev.stream()>>>(a);
    AVDIT_CUDA_CHECK_LAUNCH();
    return true;
  }
  Tensor gt = cuda_empty(dev, {int64_t(H) * Dp * kEP}, DType::F32);
  a.gt = cptr<float>(gt);
  transpose_gate_kernel<<<grid_for(gt.numel()), kRouterThreads, 0, dev.stream()>>>(
      cptr<float>(gate), H, E, D, Dp, static_cast<float*>(device_ptr(gt)));
  AVDIT_CUDA_CHECK_LAUNCH();
  auto kernel = vec ? router_kernel<true> : router_kernel<false>;
  AVDIT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  kernel<<<grid, kRouterThreads, kSmemBytes, dev.stream()>>>(a, xt);
  AVDIT_CUDA_CHECK_LAUNCH();
  return false;
}

}  // namespace avdit::cuda::moe
