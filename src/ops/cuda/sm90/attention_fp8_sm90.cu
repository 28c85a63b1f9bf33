// FP8 attention on Hopper (ops/attention_fp8.h, layout in ops/cuda/attention_fp8_layout.h) in the
// bf16 kernel's arrangement (windowed_attention_sm90.cu): one block per (128-row block, query
// head), a producer warp group issuing TMA loads of the Q block and of each key block's K and v^T
// into a two-stage ring, two consumer warp groups of 64 rows taking turns at the tensor cores.
// - S = Q K^T as m64n128k32 e4m3 products from shared memory; the block scales s_q s_k fold into
//   the softmax's exponent factor.
// - P = 2^(y - m + 8) (max 256, inside e4m3's 448) with the running max m moving whenever a row's
//   max grows, packed to e4m3 straight from S's registers (v^T's key permutation makes them P's A
//   fragment), O += P v^T as m64n128k32 with P from registers.
// - The sink joins the denominator (times 256) and s_v scales O in the epilogue.
// 128-key tiles: v^T's rows are 128 bytes, the swizzle's width.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/attention_fp8_layout.h"
#include "ops/cuda/sm90/mbarrier.cuh"
#include "ops/cuda/sm90/wgmma_attention.cuh"

namespace avdit::cuda {
namespace {

using namespace sm90;

constexpr int kD = 128, kBM = 128, kBN = 128, kBlockThreads = 384, kStages = 2;
constexpr int kTile = 128 * 128;  // bytes of a Q, K or v^T tile: 128 rows of 128 one-byte values
static_assert(kBM == kFp8Block && kBN == kFp8Block, "a tile is a scale block");

struct Bars {
  uint64_t q_full, k_full[kStages], k_empty[kStages], v_full[kStages], v_empty[kStages];
};
constexpr size_t kSmemBytes = size_t{kTile} * (1 + 2 * kStages) + sizeof(Bars) + 1024;

__global__ void __launch_bounds__(kBlockThreads, 1)
    attention_fp8_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_vt, const Fp8AttentionArgs a) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t Qs = base, Ks = base + kTile, Vs = Ks + kStages * kTile;
  const uint32_t bars = Vs + kStages * kTile;
  const uint32_t q_full = bars + offsetof(Bars, q_full);
  auto k_full = [&](int s) { return bars + uint32_t(offsetof(Bars, k_full) + 8 * s); };
  auto k_empty = [&](int s) { return bars + uint32_t(offsetof(Bars, k_empty) + 8 * s); };
  auto v_full = [&](int s) { return bars + uint32_t(offsetof(Bars, v_full) + 8 * s); };
  auto v_empty = [&](int s) { return bars + uint32_t(offsetof(Bars, v_empty) + 8 * s); };
  const int wg = threadIdx.x / 128;
  const int b = blockIdx.x, h = blockIdx.y, kvh = h / static_cast<int>(a.Hq / a.Hkv);
  const Fp8Block blk = a.blocks[b];
  const int kb0 = blk.doc_block0, n_tiles = blk.doc_blocks;
  const int nb = static_cast<int>(a.n_blocks);
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
    setmaxnreg_dec<24>();
    if (threadIdx.x == 0) {
      bar_expect(q_full, kTile);
      tma_load_3d(Qs, &tm_q, 0, h, b * kBM, q_full);
      for (int j = 0; j < n_tiles; ++j) {
        const int s = j % kStages, u = j / kStages;
        if (u > 0) bar_wait(k_empty(s), (u - 1) & 1);
        bar_expect(k_full(s), kTile);
        tma_load_3d(Ks + s * kTile, &tm_k, 0, kvh, (kb0 + j) * kBN, k_full(s));
        if (u > 0) bar_wait(v_empty(s), (u - 1) & 1);
        bar_expect(v_full(s), kTile);
        tma_load_3d(Vs + s * kTile, &tm_vt, (kb0 + j) * kBN, 0, kvh, v_full(s));
      }
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int c = wg - 1;  // rows 64c .. 64c + 63 of the block
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, g = lane / 4, t = lane % 4;
  const bool lead = lane == 0;
  const int my_bar = 1 + c, other_bar = 2 - c;
  if (c == 1) named_arrive256(1);  // consumer 0 issues first
  // The document's last key block may be short: its live keys.
  const int last_live = a.blocks[kb0 + n_tiles - 1].live;

  float o[64], s[64];
  unsigned pa[4][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float sq_l2 = a.scale_log2 * a.qs[int64_t{h} * nb + b];

  auto issue_s = [&](int st) {
#pragma unroll
    for (int kk = 0; kk < kD / 32; ++kk)
      wgmma_e4m3_ss(s, desc_k_major<kBM>(Qs, c * 64, kk), desc_k_major<kBN>(Ks + st * kTile, 0, kk), kk > 0);
  };
  auto issue_pv = [&](int st) {
#pragma unroll
    for (int kk = 0; kk < kBN / 32; ++kk) wgmma_e4m3_rs(o, pa[kk], desc_k_major<kD>(Vs + st * kTile, 0, kk));
  };
  // Tile j's raw S (in units of s_q s_k) into P = 2^(y - m + 8), l's sums and O's factors.
  auto softmax = [&](int j, float (&corr)[2]) {
    const float f = sq_l2 * __ldg(a.ks + int64_t{kvh} * nb + kb0 + j);
    if (j == n_tiles - 1 && last_live < kBN) {
#pragma unroll
      for (int i = 0; i < 64; ++i)
        if (8 * (i >> 2) + 2 * t + (i & 1) >= last_live) s[i] = -INFINITY;
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 64; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      mx[r] *= f;  // finite: every tile has a live key; f > 0
      if (mx[r] > m[r]) {
        corr[r] = exp2_ftz(m[r] - mx[r]);  // 0 on the first tile (m = -inf)
        m[r] = mx[r];
        l[r] *= corr[r];
      } else {
        corr[r] = 1.f;
      }
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int r = (i >> 1) & 1;
      s[i] = exp2_ftz(fmaf(s[i], f, 8.f - m[r]));
      l[r] += s[i];
    }
  };
  // P's bytes in the A fragment: k-step kk is S's column blocks 4kk .. 4kk + 3 (s[16kk ..]).
  auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const float* x = s + 16 * kk;
      pa[kk][0] = pack_e4m3x4(x[0], x[1], x[4], x[5]);
      pa[kk][1] = pack_e4m3x4(x[2], x[3], x[6], x[7]);
      pa[kk][2] = pack_e4m3x4(x[8], x[9], x[12], x[13]);
      pa[kk][3] = pack_e4m3x4(x[10], x[11], x[14], x[15]);
    }
  };

#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  bar_wait(q_full, 0);
  bar_wait(k_full(0), 0);
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
    softmax(0, corr);
    pack_p();
  }
  for (int j = 1; j < n_tiles; ++j) {
    const int st = j % kStages, sp = (j - 1) % kStages;
    bar_wait(k_full(st), (j / kStages) & 1);
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
    softmax(j, corr);
    wgmma_wait<0>();
    fence_operands(o);
    bar_arrive_if(v_empty(sp), lead);
    if (corr[0] != 1.f || corr[1] != 1.f) {
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] *= corr[(i >> 1) & 1];
    }
    pack_p();
  }
  {
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
  const float sink_l2 = a.sinks ? a.sinks[h] * 1.4426950408889634f : -INFINITY, sv = a.vs[kvh];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = c * 64 + warp * 16 + g + 8 * r;
    if (row >= blk.live) continue;
    // O = s_v sum P v / (l + 256 2^(sink - m)), in the frame of max(m, sink) so neither overflows.
    const float mf = fmaxf(m[r], sink_l2), e = exp2f(m[r] - mf);
    const float inv = sv * e / (l[r] * e + 256.f * exp2f(sink_l2 - mf));
    const int64_t out0 = (int64_t{blk.row0 + row} * a.Hq + h) * kD + 2 * t;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float v0 = o[4 * j + 2 * r] * inv, v1 = o[4 * j + 2 * r + 1] * inv;
      if (a.yt == Elt::BF16)
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.y) + out0 + 8 * j) =
            __floats2bfloat162_rn(v0, v1);
      else if (a.yt == Elt::F16)
        *reinterpret_cast<__half2*>(static_cast<__half*>(a.y) + out0 + 8 * j) = __floats2half2_rn(v0, v1);
      else
        *reinterpret_cast<float2*>(static_cast<float*>(a.y) + out0 + 8 * j) = make_float2(v0, v1);
    }
  }
}

// A 3-d byte tensor {inner, mid, outer} read as boxes {128, box_mid, box_outer}.
CUtensorMap byte_map(const void* p, cuuint64_t inner, cuuint64_t mid, cuuint64_t outer,
                     cuuint32_t box_mid, cuuint32_t box_outer, const char* what) {
  const cuuint64_t dims[3] = {inner, mid, outer};
  const cuuint64_t strides[2] = {inner, inner * mid};
  const cuuint32_t box[3] = {128, box_mid, box_outer};
  return make_tma_map(CU_TENSOR_MAP_DATA_TYPE_UINT8, p, 3, dims, strides, box, what);
}

}  // namespace

void attention_fp8_tc(cudaStream_t st, const Fp8AttentionArgs& a) {
  if (a.n_blocks == 0 || a.Hq == 0) return;
  static bool configured = false;
  if (!configured) {
    AVDIT_CUDA_CHECK(cudaFuncSetAttribute(attention_fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSmemBytes)));
    configured = true;
  }
  const cuuint64_t Lp = static_cast<cuuint64_t>(a.n_blocks) * kFp8Block;
  // q8, k8: {128 dims, heads, Lp} as {128, 1, 128} boxes; v^T: {Lp keys, 128 dims, Hkv} as {128, 128, 1}.
  const CUtensorMap tq = byte_map(a.q8, kD, a.Hq, Lp, 1, kBM, "FP8 attention q codes");
  const CUtensorMap tk = byte_map(a.k8, kD, a.Hkv, Lp, 1, kBN, "FP8 attention k codes");
  const CUtensorMap tv = byte_map(a.v8, Lp, kD, a.Hkv, kD, 1, "FP8 attention v^T codes");
  const dim3 grid(static_cast<unsigned>(a.n_blocks), static_cast<unsigned>(a.Hq));
  attention_fp8_kernel<<<grid, kBlockThreads, kSmemBytes, st>>>(tq, tk, tv, a);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda
