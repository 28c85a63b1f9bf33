// The MAGI-2 multi-head MoE on the GPU (moe.h): the router's checks (its fused kernel is
// router.cu), the permutation by (head, expert), the reference (SIMT) expert kernels and the
// combine. The tensor-core expert path is grouped.h. CPU oracle: ops/cpu/moe.cpp.
#include <cub/cub.cuh>

#include <climits>
#include <cmath>
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/moe/grouped.h"
#include "ops/cuda/moe/moe.h"
#include "ops/cuda/moe/moe_internal.h"

namespace avdit::cuda::moe {
namespace {

// ---- permutation -------------------------------------------------------------------------------
// A stable counting sort of the slots by group g = h*E + e (the order LSD radix sort gave: by
// group, then by slot s = (t*H + h)*K + k): per block 256 tokens of one head (a tile), counted, one
// exclusive scan over [group][tile], then placed. Warp w of a tile owns tokens 32w .. 32w+31 (their
// indices staged in shared memory); a slot's rank among its group's slots is the tile's base for
// that expert, plus the slots of the warps before, plus its rank in the warp: the warp's tokens
// below it that chose the same expert (a per-expert bit mask of the warp's tokens, lane i = token
// i, all K choices at once), or, in a warp where a token holds an expert twice (permute() takes any
// indices; route() never gives that), a walk over the tokens in order with lane k = choice k and
// __match_any_sync (k order for the repeats). Why: a radix sort (keys + two 8-bit passes + offsets
// + inverse) costs more passes over the slots than one count, one scan and one placement.
constexpr int kPermWarps = 8;               // warps per block
constexpr int kPermTile = 32 * kPermWarps;  // tokens per block (32 per warp)

struct PermTile {
  int hist[kPermWarps][kMaxExperts];       // per warp: its slots per expert, then its running base
  unsigned mask[kPermWarps][kMaxExperts];  // per warp (fast path): bit i = token i chose the expert
  int e[kPermWarps][32 * kMaxTopK];        // the warp's tokens' choices, clamped (-1 past T)
};

// Stages warp w's 32 tokens' choices, zeroes hist[w], and says (warp-uniform) whether a token of
// the warp holds an expert twice (route() never does so; permute() takes any indices): then the
// walk below ranks the slots, else lane i (token i) does its K choices at once.
__device__ __forceinline__ bool perm_stage(const int* idx, int64_t T, int H, int E, int K, int h,
                                           int64_t tile, PermTile& sm) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int e = lane; e < E; e += 32) sm.hist[w][e] = 0;
  const int64_t t0 = tile * kPermTile + 32 * w;
  for (int j = lane; j < 32 * K; j += 32) {
    const int64_t t = t0 + j / K;
    int e = -1;
    if (t < T) {
      e = idx[(t * H + h) * K + j % K];
      e = e < 0 ? 0
                : (e >= E ? E - 1 : e);  // indices come from route(); clamp, never out of bounds
    }
    sm.e[w][j] = e;
  }
  __syncwarp();
  bool dup = false;
  const int* mine = sm.e[w] + lane * K;
  for (int k = 1; k < K; ++k)
    for (int k2 = 0; k2 < k; ++k2) dup |= mine[k] >= 0 && mine[k] == mine[k2];
  return __any_sync(0xffffffffu, dup);
}

// The walk for warps with repeated experts: tokens in order, lane k = choice k; place(e, rank, k,
// token) for each slot, rank = hist[w][e] + the lanes below with the same expert; hist[w][e] then
// grows by them.
template <class Place>
__device__ __forceinline__ void perm_walk(int64_t T, int K, int64_t t0, PermTile& sm, Place place) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = 0; i < 32 && t0 + i < T; ++i) {
    const int e = lane < K ? sm.e[w][i * K + lane] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (lane < K) {
      const unsigned below = peers & ((1u << lane) - 1u);
      place(e, sm.hist[w][e] + __popc(below), lane, i);
      __syncwarp(peers);  // every peer read hist[w][e] before the lowest one adds to it
      if (below == 0) sm.hist[w][e] += __popc(peers);
    }
    __syncwarp();
  }
}

// counts[(h*E + e) * nt + tile] = the tile's slots on expert e.
__global__ void __launch_bounds__(kPermWarps * 32)
    perm_count_kernel(const int* idx, int64_t T, int H, int E, int K, int nt, int* counts) {
  __shared__ PermTile sm;
  const int h = blockIdx.y, tile = blockIdx.x;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool dup = perm_stage(idx, T, H, E, K, h, tile, sm);
  if (dup) {
    perm_walk(T, K, int64_t(tile) * kPermTile + 32 * w, sm, [](int, int, int, int) {});
  } else {
    for (int k = 0; k < K; ++k) {
      const int e = sm.e[w][lane * K + k];
      if (e >= 0) atomicAdd(&sm.hist[w][e], 1);
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int c = 0;
    for (int v = 0; v < kPermWarps; ++v) c += sm.hist[v][e];
    counts[(int64_t(h) * E + e) * nt + tile] = c;
  }
}

// base = the exclusive scan of counts. Each slot's sorted row = base of its (group, tile) + the
// slots of the warps before + its rank in the warp: without repeated experts, the tokens below it
// holding the same expert (a per-expert mask of the warp's tokens); with them, the walk.
__global__ void __launch_bounds__(kPermWarps * 32)
    perm_place_kernel(const int* idx, int64_t T, int H, int E, int K, int nt, const int* base,
                      int* sorted_slot, int* slot_pos) {
  __shared__ PermTile sm;
  const int h = blockIdx.y, tile = blockIdx.x;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool dup = perm_stage(idx, T, H, E, K, h, tile, sm);
  const int64_t t0 = int64_t(tile) * kPermTile + 32 * w;
  if (dup) {
    perm_walk(T, K, t0, sm, [](int, int, int, int) {});  // the counts only
  } else {
    for (int e = lane; e < E; e += 32) sm.mask[w][e] = 0u;
    __syncwarp();
    for (int k = 0; k < K; ++k) {
      const int e = sm.e[w][lane * K + k];
      if (e >= 0) {
        atomicAdd(&sm.hist[w][e], 1);
        atomicOr(&sm.mask[w][e], 1u << lane);
      }
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E;
       e += blockDim.x) {  // hist[w][e] becomes warp w's first row for e
    int run = base[(int64_t(h) * E + e) * nt + tile];
    for (int v = 0; v < kPermWarps; ++v) {
      const int c = sm.hist[v][e];
      sm.hist[v][e] = run;
      run += c;
    }
  }
  __syncthreads();
  auto put = [&](int row, int k, int i) {
    const int64_t s = ((t0 + i) * H + h) * K + k;
    sorted_slot[row] = static_cast<int>(s);
    slot_pos[s] = row;
  };
  if (dup) {
    perm_walk(T, K, t0, sm, [&](int, int row, int k, int i) { put(row, k, i); });
  } else {
    for (int k = 0; k < K; ++k) {
      const int e = sm.e[w][lane * K + k];
      if (e >= 0) put(sm.hist[w][e] + __popc(sm.mask[w][e] & ((1u << lane) - 1u)), k, lane);
    }
  }
}

// offsets[g] = base of (g, tile 0); offsets[G] = S.
__global__ void perm_offsets_kernel(const int* base, int G, int nt, int64_t S, int* offsets) {
  for (int g = blockIdx.x * blockDim.x + threadIdx.x; g <= G; g += gridDim.x * blockDim.x)
    offsets[g] = g < G ? base[int64_t(g) * nt] : static_cast<int>(S);
}

// The permutation's tile table (moe_internal.h: scan, then fill).
struct TileRows {
  int BM;
  const int* offsets;
  int* tile_group;
  int* tile_row;
  __device__ void operator()(int64_t j, int g, int m) const {
    tile_group[j] = g;
    tile_row[j] = offsets[g] + m * BM;
  }
};

// ---- reference expert kernels (SIMT, fp32 math) -----------------------------------------------
// 64 x 64 output tile per block, 16-deep K steps, 4 x 4 outputs per thread. kGateUp: A rows are the
// gathered x rows of the slots, B is W_gate and W_up (two accumulators), the epilogue is swiglu7
// into hbuf [S, De]. Else: A = hbuf rows, B = W_down, epilogue weight * y into rows [S, D].
constexpr int kSimtBM = 64, kSimtBN = 64, kSimtBK = 16;

struct SimtArgs {
  const void* x;
  Elt xt;
  const int* sorted_slot;
  const float* slot_weight;
  const int* offsets;
  const int* tile_group;
  const int* tile_row;
  const int* tile_count;
  const void* b0;
  const void* b1;
  Elt bt;
  bool k_major;
  void* out;
  Elt ot;
  int H, K, D, De;
};

__device__ __forceinline__ float round_bf16(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

template <bool kGateUp>
__global__ void __launch_bounds__(256) simt_expert_kernel(SimtArgs a) {
  const int tile = blockIdx.x;
  if (tile >= *a.tile_count) return;
  const int g = a.tile_group[tile], r0 = a.tile_row[tile], r1 = a.offsets[g + 1];
  const int Kd = kGateUp ? a.D : a.De, N = kGateUp ? a.De : a.D;
  const int n0 = blockIdx.y * kSimtBN;
  if (n0 >= N) return;
  __shared__ float As[kSimtBK][kSimtBM + 4];
  __shared__ float Bs[kGateUp ? 2 : 1][kSimtBK][kSimtBN + 4];
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  float acc0[4][4] = {}, acc1[4][4] = {};
  const int64_t W = int64_t(a.H) * a.D;
  for (int k0 = 0; k0 < Kd; k0 += kSimtBK) {
    for (int i = tid; i < kSimtBM * kSimtBK; i += 256) {
      const int r = i / kSimtBK, kk = i % kSimtBK, row = r0 + r, k = k0 + kk;
      float v = 0.f;
      if (row < r1 && k < Kd) {
        if (kGateUp) {
          const int s = a.sorted_slot[row];
          const int t = s / (a.H * a.K), h = (s / a.K) % a.H;
          v = load_elt(a.x, a.xt, t * W + int64_t(h) * a.D + k);
        } else {
          v = load_elt(a.x, a.xt, int64_t(row) * a.De + k);
        }
      }
      As[kk][r] = v;
    }
    for (int i = tid; i < kSimtBK * kSimtBN; i += 256) {
      const int kk = i / kSimtBN, c = i % kSimtBN, k = k0 + kk, n = n0 + c;
      float v0 = 0.f, v1 = 0.f;
      if (k < Kd && n < N) {
        const int64_t at =
            a.k_major ? (int64_t(g) * N + n) * Kd + k : (int64_t(g) * Kd + k) * N + n;
        v0 = load_elt(a.b0, a.bt, at);
        if (kGateUp) v1 = load_elt(a.b1, a.bt, at);
      }
      Bs[0][kk][c] = v0;
      if (kGateUp) Bs[kGateUp ? 1 : 0][kk][c] = v1;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSimtBK; ++kk) {
      float av[4], bv0[4], bv1[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        bv0[j] = Bs[0][kk][tx * 4 + j];
        bv1[j] = kGateUp ? Bs[kGateUp ? 1 : 0][kk][tx * 4 + j] : 0.f;
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc0[i][j] = fmaf(av[i], bv0[j], acc0[i][j]);
          if (kGateUp) acc1[i][j] = fmaf(av[i], bv1[j], acc1[i][j]);
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = r0 + ty * 4 + i;
    if (row >= r1) continue;
    const float p = kGateUp ? 1.f : a.slot_weight[a.sorted_slot[row]];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tx * 4 + j;
      if (n >= N) continue;
      const float v = kGateUp ? swiglu7_f(acc0[i][j], acc1[i][j]) : p * acc0[i][j];
      store_elt(a.out, a.ot, int64_t(row) * N + n, v);
    }
  }
}

// ---- combine -----------------------------------------------------------------------------------
// One warp per (token, head). Lanes 0..K-1 hold the pair's K (expert, sorted row) entries; a lane's
// rank in ascending expert order (equal experts: the lower k first, a stable order) fixes the
// summation order. Each lane then sums its columns over the K rows, the running sum in fp32 (F32
// out) or rounded to bf16 after each add (BF16 out): bit for bit the contract of moe.h. No atomics.
constexpr int kCombineWarps = 8;

// p[r] = sorted row of the pair's r-th entry in ascending expert order (r < K; the rest left as
// is).
__device__ __forceinline__ void combine_order(const int* idx, const int* pos, int64_t th, int K,
                                              int lane, int (&p)[kMaxTopK]) {
  const unsigned full = 0xffffffffu;
  int e = INT_MAX, row = 0;
  if (lane < K) {
    e = idx[th * K + lane];
    row = pos[th * K + lane];
  }
  int rank = 0;
#pragma unroll
  for (int j = 0; j < kMaxTopK; ++j) {
    if (j >= K) break;
    const int ej = __shfl_sync(full, e, j);
    rank += (ej < e || (ej == e && j < lane)) ? 1 : 0;
  }
#pragma unroll
  for (int r = 0; r < kMaxTopK; ++r) {
    if (r >= K) break;
    const unsigned b =
        __ballot_sync(full, lane < K && rank == r);  // exactly one lane: ranks are 0..K-1
    p[r] = __shfl_sync(full, row, __ffs(b) - 1);
  }
}

// 8 consecutive elements: one 16-byte load (two for F32), streamed (each row is read once).
template <class T>
struct Vec8 {
  uint4 u;
  __device__ __forceinline__ void load(const T* p) {
    u = __ldcs(reinterpret_cast<const uint4*>(p));
  }
  __device__ __forceinline__ void to_float(float (&f)[8]) const {
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        f[2 * j] = __uint_as_float(w[j] << 16);  // bf16 -> f32 is exact: the bits in the high half
        f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
      } else {
        f[2 * j] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[j] & 0xffffu)));
        f[2 * j + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[j] >> 16)));
      }
    }
  }
};
template <>
struct Vec8<float> {
  float4 a, b;
  __device__ __forceinline__ void load(const float* p) {
    a = __ldcs(reinterpret_cast<const float4*>(p));
    b = __ldcs(reinterpret_cast<const float4*>(p + 4));
  }
  __device__ __forceinline__ void to_float(float (&f)[8]) const {
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  }
};

__device__ __forceinline__ void store8(float* p, const float (&f)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
}
__device__ __forceinline__ void store8(__nv_bfloat16* p, const float (&f)[8]) {
  unsigned w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    w[j] = unsigned(__bfloat16_as_ushort(__float2bfloat16_rn(f[2 * j]))) |
           (unsigned(__bfloat16_as_ushort(__float2bfloat16_rn(f[2 * j + 1]))) << 16);
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

// Where (token, head) th's D outputs start: token th / H's row of ld elements, head th % H's
// columns (ld = H*D: the plain [T, H*D] output; larger: columns 0 .. H*D-1 of a wider buffer,
// combine's `into`).
__device__ __forceinline__ int64_t out_row(int64_t th, int H, int D, int64_t ld) {
  return (th / H) * ld + (th % H) * int64_t(D);
}

// D % 8 == 0, 16-byte aligned rows and out: each lane sums 8 columns at a time, the K rows' loads
// issued together (in batches of 8 rows to bound the registers) before the ordered adds.
template <class TIn, class TOut>
__global__ void __launch_bounds__(kCombineWarps * 32)
    combine_vec_kernel(const TIn* rows, const int* idx, const int* pos, int64_t TH, int K, int D,
                       int H, int64_t ld, TOut* out) {
  constexpr bool kBf16Sum = std::is_same_v<TOut, __nv_bfloat16>;
  const int lane = threadIdx.x % 32;
  const int64_t th = int64_t{blockIdx.x} * kCombineWarps + threadIdx.x / 32;
  if (th >= TH) return;
  int p[kMaxTopK];
  combine_order(idx, pos, th, K, lane, p);
  if constexpr (std::is_same_v<TIn, __nv_bfloat16> && kBf16Sum) {
    // bf16 rows into a bf16 running sum: add.rn.bf16x2, two columns per instruction. The same bits
    // as round_bf16(float(acc) + float(v)) below: the fp32 sum of two bf16 values is exact unless
    // their exponents are more than 16 apart (then both forms give the larger one), so both are the
    // correctly rounded bf16 sum; +0 start as there. Why: the float form's conversions keep the XU
    // pipe busy and bound the combine.
    for (int c = lane * 8; c < D; c += 32 * 8) {
      __nv_bfloat162 acc[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j] = __float2bfloat162_rn(0.f);
#pragma unroll
      for (int b = 0; b < kMaxTopK / 8; ++b) {
        if (b * 8 >= K) break;
        uint4 v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
          if (b * 8 + i < K)
            v[i] = __ldcs(reinterpret_cast<const uint4*>(rows + int64_t(p[b * 8 + i]) * D + c));
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (b * 8 + i >= K) break;
          const unsigned w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
          for (int j = 0; j < 4; ++j)
            acc[j] = __hadd2_rn(acc[j], *reinterpret_cast<const __nv_bfloat162*>(&w[j]));
        }
      }
      uint4 o;
      o.x = *reinterpret_cast<const unsigned*>(&acc[0]);
      o.y = *reinterpret_cast<const unsigned*>(&acc[1]);
      o.z = *reinterpret_cast<const unsigned*>(&acc[2]);
      o.w = *reinterpret_cast<const unsigned*>(&acc[3]);
      *reinterpret_cast<uint4*>(out + out_row(th, H, D, ld) + c) = o;
    }
  } else {
    for (int c = lane * 8; c < D; c += 32 * 8) {
      float acc[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = 0.f;
#pragma unroll
      for (int b = 0; b < kMaxTopK / 8; ++b) {
        if (b * 8 >= K) break;
        Vec8<TIn> v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
          if (b * 8 + i < K) v[i].load(rows + int64_t(p[b * 8 + i]) * D + c);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (b * 8 + i >= K) break;
          float f[8];
          v[i].to_float(f);
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[j] = kBf16Sum ? round_bf16(acc[j] + f[j]) : acc[j] + f[j];
        }
      }
      store8(out + out_row(th, H, D, ld) + c, acc);
    }
  }
}

// Any D, dtype chosen at run time: one column per lane per step.
__global__ void __launch_bounds__(kCombineWarps * 32)
    combine_scalar_kernel(const void* rows, Elt rt, const int* idx, const int* pos, int64_t TH,
                          int K, int D, int H, int64_t ld, bool bf16_sum, void* out, Elt ot) {
  const int lane = threadIdx.x % 32;
  const int64_t th = int64_t{blockIdx.x} * kCombineWarps + threadIdx.x / 32;
  if (th >= TH) return;
  int p[kMaxTopK];
  combine_order(idx, pos, th, K, lane, p);
  for (int d = lane; d < D; d += 32) {
    float sum = 0.f;
#pragma unroll
    for (int r = 0; r < kMaxTopK; ++r) {
      if (r >= K) break;
      const float v = load_elt(rows, rt, int64_t(p[r]) * D + d);
      sum = bf16_sum ? round_bf16(sum + v) : sum + v;
    }
    store_elt(out, ot, out_row(th, H, D, ld) + d, sum);
  }
}

template <class TIn, class TOut>
void launch_combine_vec(const Tensor& rows, const int* idx, const int* pos, int64_t TH, int K,
                        int D, int H, int64_t ld, Tensor& o, cudaStream_t st) {
  const unsigned blocks = static_cast<unsigned>((TH + kCombineWarps - 1) / kCombineWarps);
  combine_vec_kernel<TIn, TOut><<<blocks, kCombineWarps * 32, 0, st>>>(
      cptr<TIn>(rows), idx, pos, TH, K, D, H, ld, static_cast<TOut*>(device_ptr(o)));
}

void check_shape(const Tensor& t, const Shape& want, const char* what) {
  AVDIT_REQUIRE(t.shape() == want, "{}: expected shape {}, got {}", what,
                Tensor::empty(want, DType::U8).shape_str(), t.shape_str());
}

void check_routing(const Routing& r, const RouterConfig& cfg, int64_t T) {
  require_i32(r.indices, "moe routing.indices");
  require_cuda(r.weights, "moe routing.weights");
  AVDIT_REQUIRE(r.weights.dtype() == DType::F32, "moe routing.weights: expected F32, got {}",
                dtype_name(r.weights.dtype()));
  check_shape(r.indices, {T, cfg.heads, cfg.top_k}, "moe routing.indices");
  check_shape(r.weights, {T, cfg.heads, cfg.top_k}, "moe routing.weights");
}

}  // namespace

__global__ void __launch_bounds__(kTileScanThreads)
    tile_scan_kernel(const int* offsets, int G, int BM, int* tile_base, int* count) {
  using Scan = cub::BlockScan<int, kTileScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int per = (G + kTileScanThreads - 1) / kTileScanThreads;
  const int g0 = threadIdx.x * per, g1 = min(G, g0 + per);
  auto tiles = [&](int g) { return (offsets[g + 1] - offsets[g] + BM - 1) / BM; };
  int mine = 0;
  for (int g = g0; g < g1; ++g) mine += tiles(g);
  int base = 0, total = 0;
  Scan(tmp).ExclusiveSum(mine, base, total);
  for (int g = g0; g < g1; ++g) {
    tile_base[g] = base;
    base += tiles(g);
  }
  if (threadIdx.x == 0) {
    tile_base[G] = total;
    *count = total;
  }
}

void check_config(const RouterConfig& cfg) {
  AVDIT_REQUIRE(cfg.heads > 0 && cfg.experts > 0 && cfg.top_k > 0 && cfg.head_dim > 0,
                "moe config: heads {}, experts {}, top_k {}, head_dim {} must all be positive",
                cfg.heads, cfg.experts, cfg.top_k, cfg.head_dim);
  AVDIT_REQUIRE(cfg.experts <= kMaxExperts,
                "moe config: {} experts per head, the GPU router handles at most {}", cfg.experts,
                kMaxExperts);
  AVDIT_REQUIRE(cfg.top_k <= kMaxTopK && cfg.top_k <= cfg.experts,
                "moe config: top_k {} must be <= {} and <= experts {}", cfg.top_k, kMaxTopK,
                cfg.experts);
}

Routing route(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias,
              const RouterConfig& cfg, bool keep_logits, bool keep_gap) {
  check_config(cfg);
  require_cuda(x, "moe route x");
  require_cuda(gate, "moe route gate");
  require_cuda(bias, "moe route bias");
  const Elt xt = elt_of(x, "moe route x");
  AVDIT_REQUIRE(xt != Elt::F16, "moe route x: F32 or BF16 expected, got F16");
  AVDIT_REQUIRE(x.ndim() == 2 && x.size(1) == cfg.heads * cfg.head_dim,
                "moe route x: expected [T, {}], got {}", cfg.heads * cfg.head_dim, x.shape_str());
  AVDIT_REQUIRE(gate.dtype() == DType::F32 && bias.dtype() == DType::F32,
                "moe route: gate and bias must be F32 ({}, {})", dtype_name(gate.dtype()),
                dtype_name(bias.dtype()));
  check_shape(gate, {cfg.heads * cfg.experts, cfg.head_dim}, "moe route gate");
  check_shape(bias, {cfg.heads * cfg.experts}, "moe route bias");
  const int64_t T = x.size(0);
  AVDIT_REQUIRE(T * cfg.heads * cfg.top_k < INT_MAX,
                "moe route: {} tokens give more slots than I32 indexes", T);
  Routing r;
  r.indices = cuda_empty(dev, {T, cfg.heads, cfg.top_k}, DType::I32);
  r.weights = cuda_empty(dev, {T, cfg.heads, cfg.top_k}, DType::F32);
  if (keep_logits) r.logits = cuda_empty(dev, {T, cfg.heads, cfg.experts}, DType::F32);
  if (keep_gap) r.gap = cuda_empty(dev, {T, cfg.heads}, DType::F32);
  if (T == 0) return r;
  launch_router(dev, x, gate, bias, cfg, T, static_cast<int*>(device_ptr(r.indices)),
                static_cast<float*>(device_ptr(r.weights)),
                keep_logits ? static_cast<float*>(device_ptr(r.logits)) : nullptr,
                keep_gap ? static_cast<float*>(device_ptr(r.gap)) : nullptr, true);
  return r;
}

Permutation permute(Device& dev, const Routing& routing, const RouterConfig& cfg, int tile_rows) {
  check_config(cfg);
  AVDIT_REQUIRE(tile_rows >= 0, "moe permute: tile_rows {} must be >= 0 (0: no tile table)",
                tile_rows);
  const int64_t T =
      routing.indices.defined() && routing.indices.ndim() == 3 ? routing.indices.size(0) : -1;
  AVDIT_REQUIRE(T >= 0, "moe permute: routing.indices must be [T, heads, K]");
  check_routing(routing, cfg, T);
  const int64_t S = T * cfg.heads * cfg.top_k;
  const int G = static_cast<int>(cfg.heads * cfg.experts);
  Permutation p;
  p.tile_rows = tile_rows;
  p.sorted_slot = cuda_empty(dev, {S}, DType::I32);
  p.slot_pos = cuda_empty(dev, {S}, DType::I32);
  p.offsets = cuda_empty(dev, {G + 1}, DType::I32);
  if (tile_rows > 0) {
    p.max_tiles = (S + tile_rows - 1) / tile_rows + G;
    p.tile_group = cuda_empty(dev, {p.max_tiles}, DType::I32);
    p.tile_row = cuda_empty(dev, {p.max_tiles}, DType::I32);
    p.tile_count = cuda_empty(dev, {1}, DType::I32);
  }
  cudaStream_t st = dev.stream();
  int* offsets = static_cast<int*>(device_ptr(p.offsets));
  if (S == 0) {
    AVDIT_CUDA_CHECK(cudaMemsetAsync(offsets, 0, sizeof(int) * (G + 1), st));
  } else {
    const int nt = static_cast<int>((T + kPermTile - 1) / kPermTile);
    const int64_t n = int64_t(G) * nt;
    AVDIT_REQUIRE(n < INT_MAX, "moe permute: {} tokens x {} groups are too many for one scan", T,
                  G);
    Tensor counts = cuda_empty(dev, {n}, DType::I32), base = cuda_empty(dev, {n}, DType::I32);
    const dim3 grid(static_cast<unsigned>(nt), static_cast<unsigned>(cfg.heads));
    const int H = static_cast<int>(cfg.heads), E = static_cast<int>(cfg.experts),
              K = static_cast<int>(cfg.top_k);
    perm_count_kernel<<<grid, kPermWarps * 32, 0, st>>>(cptr<int32_t>(routing.indices), T, H, E, K,
                                                        nt, static_cast<int*>(device_ptr(counts)));
    AVDIT_CUDA_CHECK_LAUNCH();
    size_t temp_bytes = 0;
    AVDIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, cptr<int32_t>(counts),
                                                   static_cast<int*>(device_ptr(base)),
                                                   static_cast<int>(n), st));
    Tensor temp = cuda_empty(dev, {static_cast<int64_t>(temp_bytes) + 1}, DType::U8);
    AVDIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(
        device_ptr(temp), temp_bytes, cptr<int32_t>(counts), static_cast<int*>(device_ptr(base)),
        static_cast<int>(n), st));
    perm_place_kernel<<<grid, kPermWarps * 32, 0, st>>>(
        cptr<int32_t>(routing.indices), T, H, E, K, nt, cptr<int32_t>(base),
        static_cast<int*>(device_ptr(p.sorted_slot)), static_cast<int*>(device_ptr(p.slot_pos)));
    AVDIT_CUDA_CHECK_LAUNCH();
    perm_offsets_kernel<<<grid_for(G + 1), kThreads, 0, st>>>(cptr<int32_t>(base), G, nt, S,
                                                              offsets);
    AVDIT_CUDA_CHECK_LAUNCH();
  }
  if (tile_rows == 0)
    return p;  // no tile table (the grouped path reads only sorted_slot and offsets)
  Tensor tile_base = cuda_empty(dev, {G + 1}, DType::I32);
  int* tb = static_cast<int*>(device_ptr(tile_base));
  tile_scan_kernel<<<1, kTileScanThreads, 0, st>>>(offsets, G, tile_rows, tb,
                                                   static_cast<int*>(device_ptr(p.tile_count)));
  AVDIT_CUDA_CHECK_LAUNCH();
  const TileRows out{tile_rows, offsets, static_cast<int*>(device_ptr(p.tile_group)),
                     static_cast<int*>(device_ptr(p.tile_row))};
  tile_fill_kernel<<<grid_for(p.max_tiles), kThreads, 0, st>>>(offsets, tb, G, p.max_tiles, out);
  AVDIT_CUDA_CHECK_LAUNCH();
  return p;
}

void check_weights(const ExpertWeights& w, const RouterConfig& cfg) {
  require_cuda(w.gate, "moe experts gate");
  require_cuda(w.up, "moe experts up");
  require_cuda(w.down, "moe experts down");
  AVDIT_REQUIRE(w.gate.ndim() == 3, "moe experts gate: expected 3 dims, got {}",
                w.gate.shape_str());
  const int64_t G = cfg.heads * cfg.experts, D = cfg.head_dim;
  const int64_t De = w.k_major ? w.gate.size(1) : w.gate.size(2);
  const Shape gu = w.k_major ? Shape{G, De, D} : Shape{G, D, De};
  const Shape dn = w.k_major ? Shape{G, D, De} : Shape{G, De, D};
  check_shape(w.gate, gu, "moe experts gate");
  check_shape(w.up, gu, "moe experts up");
  check_shape(w.down, dn, "moe experts down");
  AVDIT_REQUIRE(w.gate.dtype() == w.up.dtype() && w.gate.dtype() == w.down.dtype(),
                "moe experts: gate, up and down must share a dtype ({}, {}, {})",
                dtype_name(w.gate.dtype()), dtype_name(w.up.dtype()), dtype_name(w.down.dtype()));
  elt_of(w.gate, "moe experts");
}

int64_t expert_inter(const ExpertWeights& w) { return w.k_major ? w.gate.size(1) : w.gate.size(2); }

Tensor expert_rows(Device& dev, const Tensor& x, const Routing& routing, const Permutation& perm,
                   const ExpertWeights& w, const RouterConfig& cfg, DType out, ExpertPath path) {
  check_config(cfg);
  require_cuda(x, "moe experts x");
  const Elt xt = elt_of(x, "moe experts x");
  AVDIT_REQUIRE(x.ndim() == 2 && x.size(1) == cfg.heads * cfg.head_dim,
                "moe experts x: expected [T, {}], got {}", cfg.heads * cfg.head_dim, x.shape_str());
  const int64_t T = x.size(0);
  check_routing(routing, cfg, T);
  check_weights(w, cfg);
  AVDIT_REQUIRE(out == DType::F32 || out == DType::BF16,
                "moe experts: out must be F32 or BF16, got {}", dtype_name(out));
  AVDIT_REQUIRE(perm.tile_rows == kSimtBM && perm.sorted_slot.defined() &&
                    perm.sorted_slot.numel() == T * cfg.heads * cfg.top_k,
                "moe experts: the permutation does not match the routing (tile_rows {}, need {})",
                perm.tile_rows, kSimtBM);
  const int64_t S = T * cfg.heads * cfg.top_k, D = cfg.head_dim, De = expert_inter(w);
  if (S == 0) return cuda_empty(dev, {S, D}, out);
  const bool grouped_ok = grouped_supported(dev, x.dtype(), cfg, De, out);
  if (path == ExpertPath::Grouped)
    AVDIT_REQUIRE(grouped_ok,
                  "moe experts: the grouped path needs CUTLASS in the build, an sm_90 GPU, BF16 x "
                  "and out, head_dim "
                  "{} and expert width {} multiples of 8",
                  D, De);
  if (path == ExpertPath::Grouped || (path == ExpertPath::Auto && grouped_ok)) {
    // Packs the weights for this call (a full pass over them): callers with fixed weights pack once
    // and call routed_experts(.., GroupedWeights, ..) (grouped.h), as ops::prepare_experts does.
    return grouped_expert_rows(dev, x, routing, perm, w, cfg, out);
  }
  // Reference path: hbuf [S, De] holds swiglu7(gate, up) in the output precision (BF16: the
  // reference's bf16 cast of the activation).
  Tensor rows = cuda_empty(dev, {S, D}, out);
  Tensor hbuf = cuda_empty(dev, {S, De}, out);
  SimtArgs a{};
  a.x = x.raw();
  a.xt = xt;
  a.sorted_slot = cptr<int32_t>(perm.sorted_slot);
  a.slot_weight = cptr<float>(routing.weights);
  a.offsets = cptr<int32_t>(perm.offsets);
  a.tile_group = cptr<int32_t>(perm.tile_group);
  a.tile_row = cptr<int32_t>(perm.tile_row);
  a.tile_count = cptr<int32_t>(perm.tile_count);
  a.b0 = w.gate.raw();
  a.b1 = w.up.raw();
  a.bt = elt_of(w.gate, "moe experts");
  a.k_major = w.k_major;
  a.out = device_ptr(hbuf);
  a.ot = elt_of(hbuf, "moe hbuf");
  a.H = static_cast<int>(cfg.heads);
  a.K = static_cast<int>(cfg.top_k);
  a.D = static_cast<int>(D);
  a.De = static_cast<int>(De);
  const unsigned tiles = static_cast<unsigned>(perm.max_tiles);
  simt_expert_kernel<true>
      <<<dim3(tiles, static_cast<unsigned>((De + kSimtBN - 1) / kSimtBN)), 256, 0, dev.stream()>>>(
          a);
  AVDIT_CUDA_CHECK_LAUNCH();
  a.x = hbuf.raw();
  a.xt = a.ot;
  a.b0 = w.down.raw();
  a.b1 = nullptr;
  a.out = device_ptr(rows);
  a.ot = elt_of(rows, "moe rows");
  simt_expert_kernel<false>
      <<<dim3(tiles, static_cast<unsigned>((D + kSimtBN - 1) / kSimtBN)), 256, 0, dev.stream()>>>(
          a);
  AVDIT_CUDA_CHECK_LAUNCH();
  return rows;
}

Tensor combine(Device& dev, const Tensor& rows, const Routing& routing, const Permutation& perm,
               const RouterConfig& cfg, DType out, Tensor* into) {
  check_config(cfg);
  require_cuda(rows, "moe combine rows");
  const Elt rt = elt_of(rows, "moe combine rows");
  const int64_t T = routing.indices.defined() ? routing.indices.size(0) : 0;
  check_routing(routing, cfg, T);
  check_shape(rows, {T * cfg.heads * cfg.top_k, cfg.head_dim}, "moe combine rows");
  AVDIT_REQUIRE(out == DType::F32 || out == DType::BF16,
                "moe combine: out must be F32 or BF16, got {}", dtype_name(out));
  require_i32(perm.slot_pos, "moe combine perm.slot_pos");
  check_shape(perm.slot_pos, {T * cfg.heads * cfg.top_k}, "moe combine perm.slot_pos");
  const int64_t HD = cfg.heads * cfg.head_dim;
  if (into) {
    require_cuda(*into, "moe combine into");
    AVDIT_REQUIRE(
        into->dtype() == out && into->ndim() == 2 && into->size(0) == T && into->size(1) >= HD,
        "moe combine into: expected {} [{}, >= {}], got {} {}", dtype_name(out), T, HD,
        dtype_name(into->dtype()), into->shape_str());
  }
  Tensor o = into ? *into : cuda_empty(dev, {T, HD}, out);
  if (T == 0 || HD == 0) return o;
  const int64_t TH = T * cfg.heads, ld = o.size(1);
  const int K = static_cast<int>(cfg.top_k), D = static_cast<int>(cfg.head_dim),
            H = static_cast<int>(cfg.heads);
  const int* idx = cptr<int32_t>(routing.indices);
  const int* pos = cptr<int32_t>(perm.slot_pos);
  cudaStream_t st = dev.stream();
  const int esz = out == DType::F32 ? 4 : 2;
  const bool aligned = reinterpret_cast<uintptr_t>(rows.raw()) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(o.raw()) % 16 == 0 && (ld * esz) % 16 == 0;
  // A forced running sum (cfg.combine_sum) takes the scalar kernel: a scoring knob, not a hot path.
  if (D % 8 == 0 && aligned && cfg.combine_sum == 0) {
    if (rt == Elt::BF16 && out == DType::BF16)
      launch_combine_vec<__nv_bfloat16, __nv_bfloat16>(rows, idx, pos, TH, K, D, H, ld, o, st);
    else if (rt == Elt::BF16)
      launch_combine_vec<__nv_bfloat16, float>(rows, idx, pos, TH, K, D, H, ld, o, st);
    else if (rt == Elt::F32 && out == DType::BF16)
      launch_combine_vec<float, __nv_bfloat16>(rows, idx, pos, TH, K, D, H, ld, o, st);
    else if (rt == Elt::F32)
      launch_combine_vec<float, float>(rows, idx, pos, TH, K, D, H, ld, o, st);
    else if (out == DType::BF16)
      launch_combine_vec<__half, __nv_bfloat16>(rows, idx, pos, TH, K, D, H, ld, o, st);
    else
      launch_combine_vec<__half, float>(rows, idx, pos, TH, K, D, H, ld, o, st);
  } else {
    combine_scalar_kernel<<<static_cast<unsigned>((TH + kCombineWarps - 1) / kCombineWarps),
                            kCombineWarps * 32, 0, st>>>(rows.raw(), rt, idx, pos, TH, K, D, H, ld,
                                                         cfg.combine_sum == 0 ? out == DType::BF16
                                                                              : cfg.combine_sum == 1,
                                                         device_ptr(o),
                                                         elt_of(o, "moe combine out"));
  }
  AVDIT_CUDA_CHECK_LAUNCH();
  return o;
}

Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const ExpertWeights& w,
                      const RouterConfig& cfg, DType out, ExpertPath path, Tensor* into) {
  const Permutation perm = permute(dev, routing, cfg, kSimtBM);
  const Tensor rows = expert_rows(dev, x, routing, perm, w, cfg, out, path);
  return combine(dev, rows, routing, perm, cfg, out, into);
}

Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const ExpertWeights& w,
                      const RouterConfig& cfg, DType out, Tensor* into) {
  return routed_experts(dev, x, routing, w, cfg, out, ExpertPath::Auto, into);
}

}  // namespace avdit::cuda::moe
