// The MAGI-2 multi-head MoE on the GPU (moe.h): the fused router, the permutation by (head, expert),
// the reference (SIMT) expert kernels and the combine. The tensor-core expert kernel lives in
// moe_fused_sm90.cu. CPU oracle: src/models/magi2/moe.cpp (route, run_experts).
#include <cub/cub.cuh>

#include <cmath>
#include <climits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/moe/moe.h"
#include "backend/cuda/moe/moe_internal.h"

namespace avdit::cuda::moe {
namespace {

// ---- router ------------------------------------------------------------------------------------
// One block per (16 tokens, head): thread e computes the fp32 logits of expert e for the 16 tokens
// (sequential fma over D, x and the gate staged in shared memory), then one warp per token takes the
// top-K by repeated warp arg-max. Ties: the lower expert index wins (moe.cpp's partial_sort order).
constexpr int kRouteTokens = 16;
constexpr int kRouteKc = 16;  // D chunk staged per step (16 x 16 = one x element per thread)
constexpr int kRouteThreads = 256;

__global__ void __launch_bounds__(kRouteThreads)
route_kernel(const void* x, Elt xt, const float* gate, const float* bias, int T, int H, int E, int D, int K,
             bool softmax, bool norm, float scale, float* logits_out, int* idx_out, float* w_out) {
  // Rows of kRouteKc + 4 floats: 16-byte aligned for float4 reads, and the 8 threads of a quarter-warp
  // (experts e..e+7, 80 bytes apart) hit disjoint banks. x reads are broadcasts.
  __shared__ __align__(16) float xs[kRouteTokens][kRouteKc];
  __shared__ __align__(16) float gs[kMaxExperts][kRouteKc + 4];
  __shared__ float ls[kRouteTokens][kMaxExperts];
  const int h = blockIdx.y, t0 = blockIdx.x * kRouteTokens, tid = threadIdx.x;
  const int64_t W = int64_t(H) * D;
  float acc[kRouteTokens];
#pragma unroll
  for (int j = 0; j < kRouteTokens; ++j) acc[j] = 0.f;
  for (int k0 = 0; k0 < D; k0 += kRouteKc) {
    {
      const int j = tid / kRouteKc, kk = tid % kRouteKc, t = t0 + j, k = k0 + kk;
      xs[j][kk] = (t < T && k < D) ? load_elt(x, xt, t * W + int64_t(h) * D + k) : 0.f;
    }
    for (int i = tid; i < E * kRouteKc; i += kRouteThreads) {
      const int e = i / kRouteKc, kk = i % kRouteKc, k = k0 + kk;
      gs[e][kk] = k < D ? gate[(int64_t(h) * E + e) * D + k] : 0.f;
    }
    __syncthreads();
    if (tid < E) {
      // The same sequential fma order over k as a scalar loop; float4 reads cut the shared-memory
      // instructions per fma from ~1 to ~1/4.
#pragma unroll
      for (int k4 = 0; k4 < kRouteKc; k4 += 4) {
        const float4 g = *reinterpret_cast<const float4*>(&gs[tid][k4]);
#pragma unroll
        for (int j = 0; j < kRouteTokens; ++j) {
          const float4 xv = *reinterpret_cast<const float4*>(&xs[j][k4]);
          acc[j] = fmaf(xv.x, g.x, acc[j]);
          acc[j] = fmaf(xv.y, g.y, acc[j]);
          acc[j] = fmaf(xv.z, g.z, acc[j]);
          acc[j] = fmaf(xv.w, g.w, acc[j]);
        }
      }
    }
    __syncthreads();
  }
  if (tid < E) {
#pragma unroll
    for (int j = 0; j < kRouteTokens; ++j) {
      ls[j][tid] = acc[j];
      if (logits_out && t0 + j < T) logits_out[(int64_t(t0 + j) * H + h) * E + tid] = acc[j];
    }
  }
  __syncthreads();
  const int warp = tid / 32, lane = tid % 32;
  constexpr int kPer = kMaxExperts / 32;
  for (int j = warp; j < kRouteTokens; j += kRouteThreads / 32) {
    const int t = t0 + j;
    if (t >= T) break;
    float sc[kPer], bs[kPer];
    float mx = -INFINITY;
    if (softmax) {
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (lane + 32 * i < E) mx = fmaxf(mx, ls[j][lane + 32 * i]);
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    }
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = lane + 32 * i;
      sc[i] = 0.f;
      if (e < E) {
        const float l = ls[j][e];
        sc[i] = softmax ? expf(l - mx) : 1.0f / (1.0f + expf(-l));
        sum += sc[i];
      }
    }
    if (softmax) {
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
#pragma unroll
      for (int i = 0; i < kPer; ++i) sc[i] /= sum;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = lane + 32 * i;
      bs[i] = e < E ? sc[i] + bias[int64_t(h) * E + e] : -INFINITY;
    }
    __syncwarp();
    // Scores back to shared memory so that the chosen expert's score is one read away.
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (lane + 32 * i < E) ls[j][lane + 32 * i] = sc[i];
    __syncwarp();
    unsigned taken = 0;
    float sel[kMaxTopK];
    float l1 = 0.f;
    const int64_t base = (int64_t(t) * H + h) * K;
    for (int k = 0; k < K; ++k) {
      float bv = -INFINITY;
      int be = INT_MAX;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int e = lane + 32 * i;
        if (e < E && !((taken >> i) & 1u) && (be == INT_MAX || bs[i] > bv || (bs[i] == bv && e < be))) {
          bv = bs[i];
          be = e;
        }
      }
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oe = __shfl_xor_sync(0xffffffffu, be, o);
        if (oe != INT_MAX && (be == INT_MAX || ov > bv || (ov == bv && oe < be))) {
          bv = ov;
          be = oe;
        }
      }
      if (be == INT_MAX) be = 0;  // unreachable for K <= E (checked on the host)
      if (be % 32 == lane) taken |= 1u << (be / 32);
      const float s = ls[j][be];
      sel[k] = s;
      l1 += fabsf(s);
      if (lane == 0) idx_out[base + k] = be;
    }
    if (lane == 0) {
      const float denom = norm ? fmaxf(l1, 1e-12f) : 1.0f;
      for (int k = 0; k < K; ++k) w_out[base + k] = (norm ? sel[k] / denom : sel[k]) * scale;
    }
  }
}

// ---- permutation -------------------------------------------------------------------------------
__global__ void keys_kernel(const int* idx, int64_t S, int H, int E, int K, int* keys, int* vals) {
  for (int64_t s = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; s < S; s += int64_t{gridDim.x} * blockDim.x) {
    const int h = static_cast<int>((s / K) % H);
    int e = idx[s];
    e = e < 0 ? 0 : (e >= E ? E - 1 : e);  // indices come from route(); clamp, never read out of bounds
    keys[s] = h * E + e;
    vals[s] = static_cast<int>(s);
  }
}

// offsets[g] = first sorted row with key >= g: each boundary between two sorted keys fills the
// groups in between (empty groups get the next group's start).
__global__ void offsets_kernel(const int* sorted_keys, int64_t S, int G, int* offsets) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < S; i += int64_t{gridDim.x} * blockDim.x) {
    const int k = sorted_keys[i], prev = i ? sorted_keys[i - 1] : -1;
    for (int g = prev + 1; g <= k; ++g) offsets[g] = static_cast<int>(i);
    if (i == S - 1)
      for (int g = k + 1; g <= G; ++g) offsets[g] = static_cast<int>(S);
  }
}

__global__ void inverse_kernel(const int* sorted_slot, int64_t S, int* pos) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < S; i += int64_t{gridDim.x} * blockDim.x)
    pos[sorted_slot[i]] = static_cast<int>(i);
}

// One block: per-group tile counts, a block-wide exclusive scan, then each thread lists its groups'
// tiles. The grid of the expert kernels is sized by the host bound max_tiles; extra blocks return.
constexpr int kTileThreads = 1024;
__global__ void __launch_bounds__(kTileThreads)
tile_table_kernel(const int* offsets, int G, int BM, int* tile_group, int* tile_row, int* tile_count) {
  using Scan = cub::BlockScan<int, kTileThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int per = (G + kTileThreads - 1) / kTileThreads;
  const int g0 = threadIdx.x * per, g1 = min(G, g0 + per);
  int mine = 0;
  for (int g = g0; g < g1; ++g) mine += (offsets[g + 1] - offsets[g] + BM - 1) / BM;
  int base = 0, total = 0;
  Scan(tmp).ExclusiveSum(mine, base, total);
  for (int g = g0; g < g1; ++g) {
    for (int r = offsets[g]; r < offsets[g + 1]; r += BM) {
      tile_group[base] = g;
      tile_row[base] = r;
      ++base;
    }
  }
  if (threadIdx.x == 0) *tile_count = total;
}

// ---- reference expert kernels (SIMT, fp32 math) -----------------------------------------------
// 64 x 64 output tile per block, 16-deep K steps, 4 x 4 outputs per thread. kGateUp: A rows are the
// gathered x rows of the slots, B is W_gate and W_up (two accumulators), the epilogue is swiglu7 into
// hbuf [S, De]. Else: A = hbuf rows, B = W_down, epilogue weight * y into rows [S, D].
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

__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

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
        const int64_t at = a.k_major ? (int64_t(g) * N + n) * Kd + k : (int64_t(g) * Kd + k) * N + n;
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
// One thread per output element (t, h, d): its K rows in ascending expert order (a K-element
// insertion sort), summed in fp32 (F32) or with the running sum rounded to bf16 after each add.
__global__ void combine_kernel(const void* rows, Elt rt, const int* idx, const int* pos, int64_t TH, int K, int D,
                               bool bf16_sum, void* out, Elt ot) {
  const int64_t n = TH * D;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t th = i / D;
    const int d = static_cast<int>(i % D);
    int e[kMaxTopK], p[kMaxTopK];
    for (int k = 0; k < K; ++k) {
      int ek = idx[th * K + k], pk = pos[th * K + k], j = k;
      while (j > 0 && e[j - 1] > ek) {
        e[j] = e[j - 1];
        p[j] = p[j - 1];
        --j;
      }
      e[j] = ek;
      p[j] = pk;
    }
    float sum = 0.f;
    for (int k = 0; k < K; ++k) {
      const float v = load_elt(rows, rt, int64_t(p[k]) * D + d);
      sum = bf16_sum ? round_bf16(sum + v) : sum + v;
    }
    store_elt(out, ot, i, sum);
  }
}

void check_shape(const Tensor& t, const Shape& want, const char* what) {
  AVDIT_REQUIRE(t.shape() == want, "{}: expected shape {}, got {}", what, Tensor::empty(want, DType::U8).shape_str(),
                t.shape_str());
}

void check_routing(const Routing& r, const RouterConfig& cfg, int64_t T) {
  require_i32(r.indices, "moe routing.indices");
  require_cuda(r.weights, "moe routing.weights");
  AVDIT_REQUIRE(r.weights.dtype() == DType::F32, "moe routing.weights: expected F32, got {}",
                dtype_name(r.weights.dtype()));
  check_shape(r.indices, {T, cfg.heads, cfg.top_k}, "moe routing.indices");
  check_shape(r.weights, {T, cfg.heads, cfg.top_k}, "moe routing.weights");
}

// Auto -> Fused switched on after moe_cuda_test passed on the H200 (see bench/NOTES.md).
constexpr bool kAutoFused = false;

}  // namespace

void check_config(const RouterConfig& cfg) {
  AVDIT_REQUIRE(cfg.heads > 0 && cfg.experts > 0 && cfg.top_k > 0 && cfg.head_dim > 0,
                "moe config: heads {}, experts {}, top_k {}, head_dim {} must all be positive", cfg.heads,
                cfg.experts, cfg.top_k, cfg.head_dim);
  AVDIT_REQUIRE(cfg.experts <= kMaxExperts, "moe config: {} experts per head, the GPU router handles at most {}",
                cfg.experts, kMaxExperts);
  AVDIT_REQUIRE(cfg.top_k <= kMaxTopK && cfg.top_k <= cfg.experts, "moe config: top_k {} must be <= {} and <= experts {}",
                cfg.top_k, kMaxTopK, cfg.experts);
}

Routing route(Device& dev, const Tensor& x, const Tensor& gate, const Tensor& bias, const RouterConfig& cfg,
              bool keep_logits) {
  check_config(cfg);
  require_cuda(x, "moe route x");
  require_cuda(gate, "moe route gate");
  require_cuda(bias, "moe route bias");
  const Elt xt = elt_of(x, "moe route x");
  AVDIT_REQUIRE(xt != Elt::F16, "moe route x: F32 or BF16 expected, got F16");
  AVDIT_REQUIRE(x.ndim() == 2 && x.size(1) == cfg.heads * cfg.head_dim, "moe route x: expected [T, {}], got {}",
                cfg.heads * cfg.head_dim, x.shape_str());
  AVDIT_REQUIRE(gate.dtype() == DType::F32 && bias.dtype() == DType::F32, "moe route: gate and bias must be F32 ({}, {})",
                dtype_name(gate.dtype()), dtype_name(bias.dtype()));
  check_shape(gate, {cfg.heads * cfg.experts, cfg.head_dim}, "moe route gate");
  check_shape(bias, {cfg.heads * cfg.experts}, "moe route bias");
  const int64_t T = x.size(0);
  AVDIT_REQUIRE(T * cfg.heads * cfg.top_k < INT_MAX, "moe route: {} tokens give more slots than I32 indexes", T);
  Routing r;
  r.indices = cuda_empty(dev, {T, cfg.heads, cfg.top_k}, DType::I32);
  r.weights = cuda_empty(dev, {T, cfg.heads, cfg.top_k}, DType::F32);
  if (keep_logits) r.logits = cuda_empty(dev, {T, cfg.heads, cfg.experts}, DType::F32);
  if (T == 0) return r;
  const dim3 grid(static_cast<unsigned>((T + kRouteTokens - 1) / kRouteTokens), static_cast<unsigned>(cfg.heads));
  route_kernel<<<grid, kRouteThreads, 0, dev.stream()>>>(
      x.raw(), xt, cptr<float>(gate), cptr<float>(bias), static_cast<int>(T), static_cast<int>(cfg.heads),
      static_cast<int>(cfg.experts), static_cast<int>(cfg.head_dim), static_cast<int>(cfg.top_k), cfg.softmax,
      cfg.route_norm, cfg.route_scale, keep_logits ? static_cast<float*>(device_ptr(r.logits)) : nullptr,
      static_cast<int*>(device_ptr(r.indices)), static_cast<float*>(device_ptr(r.weights)));
  AVDIT_CUDA_CHECK_LAUNCH();
  return r;
}

Permutation permute(Device& dev, const Routing& routing, const RouterConfig& cfg, int tile_rows) {
  check_config(cfg);
  AVDIT_REQUIRE(tile_rows > 0, "moe permute: tile_rows {} must be positive", tile_rows);
  const int64_t T = routing.indices.defined() && routing.indices.ndim() == 3 ? routing.indices.size(0) : -1;
  AVDIT_REQUIRE(T >= 0, "moe permute: routing.indices must be [T, heads, K]");
  check_routing(routing, cfg, T);
  const int64_t S = T * cfg.heads * cfg.top_k;
  const int G = static_cast<int>(cfg.heads * cfg.experts);
  Permutation p;
  p.tile_rows = tile_rows;
  p.sorted_slot = cuda_empty(dev, {S}, DType::I32);
  p.slot_pos = cuda_empty(dev, {S}, DType::I32);
  p.offsets = cuda_empty(dev, {G + 1}, DType::I32);
  p.max_tiles = (S + tile_rows - 1) / tile_rows + G;
  p.tile_group = cuda_empty(dev, {p.max_tiles}, DType::I32);
  p.tile_row = cuda_empty(dev, {p.max_tiles}, DType::I32);
  p.tile_count = cuda_empty(dev, {1}, DType::I32);
  cudaStream_t st = dev.stream();
  int* offsets = static_cast<int*>(device_ptr(p.offsets));
  if (S == 0) {
    AVDIT_CUDA_CHECK(cudaMemsetAsync(offsets, 0, sizeof(int) * (G + 1), st));
  } else {
    Tensor keys = cuda_empty(dev, {S}, DType::I32), keys_sorted = cuda_empty(dev, {S}, DType::I32),
           vals = cuda_empty(dev, {S}, DType::I32);
    keys_kernel<<<grid_for(S), kThreads, 0, st>>>(cptr<int32_t>(routing.indices), S, static_cast<int>(cfg.heads),
                                                  static_cast<int>(cfg.experts), static_cast<int>(cfg.top_k),
                                                  static_cast<int*>(device_ptr(keys)), static_cast<int*>(device_ptr(vals)));
    AVDIT_CUDA_CHECK_LAUNCH();
    // LSD radix sort is stable: within a group the slots keep their (token, head, k) order.
    int end_bit = 1;
    while ((int64_t{1} << end_bit) < G) ++end_bit;
    size_t temp_bytes = 0;
    AVDIT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, cptr<int32_t>(keys),
                                                     static_cast<int*>(device_ptr(keys_sorted)), cptr<int32_t>(vals),
                                                     static_cast<int*>(device_ptr(p.sorted_slot)), S, 0, end_bit, st));
    Tensor temp = cuda_empty(dev, {static_cast<int64_t>(temp_bytes) + 1}, DType::U8);
    AVDIT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(device_ptr(temp), temp_bytes, cptr<int32_t>(keys),
                                                     static_cast<int*>(device_ptr(keys_sorted)), cptr<int32_t>(vals),
                                                     static_cast<int*>(device_ptr(p.sorted_slot)), S, 0, end_bit, st));
    offsets_kernel<<<grid_for(S), kThreads, 0, st>>>(cptr<int32_t>(keys_sorted), S, G, offsets);
    AVDIT_CUDA_CHECK_LAUNCH();
    inverse_kernel<<<grid_for(S), kThreads, 0, st>>>(cptr<int32_t>(p.sorted_slot), S,
                                                     static_cast<int*>(device_ptr(p.slot_pos)));
    AVDIT_CUDA_CHECK_LAUNCH();
  }
  tile_table_kernel<<<1, kTileThreads, 0, st>>>(offsets, G, tile_rows, static_cast<int*>(device_ptr(p.tile_group)),
                                                static_cast<int*>(device_ptr(p.tile_row)),
                                                static_cast<int*>(device_ptr(p.tile_count)));
  AVDIT_CUDA_CHECK_LAUNCH();
  return p;
}

void check_weights(const ExpertWeights& w, const RouterConfig& cfg) {
  require_cuda(w.gate, "moe experts gate");
  require_cuda(w.up, "moe experts up");
  require_cuda(w.down, "moe experts down");
  AVDIT_REQUIRE(w.gate.ndim() == 3, "moe experts gate: expected 3 dims, got {}", w.gate.shape_str());
  const int64_t G = cfg.heads * cfg.experts, D = cfg.head_dim;
  const int64_t De = w.k_major ? w.gate.size(1) : w.gate.size(2);
  const Shape gu = w.k_major ? Shape{G, De, D} : Shape{G, D, De};
  const Shape dn = w.k_major ? Shape{G, D, De} : Shape{G, De, D};
  check_shape(w.gate, gu, "moe experts gate");
  check_shape(w.up, gu, "moe experts up");
  check_shape(w.down, dn, "moe experts down");
  AVDIT_REQUIRE(w.gate.dtype() == w.up.dtype() && w.gate.dtype() == w.down.dtype(),
                "moe experts: gate, up and down must share a dtype ({}, {}, {})", dtype_name(w.gate.dtype()),
                dtype_name(w.up.dtype()), dtype_name(w.down.dtype()));
  elt_of(w.gate, "moe experts");
}

int64_t expert_inter(const ExpertWeights& w) { return w.k_major ? w.gate.size(1) : w.gate.size(2); }

Tensor expert_rows(Device& dev, const Tensor& x, const Routing& routing, const Permutation& perm,
                   const ExpertWeights& w, const RouterConfig& cfg, DType out, ExpertPath path) {
  check_config(cfg);
  require_cuda(x, "moe experts x");
  const Elt xt = elt_of(x, "moe experts x");
  AVDIT_REQUIRE(x.ndim() == 2 && x.size(1) == cfg.heads * cfg.head_dim, "moe experts x: expected [T, {}], got {}",
                cfg.heads * cfg.head_dim, x.shape_str());
  const int64_t T = x.size(0);
  check_routing(routing, cfg, T);
  check_weights(w, cfg);
  AVDIT_REQUIRE(out == DType::F32 || out == DType::BF16, "moe experts: out must be F32 or BF16, got {}",
                dtype_name(out));
  AVDIT_REQUIRE(perm.tile_rows == kSimtBM && perm.sorted_slot.defined() && perm.sorted_slot.numel() == T * cfg.heads * cfg.top_k,
                "moe experts: the permutation does not match the routing (tile_rows {}, need {})", perm.tile_rows, kSimtBM);
  const int64_t S = T * cfg.heads * cfg.top_k, D = cfg.head_dim, De = expert_inter(w);
  Tensor rows = cuda_empty(dev, {S, D}, out);
  if (S == 0) return rows;
  const bool fused_ok = fused_supported(dev, x, w, cfg, out);
  if (path == ExpertPath::Fused)
    AVDIT_REQUIRE(fused_ok, "moe experts: the fused path needs an sm_90 GPU, BF16 x, weights and out, head_dim and "
                            "the expert width multiples of 64 (head_dim {} <= 256)", D);
  // Auto takes the fused kernel only once it has passed its device test (kAutoFused).
  if (path == ExpertPath::Fused || (path == ExpertPath::Auto && kAutoFused && fused_ok)) {
    fused_expert_rows(dev, x, routing, perm, w, cfg, rows);
    return rows;
  }
  // Reference path: hbuf [S, De] holds swiglu7(gate, up) in the output precision (BF16: the
  // reference's bf16 cast of the activation).
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
  simt_expert_kernel<true><<<dim3(tiles, static_cast<unsigned>((De + kSimtBN - 1) / kSimtBN)), 256, 0, dev.stream()>>>(a);
  AVDIT_CUDA_CHECK_LAUNCH();
  a.x = hbuf.raw();
  a.xt = a.ot;
  a.b0 = w.down.raw();
  a.b1 = nullptr;
  a.out = device_ptr(rows);
  a.ot = elt_of(rows, "moe rows");
  simt_expert_kernel<false><<<dim3(tiles, static_cast<unsigned>((D + kSimtBN - 1) / kSimtBN)), 256, 0, dev.stream()>>>(a);
  AVDIT_CUDA_CHECK_LAUNCH();
  return rows;
}

Tensor combine(Device& dev, const Tensor& rows, const Routing& routing, const Permutation& perm,
               const RouterConfig& cfg, DType out) {
  check_config(cfg);
  require_cuda(rows, "moe combine rows");
  const Elt rt = elt_of(rows, "moe combine rows");
  const int64_t T = routing.indices.defined() ? routing.indices.size(0) : 0;
  check_routing(routing, cfg, T);
  check_shape(rows, {T * cfg.heads * cfg.top_k, cfg.head_dim}, "moe combine rows");
  AVDIT_REQUIRE(out == DType::F32 || out == DType::BF16, "moe combine: out must be F32 or BF16, got {}", dtype_name(out));
  Tensor o = cuda_empty(dev, {T, cfg.heads * cfg.head_dim}, out);
  if (o.numel() == 0) return o;
  combine_kernel<<<grid_for(o.numel()), kThreads, 0, dev.stream()>>>(
      rows.raw(), rt, cptr<int32_t>(routing.indices), cptr<int32_t>(perm.slot_pos), T * cfg.heads,
      static_cast<int>(cfg.top_k), static_cast<int>(cfg.head_dim), out == DType::BF16, device_ptr(o),
      elt_of(o, "moe combine out"));
  AVDIT_CUDA_CHECK_LAUNCH();
  return o;
}

Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const ExpertWeights& w,
                      const RouterConfig& cfg, DType out, ExpertPath path) {
  const Permutation perm = permute(dev, routing, cfg, kSimtBM);
  const Tensor rows = expert_rows(dev, x, routing, perm, w, cfg, out, path);
  return combine(dev, rows, routing, perm, cfg, out);
}

Tensor routed_experts(Device& dev, const Tensor& x, const Routing& routing, const ExpertWeights& w,
                      const RouterConfig& cfg, DType out) {
  return routed_experts(dev, x, routing, w, cfg, out, ExpertPath::Auto);
}

}  // namespace avdit::cuda::moe
