// The tensor-core expert kernel: one block per 64-row tile of one (head, expert) group does the whole
// expert MLP of those rows, as the official Triton kernel does, so the [S, De] activations never go
// to memory:
//   gather the tile's x rows (cp.async, the A operand stays in shared memory for the whole tile)
//   for each 64-column chunk of De:
//     gate, up chunk = A · W_gate[:, chunk], A · W_up[:, chunk]   (bf16 wmma, fp32 accumulators,
//                                                                 B double-buffered with cp.async)
//     h = bf16(swiglu7(gate, up))       (element-wise on the accumulator fragments: gate and up
//                                        fragments of the same shape share their element layout)
//     y += h · W_down[chunk, :]          (fp32 accumulators, 64 x D per block, held in registers)
//   rows[r] = bf16(weight[slot] * y[r])  (the routing weight in the epilogue; combine sums the rows)
// v1 uses the sm_80-level mma instructions (nvcuda::wmma), not wgmma/TMA; it is built for sm_90a only
// to keep one place for the Hopper kernels. The B operand is read through ExpertWeights in either
// layout ([in, out] or K-major, the NVFP4 dequantiser's), a template flag.
#include <mma.h>

#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/moe/moe_internal.h"

namespace avdit::cuda::moe {
namespace {

using namespace nvcuda;
using bf16 = __nv_bfloat16;

constexpr int kBM = 64;       // rows per tile (Permutation::tile_rows)
constexpr int kNC = 64;       // De chunk
constexpr int kKC = 64;       // gate/up K chunk (double-buffered)
constexpr int kThreadsF = 256;
constexpr int kPad = 8;       // bf16 row padding: breaks shared-memory bank conflicts, keeps 32 B alignment

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

struct FusedArgs {
  const bf16* x;
  const int* sorted_slot;
  const float* slot_weight;
  const int* offsets;
  const int* tile_group;
  const int* tile_row;
  const int* tile_count;
  const bf16* wg;
  const bf16* wu;
  const bf16* wd;
  bf16* rows;
  int H, E, K, De;
};

template <int D>
struct Smem {
  static constexpr int kLdA = D + kPad;
  static constexpr int kLdB = kNC + kPad;  // both layouts: a 64-wide inner dimension
  static constexpr int kLdS = kNC + 4;     // fp32 staging of the activation chunk
  static constexpr int kLdWdRow = D + kPad;   // [in, out]: W_down chunk [64 k][D]
  static constexpr int kLdWdCol = kNC + kPad; // K-major: W_down^T chunk [D][64 k]
  static constexpr int kLdY = D + 4;
  static constexpr size_t kA = size_t(kBM) * kLdA * 2;
  static constexpr size_t kBStage = size_t(2) * kKC * kLdB * 2;  // gate + up, one K chunk
  static constexpr size_t kB = 2 * kBStage;
  static constexpr size_t kH = size_t(kBM) * (kNC + kPad) * 2;
  static constexpr size_t kS = size_t(kBM) * kLdS * 4;
  static constexpr size_t kWdRow = size_t(kNC) * kLdWdRow * 2, kWdCol = size_t(D) * kLdWdCol * 2;
  static constexpr size_t kWd = kWdRow > kWdCol ? kWdRow : kWdCol;
  static constexpr size_t kY = size_t(kBM) * kLdY * 4;  // output staging, reuses everything after A
  static constexpr size_t kTotal = kA + kB + kH + kS + kWd;
  static_assert(kB + kH + kS + kWd >= kY, "output staging must fit in the reused region");
};

template <int D, bool KMajor>
__global__ void __launch_bounds__(kThreadsF, 1) fused_expert_kernel(FusedArgs a) {
  using L = Smem<D>;
  const int tile = blockIdx.x;
  if (tile >= *a.tile_count) return;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* As = reinterpret_cast<bf16*>(smem);
  bf16* Bs = reinterpret_cast<bf16*>(smem + L::kA);
  bf16* Hs = reinterpret_cast<bf16*>(smem + L::kA + L::kB);
  float* Ss = reinterpret_cast<float*>(smem + L::kA + L::kB + L::kH);
  bf16* Wds = reinterpret_cast<bf16*>(smem + L::kA + L::kB + L::kH + L::kS);
  float* Ys = reinterpret_cast<float*>(smem + L::kA);

  const int g = a.tile_group[tile], r0 = a.tile_row[tile];
  const int nrows = min(kBM, a.offsets[g + 1] - r0);
  const int h = g / a.E, De = a.De, tid = threadIdx.x, warp = tid / 32;
  const int64_t W = int64_t(a.H) * D;

  // A: the tile's gathered x rows; rows past the group's end are zero.
  for (int i = tid; i < kBM * (D / 8); i += kThreadsF) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    bf16* dst = As + r * L::kLdA + c;
    if (r < nrows) {
      const int s = a.sorted_slot[r0 + r];
      const int t = s / (a.H * a.K);
      cp_async16(dst, a.x + t * W + int64_t(h) * D + c);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
  cp_async_commit();

  const bf16* wg = a.wg + int64_t(g) * D * De;
  const bf16* wu = a.wu + int64_t(g) * D * De;
  const bf16* wd = a.wd + int64_t(g) * De * D;
  // Gate/up chunk (n0, k0) into stage buffer `st`: [k][n] for [in, out], [n][k] for K-major.
  auto load_gu = [&](int n0, int k0, int st) {
    bf16* bg = Bs + st * (L::kBStage / 2);
    bf16* bu = bg + kKC * L::kLdB;
    for (int i = tid; i < 2 * 64 * 8; i += kThreadsF) {
      const int m = i / (64 * 8), j = i % (64 * 8), r = j / 8, c = (j % 8) * 8;
      const bf16* src = m ? wu : wg;
      const int64_t off = KMajor ? int64_t(n0 + r) * D + k0 + c : int64_t(k0 + r) * De + n0 + c;
      cp_async16((m ? bu : bg) + r * L::kLdB + c, src + off);
    }
    cp_async_commit();
  };
  auto load_wd = [&](int n0) {
    if (KMajor) {  // W_down^T [D][De]: rows d, columns n0..n0+64
      for (int i = tid; i < D * 8; i += kThreadsF) {
        const int r = i / 8, c = (i % 8) * 8;
        cp_async16(Wds + r * L::kLdWdCol + c, wd + int64_t(r) * De + n0 + c);
      }
    } else {  // W_down [De][D]: rows n0..n0+64
      for (int i = tid; i < kNC * (D / 8); i += kThreadsF) {
        const int r = i / (D / 8), c = (i % (D / 8)) * 8;
        cp_async16(Wds + r * L::kLdWdRow + c, wd + int64_t(n0 + r) * D + c);
      }
    }
    cp_async_commit();
  };

  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
  using BLayout = typename std::conditional<KMajor, wmma::col_major, wmma::row_major>::type;
  using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, BLayout>;
  using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

  // Warp tiling (8 warps): each warp owns 2 row fragments, rm and rm + 1 with rm = 2 (warp / 4), so
  // one B fragment feeds two mma: gate/up chunk 64 x 64 = 4 x 4 fragments of each, the warp's column
  // fragment warp % 4; y 64 x D = 4 x D/16 fragments, the warp's columns (warp % 4) D/64 + {0 .. D/64}.
  constexpr int kYF = D / 64;
  const int rm = (warp / 4) * 2, cgu = warp % 4, cy = (warp % 4) * kYF;
  FragC y[2][kYF];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kYF; ++j) wmma::fill_fragment(y[i][j], 0.0f);

  for (int n0 = 0; n0 < De; n0 += kNC) {
    __syncthreads();  // the previous chunk's down step is done with Wds and Hs
    load_wd(n0);
    load_gu(n0, 0, 0);
    FragC gf[2], uf[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::fill_fragment(gf[j], 0.0f);
      wmma::fill_fragment(uf[j], 0.0f);
    }
    constexpr int kSteps = D / kKC;
    for (int kc = 0; kc < kSteps; ++kc) {
      if (kc + 1 < kSteps) {
        load_gu(n0, (kc + 1) * kKC, (kc + 1) & 1);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const bf16* bg = Bs + (kc & 1) * (L::kBStage / 2);
      const bf16* bu = bg + kKC * L::kLdB;
#pragma unroll
      for (int ks = 0; ks < kKC / 16; ++ks) {
        const int off = KMajor ? cgu * 16 * L::kLdB + ks * 16 : ks * 16 * L::kLdB + cgu * 16;
        FragB bgf, buf;
        wmma::load_matrix_sync(bgf, bg + off, L::kLdB);
        wmma::load_matrix_sync(buf, bu + off, L::kLdB);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          FragA af;
          wmma::load_matrix_sync(af, As + (rm + i) * 16 * L::kLdA + kc * kKC + ks * 16, L::kLdA);
          wmma::mma_sync(gf[i], af, bgf, gf[i]);
          wmma::mma_sync(uf[i], af, buf, uf[i]);
        }
      }
      __syncthreads();  // the stage buffer may be refilled by the next load
    }
    // h = swiglu7(gate, up) on the fragments, staged in fp32 then rounded to bf16 (the reference's
    // cast of the activation).
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int e = 0; e < gf[i].num_elements; ++e) gf[i].x[e] = swiglu7_f(gf[i].x[e], uf[i].x[e]);
      wmma::store_matrix_sync(Ss + (rm + i) * 16 * L::kLdS + cgu * 16, gf[i], L::kLdS, wmma::mem_row_major);
    }
    __syncthreads();
    for (int i = tid; i < kBM * kNC; i += kThreadsF) {
      const int r = i / kNC, c = i % kNC;
      Hs[r * (kNC + kPad) + c] = __float2bfloat16_rn(Ss[r * L::kLdS + c]);
    }
    __syncthreads();
    // y += h · W_down[chunk]
#pragma unroll
    for (int ks = 0; ks < kNC / 16; ++ks) {
      FragA hf[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(hf[i], Hs + (rm + i) * 16 * (kNC + kPad) + ks * 16, kNC + kPad);
#pragma unroll
      for (int j = 0; j < kYF; ++j) {
        const int cn = cy + j;
        FragB bf;
        if (KMajor)
          wmma::load_matrix_sync(bf, Wds + cn * 16 * L::kLdWdCol + ks * 16, L::kLdWdCol);
        else
          wmma::load_matrix_sync(bf, Wds + ks * 16 * L::kLdWdRow + cn * 16, L::kLdWdRow);
#pragma unroll
        for (int i = 0; i < 2; ++i) wmma::mma_sync(y[i][j], hf[i], bf, y[i][j]);
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kYF; ++j)
      wmma::store_matrix_sync(Ys + (rm + i) * 16 * L::kLdY + (cy + j) * 16, y[i][j], L::kLdY, wmma::mem_row_major);
  __syncthreads();
  // rows[r0 + r] = bf16(weight * y), 8 columns (16 bytes) per store.
  for (int i = tid; i < nrows * (D / 8); i += kThreadsF) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    const float p = a.slot_weight[a.sorted_slot[r0 + r]];
    alignas(16) bf16 v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = __float2bfloat16_rn(p * Ys[r * L::kLdY + c + e]);
    *reinterpret_cast<uint4*>(a.rows + int64_t(r0 + r) * D + c) = *reinterpret_cast<const uint4*>(v);
  }
}

template <int D, bool KMajor>
void launch(Device& dev, const FusedArgs& a, int64_t max_tiles) {
  auto kernel = fused_expert_kernel<D, KMajor>;
  constexpr size_t bytes = Smem<D>::kTotal;
  // Opt in to more than 48 KB of dynamic shared memory (cheap; repeated calls are harmless).
  AVDIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  kernel<<<static_cast<unsigned>(max_tiles), kThreadsF, bytes, dev.stream()>>>(a);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool fused_supported(Device& dev, const Tensor& x, const ExpertWeights& w, const RouterConfig& cfg, DType out) {
  const int64_t D = cfg.head_dim, De = expert_inter(w);
  return dev.props().major == 9 && out == DType::BF16 && x.dtype() == DType::BF16 && w.gate.dtype() == DType::BF16 &&
         (D == 64 || D == 128 || D == 256) && De % kNC == 0 && De > 0;
}

void fused_expert_rows(Device& dev, const Tensor& x, const Routing& routing, const Permutation& perm,
                       const ExpertWeights& w, const RouterConfig& cfg, Tensor& rows) {
  AVDIT_CHECK(perm.tile_rows == kBM, "fused experts: tiles of {} rows, the kernel takes {}", perm.tile_rows, kBM);
  FusedArgs a{};
  a.x = cptr<bf16>(x);
  a.sorted_slot = cptr<int32_t>(perm.sorted_slot);
  a.slot_weight = cptr<float>(routing.weights);
  a.offsets = cptr<int32_t>(perm.offsets);
  a.tile_group = cptr<int32_t>(perm.tile_group);
  a.tile_row = cptr<int32_t>(perm.tile_row);
  a.tile_count = cptr<int32_t>(perm.tile_count);
  a.wg = cptr<bf16>(w.gate);
  a.wu = cptr<bf16>(w.up);
  a.wd = cptr<bf16>(w.down);
  a.rows = static_cast<bf16*>(device_ptr(rows));
  a.H = static_cast<int>(cfg.heads);
  a.E = static_cast<int>(cfg.experts);
  a.K = static_cast<int>(cfg.top_k);
  a.De = static_cast<int>(expert_inter(w));
  const bool km = w.k_major;
  switch (cfg.head_dim) {
    case 64: km ? launch<64, true>(dev, a, perm.max_tiles) : launch<64, false>(dev, a, perm.max_tiles); break;
    case 128: km ? launch<128, true>(dev, a, perm.max_tiles) : launch<128, false>(dev, a, perm.max_tiles); break;
    default: km ? launch<256, true>(dev, a, perm.max_tiles) : launch<256, false>(dev, a, perm.max_tiles); break;
  }
}

}  // namespace avdit::cuda::moe
