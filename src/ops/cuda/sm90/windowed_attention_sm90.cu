// Windowed attention on Hopper (see windowed_attention_tc.h) in FlashAttention-3's arrangement: a
// block owns one 128-query tile of a plan segment for one query head and walks the segment's key
// ranges in place, 176 keys at a time (FlashAttention-3's tile for head dim 128: the per-tile fixed
// work of the softmax and the hand-overs spread over more keys than 128; bench/notes/attention.md).
// - Warp group 0 is the producer (setmaxnreg 40): one thread issues TMA loads of the Q tile and of
//   each key tile's K and V into a two-stage ring (mbarriers full / empty), and writes the tile's
//   live key count beside it (a range's last tile is short; the keys past it are other keys' rows
//   or TMA's zero fill, masked by the consumers).
// - Warp groups 1 and 2 are the consumers (setmaxnreg 232), 64 query rows each. Per key tile j: issue
//   S_j = Q K_j^T and O += P_{j-1} V_{j-1} (wgmma; P from registers, V read in its own layout as the
//   MN-major operand, so no transposed copy), wait for S_j only, the online softmax of S_j under the
//   PV product, then rescale O. The two groups take turns issuing (named barriers), so one's
//   softmax runs under the other's products.
// - The running max moves only when a row's max grows past 2^8 (P < 256, exact in fp32 and rounded
//   to bf16 as before), so most tiles skip O's rescale.
// The gate and the LSE are rounded as the CPU reference rounds them; tile rows past the segment's
// end are computed on whatever rows TMA brought and not stored. With sinks (ops::attention's Own
// plan, whose segments are documents and whose one key range is the document) the sink joins the
// denominator in the epilogue; the LSE is then that of the keys alone.
#include <cuda_bf16.h>

#include "ops/cuda/mma_sm80.cuh"
#include "ops/cuda/sm90/mbarrier.cuh"
#include "ops/cuda/sm90/wgmma_attention.cuh"
#include "ops/cuda/windowed_attention_tc.h"
#include "ops/windowed_attention.h"

namespace avdit::cuda {
namespace {

using namespace sm90;

constexpr int kD = 128;        // head dim
constexpr int kBM = 128;       // query rows per block: two consumer warp groups of 64
constexpr int kBN = 176;       // keys per tile
constexpr int kNS = kBN / 2;   // S accumulators a thread (m64 x kBN over a warp group)
constexpr int kKS = kBN / 16;  // k-steps of O += P V
constexpr int kBlockThreads = 384;  // producer warp group + two consumer warp groups
constexpr int kStages = 2;
// A tile = two TMA boxes of 64 columns; both sizes multiples of the 1,024-byte swizzle atom.
constexpr int kQBytes = kBM * kD * 2, kKVBytes = kBN * kD * 2;
static_assert(kKVBytes / 2 % 1024 == 0, "a K / V box must start on a 1,024-byte atom");

struct Bars {  // after the tiles: Q, K[kStages], V[kStages]
  uint64_t q_full, k_full[kStages], k_empty[kStages], v_full[kStages], v_empty[kStages];
  int live[kStages];  // keys of the tile in each stage that belong to its range
};
constexpr size_t kSmemBytes = size_t{kQBytes} + size_t{kKVBytes} * 2 * kStages + sizeof(Bars) + 1024;

static_assert(kBM == ops::kWindowTileRows, "the plan's tiles are the kernel's blocks");

__device__ __forceinline__ float round_to(Elt t, float v) {
  return t == Elt::BF16 ? __bfloat162float(__float2bfloat16_rn(v)) : v;
}

// P (this thread's kNS probabilities) as the A fragments of the kKS k-steps of O += P V.
__device__ __forceinline__ void pack_p(const float (&s)[kNS], unsigned (&pa)[kKS][4]) {
#pragma unroll
  for (int kk = 0; kk < kKS; ++kk) {
    pa[kk][0] = pack_bf16x2(s[8 * kk + 0], s[8 * kk + 1]);
    pa[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
    pa[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
    pa[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

__global__ void __launch_bounds__(kBlockThreads, 1)
    windowed_fa3_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                        const __grid_constant__ CUtensorMap tm_v, const WindowArgs a) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t base = (::avdit::cuda::smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t Qs = base, Ks = base + kQBytes, Vs = Ks + kStages * kKVBytes;
  const uint32_t bars = Vs + kStages * kKVBytes;
  Bars* bars_p = reinterpret_cast<Bars*>(smem_raw + (bars - ::avdit::cuda::smem_u32(smem_raw)));
  const uint32_t q_full = bars + offsetof(Bars, q_full);
  auto k_full = [&](int s) { return bars + uint32_t(offsetof(Bars, k_full) + 8 * s); };
  auto k_empty = [&](int s) { return bars + uint32_t(offsetof(Bars, k_empty) + 8 * s); };
  auto v_full = [&](int s) { return bars + uint32_t(offsetof(Bars, v_full) + 8 * s); };
  auto v_empty = [&](int s) { return bars + uint32_t(offsetof(Bars, v_empty) + 8 * s); };

  const int seg = a.tiles[2 * blockIdx.x], q0 = a.tiles[2 * blockIdx.x + 1];
  const int h = blockIdx.y, kvh = h / static_cast<int>(a.Hq / a.Hkv);
  const int q_end = a.segments[2 * seg + 1];
  const int r_first = a.offsets[seg], r_last = a.offsets[seg + 1];
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    bar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      bar_init(k_full(s), 1);
      bar_init(v_full(s), 1);
      bar_init(k_empty(s), 8);  // lane 0 of each consumer warp
      bar_init(v_empty(s), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0 && r_first < r_last) {
      bar_expect(q_full, kQBytes);
      tma_load_3d(Qs, &tm_q, 0, h, q0, q_full);
      tma_load_3d(Qs + kQBytes / 2, &tm_q, 64, h, q0, q_full);
      int j = 0;
      for (int r = r_first; r < r_last; ++r) {
        const int ke = a.keys[2 * r + 1];
        for (int kb = a.keys[2 * r]; kb < ke; kb += kBN, ++j) {
          const int s = j % kStages, u = j / kStages;
          if (u > 0) bar_wait(k_empty(s), (u - 1) & 1);
          bars_p->live[s] = min(kBN, ke - kb);  // published by the arrive below
          bar_expect(k_full(s), kKVBytes);
          tma_load_3d(Ks + s * kKVBytes, &tm_k, 0, kvh, kb, k_full(s));
          tma_load_3d(Ks + s * kKVBytes + kKVBytes / 2, &tm_k, 64, kvh, kb, k_full(s));
          if (u > 0) bar_wait(v_empty(s), (u - 1) & 1);
          bar_expect(v_full(s), kKVBytes);
          tma_load_3d(Vs + s * kKVBytes, &tm_v, 0, kvh, kb, v_full(s));
          tma_load_3d(Vs + s * kKVBytes + kKVBytes / 2, &tm_v, 64, kvh, kb, v_full(s));
        }
      }
    }
    return;
  }

  setmaxnreg_inc<232>();
  const int c = wg - 1;  // rows 64c .. 64c + 63 of the tile
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, g = lane / 4, t = lane % 4;
  const bool lead = lane == 0;
  // The key tiles of the segment, counted by each warp over its ranges.
  int n_tiles = 0;
  for (int r = r_first + lane; r < r_last; r += 32) n_tiles += (a.keys[2 * r + 1] - a.keys[2 * r] + kBN - 1) / kBN;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) n_tiles += __shfl_xor_sync(0xffffffffu, n_tiles, off);
  // Lane 0's copy: a value ptxas sees as warp-uniform, so the loop below keeps its wgmmas
  // asynchronous (after the reduction alone it serialised them, C7520).
  n_tiles = __shfl_sync(0xffffffffu, n_tiles, 0);

  float o[64], s[kNS];
  unsigned pa[kKS][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float sl2 = a.scale * 1.4426950408889634f;
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;

  auto issue_s = [&](int st) {
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
      wgmma_m64n176k16_ss(s, desc_k_major<kBM>(Qs, c * 64, kk),
                          desc_k_major<kBN>(Ks + st * kKVBytes, 0, kk), kk > 0);
  };
  auto issue_pv = [&](int st) {
#pragma unroll
    for (int kk = 0; kk < kKS; ++kk)
      wgmma_m64n128k16_rs<1>(o, pa[kk], desc_v_mn_major<kBN>(Vs + st * kKVBytes, kk));
  };
  // Softmax of S_j (raw logits in s, `live` keys valid) into unnormalised P in s; the factors O
  // must be scaled by in corr.
  auto softmax = [&](int live, float (&corr)[2]) {
    if (live < kBN) {
#pragma unroll
      for (int i = 0; i < kNS; ++i)
        if (8 * (i >> 2) + 2 * t + (i & 1) >= live) s[i] = -INFINITY;
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < kNS; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      mx[r] *= sl2;  // finite: every tile has a live key
      if (mx[r] > m[r] + 8.f) {
        corr[r] = exp2_ftz(m[r] - mx[r]);  // 0 on the first tile (m = -inf)
        m[r] = mx[r];
        l[r] *= corr[r];
      } else {
        corr[r] = 1.f;
      }
    }
#pragma unroll
    for (int i = 0; i < kNS; ++i) {
      const int r = (i >> 1) & 1;
      s[i] = exp2_ftz(fmaf(s[i], sl2, -m[r]));
      l[r] += s[i];
    }
  };

  if (n_tiles > 0) {
    const int my_bar = 1 + c, other_bar = 2 - c;
    if (c == 1) named_arrive256(1);  // consumer 0 issues first
    bar_wait(q_full, 0);
    bar_wait(k_full(0), 0);
    int live = bars_p->live[0];
    named_sync256(my_bar);
    wgmma_fence();
    issue_s(0);
    wgmma_commit();
    named_arrive256(other_bar);
    wgmma_wait<0>();
    fence_operands(s);
    bar_arrive_if(k_empty(0), lead);
    {
      float corr[2];
      softmax(live, corr);
      pack_p(s, pa);
    }
    for (int j = 1; j < n_tiles; ++j) {
      const int st = j % kStages, sp = (j - 1) % kStages;
      bar_wait(k_full(st), (j / kStages) & 1);
      live = bars_p->live[st];  // read before k_empty releases the slot
      named_sync256(my_bar);
      wgmma_fence();
      issue_s(st);
      wgmma_commit();
      bar_wait(v_full(sp), ((j - 1) / kStages) & 1);
      issue_pv(sp);
      wgmma_commit();
      named_arrive256(other_bar);
      wgmma_wait<1>();
      fence_operands(s);
      bar_arrive_if(k_empty(st), lead);
      float corr[2];
      softmax(live, corr);
      wgmma_wait<0>();
      fence_operands(o);
      bar_arrive_if(v_empty(sp), lead);
      if (corr[0] != 1.f || corr[1] != 1.f) {
#pragma unroll
        for (int i = 0; i < 64; ++i) o[i] *= corr[(i >> 1) & 1];
      }
      pack_p(s, pa);
    }
    const int sp = (n_tiles - 1) % kStages;
    bar_wait(v_full(sp), ((n_tiles - 1) / kStages) & 1);
    named_sync256(my_bar);
    wgmma_fence();
    issue_pv(sp);
    wgmma_commit();
    if (c == 0) named_arrive256(other_bar);  // consumer 1's first arrive balances this one
    wgmma_wait<0>();
    fence_operands(o);
    bar_arrive_if(v_empty(sp), lead);
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const int64_t q_stride = a.Hq * kD;
  const float sink_l2 = a.sinks ? a.sinks[h] * 1.4426950408889634f : -INFINITY;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = q0 + c * 64 + warp * 16 + g + 8 * r;
    if (row >= q_end) continue;
    // 1 / (l + exp(sink)) in the frame of the running max m, rescaled by max(m, sink) so that
    // neither term overflows (without a sink: 1 / l).
    const float mf = fmaxf(m[r], sink_l2), e = exp2f(m[r] - mf);
    const float inv = n_tiles > 0 ? e / (l[r] * e + exp2f(sink_l2 - mf)) : 0.f;
    float gv = 1.f;
    if (a.gate) gv = round_to(a.yt, sigmoid_f(load_elt(a.gate, a.gatet, int64_t{row} * a.Hq + h)));
    const int64_t out0 = row * q_stride + h * kD + 2 * t;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      float v0 = o[4 * j + 2 * r] * inv, v1 = o[4 * j + 2 * r + 1] * inv;
      if (a.gate) {  // as the CPU: core, sigmoid and product rounded to the output's dtype
        v0 = round_to(a.yt, v0) * gv;
        v1 = round_to(a.yt, v1) * gv;
      }
      if (a.yt == Elt::BF16)
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.y) + out0 + 8 * j) =
            __floats2bfloat162_rn(v0, v1);
      else
        *reinterpret_cast<float2*>(static_cast<float*>(a.y) + out0 + 8 * j) = make_float2(v0, v1);
    }
    if (a.lse && t == 0)
      a.lse[int64_t{row} * a.Hq + h] =
          n_tiles > 0 ? (m[r] + log2f(l[r])) * 0.6931471805599453f : -INFINITY;
  }
}

// [rows, heads, 128] bf16 as TMA boxes of 64 dims x 1 head x box_rows rows (rows past the tensor
// read as zeros).
CUtensorMap rows_map(const void* p, int64_t rows, int64_t heads, int box_rows, const char* what) {
  const cuuint64_t dims[3] = {kD, static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[2] = {kD * 2, static_cast<cuuint64_t>(heads) * kD * 2};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(box_rows)};
  return make_tma_map_bf16(p, 3, dims, strides, box, what);
}

}  // namespace

bool windowed_attention_tc_takes(const WindowArgs& a, const cudaDeviceProp& props) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return windowed_attention_tc_device(props) && a.D == kD && a.qt == Elt::BF16 &&
         a.kt == Elt::BF16 && a.vt == Elt::BF16 && (a.yt == Elt::BF16 || a.yt == Elt::F32) &&
         aligned(a.q) && aligned(a.k) && aligned(a.v) && a.S <= 0x7fffffff && a.Sk <= 0x7fffffff &&
         a.n_tiles <= 0x7fffffff && a.Hq <= 65535;
}

void windowed_attention_tc(cudaStream_t st, const WindowArgs& a) {
  if (a.n_tiles == 0 || a.Hq == 0) return;
  static bool configured = false;
  if (!configured) {
    AVDIT_CUDA_CHECK(cudaFuncSetAttribute(windowed_fa3_kernel,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSmemBytes)));
    configured = true;
  }
  const CUtensorMap tq = rows_map(a.q, a.S, a.Hq, kBM, "windowed attention q");
  const CUtensorMap tk = rows_map(a.k, a.Sk, a.Hkv, kBN, "windowed attention k");
  const CUtensorMap tv = rows_map(a.v, a.Sk, a.Hkv, kBN, "windowed attention v");
  const dim3 grid(static_cast<unsigned>(a.n_tiles), static_cast<unsigned>(a.Hq));
  windowed_fa3_kernel<<<grid, kBlockThreads, kSmemBytes, st>>>(tq, tk, tv, a);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda
