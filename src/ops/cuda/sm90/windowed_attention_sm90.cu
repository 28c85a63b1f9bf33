// Windowed attention on the tensor cores (see windowed_attention_tc.h), in the FlashAttention-2
// arrangement with mma.sync m16n8k16: a block of 8 warps owns one 128-query tile of a plan segment
// for one query head (16 rows per warp, Q fragments in registers) and walks the segment's key
// ranges in 64-key tiles, K/V double-buffered in shared memory with cp.async (the next tile of the
// same range, or the first of the next range, loads while this one is used). Keys past a range's
// end are masked; tile rows past the segment's end are computed on clamped rows and not stored.
// The online softmax is in fp32 registers (exp2 domain) and P goes to the PV product straight from
// the score accumulators (their layout is the A-operand layout). 128 query rows per block: each
// K/V byte brought from L2 serves 128 queries (64 would make the kernel L2-bound).
#include <cuda_bf16.h>

#include "ops/cuda/mma_sm80.cuh"
#include "ops/cuda/windowed_attention_tc.h"
#include "ops/windowed_attention.h"

namespace avdit::cuda {
namespace {

constexpr int kD = 128;          // head dim
constexpr int kBM = 128;         // query rows per block
constexpr int kBN = 64;          // keys per step
constexpr int kTcThreads = 256;  // 8 warps x 16 rows
constexpr size_t kSmemBytes = (kBM * kD + 4 * kBN * kD) * sizeof(__nv_bfloat16);  // Q + 2 x (K, V)

static_assert(kBM == ops::kWindowTileRows, "the plan's tiles are the kernel's blocks");

// Element offset of (row, 16-byte chunk) in a [rows, 128] bf16 tile: chunks are XOR-swizzled by
// row & 7 so that the 8 row addresses of one ldmatrix hit 8 different bank groups.
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * kD + ((chunk ^ (row & 7)) << 3);
}

__device__ __forceinline__ float round_to(Elt t, float v) {
  return t == Elt::BF16 ? __bfloat162float(__float2bfloat16_rn(v)) : v;
}

// Copies rows [first, first + ROWS) of one head (row stride in elements) into a swizzled tile; rows
// past `last` repeat row `last` (finite values that are masked or not stored).
template <int ROWS>
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* g,
                                          int64_t stride, int first, int last) {
#pragma unroll
  for (int i = 0; i < ROWS * 16 / kTcThreads; ++i) {
    const int c = threadIdx.x + i * kTcThreads, row = c / 16, ch = c % 16;
    const int src = min(first + row, last);
    cp_async16(smem_u32(tile + swz(row, ch)), g + src * stride + ch * 8);
  }
}

__global__ void __launch_bounds__(kTcThreads, 1) windowed_tc_kernel(WindowArgs a) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* Ks = Qs + kBM * kD;      // 2 stages
  __nv_bfloat16* Vs = Ks + 2 * kBN * kD;  // 2 stages
  const int seg = a.tiles[2 * blockIdx.x], q0 = a.tiles[2 * blockIdx.x + 1];
  const int h = blockIdx.y, kvh = h / static_cast<int>(a.Hq / a.Hkv);
  const int q_end = a.segments[2 * seg + 1];
  const int r_first = a.offsets[seg], r_last = a.offsets[seg + 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q_stride = a.Hq * kD, kv_stride = a.Hkv * kD;
  const auto* qh = static_cast<const __nv_bfloat16*>(a.q) + h * kD;
  const auto* kh = static_cast<const __nv_bfloat16*>(a.k) + kvh * kD;
  const auto* vh = static_cast<const __nv_bfloat16*>(a.v) + kvh * kD;

  // The key cursor: range r, tile start kb, range end ke.
  int r = r_first, kb = a.keys[2 * r], ke = a.keys[2 * r + 1];
  load_tile<kBM>(Qs, qh, q_stride, q0, q_end - 1);
  load_tile<kBN>(Ks, kh, kv_stride, kb, ke - 1);
  load_tile<kBN>(Vs, vh, kv_stride, kb, ke - 1);
  cp_async_commit();
  cp_async_wait_group<0>();
  __syncthreads();

  unsigned qf[8][4];
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
    ldmatrix_x4(smem_u32(Qs + swz(warp * 16 + lane % 16, 2 * ks + lane / 16)), qf[ks]);

  float o[16][4];
#pragma unroll
  for (int i = 0; i < 16; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float scale_log2 = a.scale * 1.4426950408889634f;

  for (int stage = 0;; stage ^= 1) {
    // The next tile: the rest of this range, else the next range.
    int nr = r, nkb = kb + kBN, nke = ke;
    if (nkb >= ke && ++nr < r_last) {
      nkb = a.keys[2 * nr];
      nke = a.keys[2 * nr + 1];
    }
    const bool more = nr < r_last;
    if (more) {
      load_tile<kBN>(Ks + (stage ^ 1) * kBN * kD, kh, kv_stride, nkb, nke - 1);
      load_tile<kBN>(Vs + (stage ^ 1) * kBN * kD, vh, kv_stride, nkb, nke - 1);
      cp_async_commit();
      cp_async_wait_group<1>();
    } else {
      cp_async_wait_group<0>();
    }
    __syncthreads();
    const __nv_bfloat16* Kt = Ks + stage * kBN * kD;
    const __nv_bfloat16* Vt = Vs + stage * kBN * kD;

    // S = Q K^T for 16 rows x 64 keys per warp.
    float sc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        unsigned b[4];
        ldmatrix_x4(smem_u32(Kt + swz(j * 8 + lane % 8, 4 * p + lane / 8)), b);
        mma_bf16_16816(sc[j], qf[2 * p], b[0], b[1]);
        mma_bf16_16816(sc[j], qf[2 * p + 1], b[2], b[3]);
      }
    }
    // Mask keys past the range, scale into the exp2 domain, row max over the quad.
    const int live = ke - kb;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j * 8 + (lane % 4) * 2 + (e & 1);
        const float s = key < live ? sc[j][e] * scale_log2 : -INFINITY;
        sc[j][e] = s;
        mx[e >> 1] = fmaxf(mx[e >> 1], s);
      }
    float corr[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
      const float m_new = fmaxf(m[i], mx[i]);  // finite: every tile has a live key
      corr[i] = exp2f(m[i] - m_new);           // 0 on the first tile (m = -inf)
      m[i] = m_new;
      l[i] *= corr[i];
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(sc[j][e] - m[e >> 1]);
        sc[j][e] = p;
        l[e >> 1] += p;
      }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      o[i][0] *= corr[0];
      o[i][1] *= corr[0];
      o[i][2] *= corr[1];
      o[i][3] *= corr[1];
    }
    // O += P V: P's accumulator pairs (n-tiles 2kk, 2kk+1) are the A fragment of keys
    // 16kk..16kk+15.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const unsigned pa[4] = {pack_bf16x2(sc[2 * kk][0], sc[2 * kk][1]),
                              pack_bf16x2(sc[2 * kk][2], sc[2 * kk][3]),
                              pack_bf16x2(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                              pack_bf16x2(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < 8; ++np) {
        unsigned b[4];
        const int mi = lane / 8;
        ldmatrix_x4_trans(smem_u32(Vt + swz(16 * kk + (mi % 2) * 8 + lane % 8, 2 * np + mi / 2)),
                          b);
        mma_bf16_16816(o[2 * np], pa, b[0], b[1]);
        mma_bf16_16816(o[2 * np + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this stage
    if (!more) break;
    r = nr;
    kb = nkb;
    ke = nke;
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int row = q0 + warp * 16 + lane / 4 + 8 * e;
    if (row >= q_end) continue;
    const float inv = 1.f / l[e];
    float g = 1.f;
    if (a.gate) g = round_to(a.yt, sigmoid_f(load_elt(a.gate, a.gatet, int64_t{row} * a.Hq + h)));
    const int64_t base = row * q_stride + h * kD + (lane % 4) * 2;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float v0 = o[i][2 * e] * inv, v1 = o[i][2 * e + 1] * inv;
      if (a.gate) {  // as the CPU: core, sigmoid and product rounded to the output's dtype
        v0 = round_to(a.yt, v0) * g;
        v1 = round_to(a.yt, v1) * g;
      }
      if (a.yt == Elt::BF16)
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.y) + base + i * 8) =
            __floats2bfloat162_rn(v0, v1);
      else
        *reinterpret_cast<float2*>(static_cast<float*>(a.y) + base + i * 8) = make_float2(v0, v1);
    }
    if (a.lse && lane % 4 == 0)
      a.lse[int64_t{row} * a.Hq + h] = (m[e] + log2f(l[e])) * 0.6931471805599453f;
  }
}

}  // namespace

void windowed_attention_tc(cudaStream_t st, const WindowArgs& a) {
  if (a.n_tiles == 0 || a.Hq == 0) return;
  static bool configured = false;
  if (!configured) {
    AVDIT_CUDA_CHECK(cudaFuncSetAttribute(windowed_tc_kernel,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSmemBytes)));
    configured = true;
  }
  const dim3 grid(static_cast<unsigned>(a.n_tiles), static_cast<unsigned>(a.Hq));
  windowed_tc_kernel<<<grid, kTcThreads, kSmemBytes, st>>>(a);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda
