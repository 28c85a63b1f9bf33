// Kernel 7's gate/up GEMM (grouped.h, GroupedOptions::kernel = 7): our own Hopper kernel, written
// so that the swiglu7 epilogue of one tile runs while the tensor cores compute the next.
//
// Why (bench/NOTES.md, session 6): CUTLASS's cooperative kernel reaches 678 TFLOP/s on gate/up with
// no epilogue, but the swiglu7 + h stores then cost ~5 ms of its 14 at T = 65,536 because a
// cooperative consumer runs its epilogue between two tiles' MMAs; ping-pong consumers (which
// overlap them) need 64 x 256 or 128 x 128 tiles per warp group and then more operand bytes per
// FLOP from L2 than the card gives. This kernel keeps the operand traffic low and overlaps anyway:
// - CTA tile 128 x 128 (rows x interleaved gate/up columns = 64 h columns), K = head_dim <= 256 as
// up to
//   four 64-wide k-blocks. A work unit is (group, n-tile) with all its m-tiles: the unit's B tile
//   (128 x 256, 64 KB) stays in shared memory while the A tiles stream through two buffers of four
//   k-block slots. Per tile the SM loads 64 KB (A only) for 8.4 MFLOP, less per FLOP than the 128 x
//   256 cooperative kernel's 192 KB for 16.8.
// - Two accumulator sets of 64 x 128 per consumer warp group (64 registers each): tile c's wgmmas
// are
//   issued on one set, then tile c-1's swiglu7 and h store run on the other while they execute; the
//   waits for tile c's k-blocks are spread through that epilogue so each A slot is released as soon
//   as its MMAs are done.
// - Units are handed out by an atomic counter (producer thread -> consumers through a 4-entry smem
// ring),
//   in (group, n-tile) order, so the ~20 CTAs on one group's n-tiles read its A rows from L2
//   together, and the load stays balanced whatever the group sizes.
// - h goes from registers straight to global memory, 8 bytes per store after a transpose inside
// each quad
//   of lanes (store_part): ptxas lets global stores run beside the thread's wgmmas in flight,
//   whereas a shared-memory store (staging for bulk copies, as kernel 6) waits for all of them -
//   measured: that version took gate/up 16.5 ms against 13.5 (bench/NOTES.md, session 7).
// Warp roles: warp group 0 = producer (one thread issues every TMA load), warp groups 1-2 =
// consumers (rows 0-63 and 64-127 of the tile).
//
// A is read with one 2-D TMA descriptor over the whole gathered chunk [rows, D]: a tile of group g
// starts at g's first row and may run into the next group's rows (or past the end: zero fill);
// those accumulator rows are computed and never stored. B likewise with one descriptor over all
// groups' packed weights [G * 2De, D]. Columns k >= D are zero-filled by TMA, so any D <= 256 (D %
// 8 == 0) works. Arithmetic: fp32 wgmma accumulation, h = bf16(swiglu7_lean_f(gate, up)) - the same
// contract as kernels 5 and 6 (only the fp32 summation order inside a tile may differ).
#include "ops/cuda/moe/grouped_internal.h"

#if AVDIT_HAVE_CUTLASS
#include <cuda.h>
#include <cudaTypedefs.h>

#include "ops/cuda/common.cuh"
#include "ops/cuda/moe/mbarrier_sm90.cuh"
#include "ops/cuda/moe/moe_internal.h"
#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/tensor.hpp"
#include "cutlass/arch/reg_reconfig.h"

namespace avdit::cuda::moe {
namespace {

using namespace sm90;  // mbarrier helpers, TMA maps
using bf16 = __nv_bfloat16;
constexpr int kBM = 128, kBN = 128, kBK = 64,
              kMaxKB = 4;                  // tile, k-block, k-blocks (head_dim <= 256)
constexpr int kHCols = kBN / 2;            // h columns per tile
constexpr int kSlotBytes = kBM * kBK * 2;  // one 128 x 64 bf16 operand slot (A or B): 16 KB
constexpr int kGateUpThreads = 384;        // producer + two consumer warp groups
constexpr int kConsumerThreads = 256;
constexpr int kConsumerWarps = kConsumerThreads / 32;
// Shared memory (offsets from a 1024-byte aligned base, which the 128-byte swizzle needs).
constexpr int kOffB = 0;                                  // B [kMaxKB] slots
constexpr int kOffA = kOffB + kMaxKB * kSlotBytes;        // A [2 buffers][kMaxKB] slots
constexpr int kOffBar = kOffA + 2 * kMaxKB * kSlotBytes;  // mbarriers
constexpr int kBars =
    2 * 2 * kMaxKB + 2 * kMaxKB + 2 * 4;  // A full/empty, B full/empty, ring full/empty
constexpr int kOffRing = kOffBar + kBars * 8;
constexpr int kSmemBytes = kOffRing + 4 * 4;
constexpr int kSmemAlloc = kSmemBytes + 1024;  // room to align the base
static_assert(kSmemAlloc <= 232448, "gate/up kernel: shared memory over 227 KB");
static_assert(kOffA % 1024 == 0 && kSlotBytes % 1024 == 0, "operand slots 1024-byte aligned");

struct Bars {
  uint64_t a_full[2 * kMaxKB], a_empty[2 * kMaxKB], b_full[kMaxKB], b_empty[kMaxKB], r_full[4],
      r_empty[4];
};
static_assert(sizeof(Bars) == kBars * 8, "barrier block");

struct GateUpParams {
  const int* offsets;  // the chunk's first group's entry of Permutation::offsets: group i =
                       // [offsets[i], offsets[i+1])
  int64_t chunk_row0;  // sorted row of the chunk's first row (A and h rows are chunk-local)
  int units;           // groups * n_tiles
  int n_tiles;         // ceil(2 De / 128)
  int64_t b_row0;      // packed weight row of the chunk's first group (g0 * 2 De)
  int two_de, de;
  bf16* h;       // [chunk rows, De]
  int* counter;  // next unit (zero before the launch)
};

__device__ __forceinline__ void tma_load(const CUtensorMap* map, uint64_t* bar, void* dst, int k,
                                         int row) {
  cute::SM90_TMA_LOAD_2D::copy(
      map, bar, static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL), dst, k, row);
}

using Atom =
    cute::SM90::GMMA::MMA_64x128x16_F32BF16BF16_SS<cute::GMMA::Major::K, cute::GMMA::Major::K>;
using TiledMma = decltype(cute::make_tiled_mma(Atom{}));  // one warp group: 64 x 128
using LayoutA = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<cute::bfloat16_t>{},
                                             cute::Shape<cute::_64, cute::_64>{}));
using LayoutB = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<cute::bfloat16_t>{},
                                             cute::Shape<cute::_128, cute::_64>{}));
using Acc = decltype(cute::partition_fragment_C(TiledMma{}, cute::Shape<cute::_64, cute::_128>{}));

// A tile whose h is still to be written: h rows [hrow, hrow + rows), columns [hcol, hcol + cols).
struct Pending {
  int64_t hrow = 0;
  int rows = 0, hcol = 0, cols = 0;
};

// One consumer thread's state and its per-tile step.
struct Consumer {
  char* smem;
  Bars* bars;
  const GateUpParams* p;
  int wg, wt, ct, lane;  // warp group (0, 1), thread in it, thread among the consumers, lane
  int c = 0;             // tiles so far
  int units = 0;         // units so far

  // Tile c's k-block k on `acc` (the 16-deep wgmma steps of one 64-wide block).
  __device__ __forceinline__ void mma_block(Acc& acc, int q, int k) {
    using namespace cute;
    TiledMma mma;
    auto thr = mma.get_slice(wt);
    cute::Tensor sA = make_tensor(
        make_smem_ptr(reinterpret_cast<bfloat16_t*>(smem + kOffA + (q * kMaxKB + k) * kSlotBytes) +
                      wg * 64 * kBK),
        LayoutA{});
    cute::Tensor sB = make_tensor(
        make_smem_ptr(reinterpret_cast<bfloat16_t*>(smem + kOffB + k * kSlotBytes)), LayoutB{});
    cute::Tensor tA = thr.make_fragment_A(thr.partition_A(sA));
    cute::Tensor tB = thr.make_fragment_B(thr.partition_B(sB));
    mma.accumulate_ = k == 0 ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
    CUTE_UNROLL
    for (int kk = 0; kk < size<2>(tA); ++kk) {
      gemm(mma, tA(_, _, kk), tB(_, _, kk), acc);
      mma.accumulate_ = GMMA::ScaleOut::One;
    }
  }

  // The pending tile's h for accumulator elements [16 part, 16 part + 16) straight from registers
  // to global memory, which ptxas lets run beside the wgmmas in flight (a shared store would wait
  // for them). A thread holds h(row, 4j + q) for j = 0..15 (q = lane % 4; elements 4j, 4j+1: row r,
  // 4j+2, 4j+3: row r + 8 - the sm90 64 x N accumulator layout); part J is j = 4J..4J+3. A 4 x 4
  // transpose across the quad (two shuffles) gives lane q the contiguous columns 16J + 4q .. +3:
  // one 8-byte store per row, and a warp's store writes 8 rows x 32 bytes, whole sectors.
  template <int kPart>
  __device__ __forceinline__ void store_part(const Acc& acc, const Pending& pend) {
    const int q = lane & 3;
    const int rt = 64 * wg + 16 * (wt / 32) + (lane >> 2);  // this thread's first row in the tile
    const int col = 16 * kPart + 4 * q;
    CUTE_UNROLL
    for (int half = 0; half < 2; ++half) {
      float hf[4];
      CUTE_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * (4 * kPart + e) + 2 * half;
        hf[e] = swiglu7_lean_f(acc(i), acc(i + 1));
      }
      const __nv_bfloat162 b0 = __floats2bfloat162_rn(hf[0], hf[1]),
                           b1 = __floats2bfloat162_rn(hf[2], hf[3]);
      uint32_t p0 = *reinterpret_cast<const uint32_t*>(&b0),
               p1 = *reinterpret_cast<const uint32_t*>(&b1);
      // Lane bit 1 <-> element bit 1 (which register), then lane bit 0 <-> element bit 0 (which
      // half).
      uint32_t recv = __shfl_xor_sync(0xffffffffu, (q & 2) ? p0 : p1, 2);
      p0 = (q & 2) ? recv : p0;
      p1 = (q & 2) ? p1 : recv;
      recv = __shfl_xor_sync(
          0xffffffffu, (q & 1) ? __byte_perm(p0, p1, 0x5410) : __byte_perm(p0, p1, 0x7632), 1);
      const uint32_t n0 = (q & 1) ? __byte_perm(recv, p0, 0x7610) : __byte_perm(p0, recv, 0x5410);
      const uint32_t n1 = (q & 1) ? __byte_perm(recv, p1, 0x7632) : __byte_perm(p1, recv, 0x7610);
      const int r = rt + 8 * half;
      const bf16* dst = p->h + (pend.hrow + r) * p->de + pend.hcol + col;
      asm volatile(  // predicated, not branched (see bar_wait)
          "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n @p st.global.v2.b32 [%0], {%1, %2};\n}\n" ::
              "l"(dst),
          "r"(n0), "r"(n1), "r"(uint32_t(r < pend.rows && col < pend.cols))
          : "memory");
    }
  }

  // After tile c's k-block k is done: its A slot, and on the unit's last tile its B slot, go back
  // to the producer (one arrival per consumer warp).
  __device__ __forceinline__ void release(int q, int k, bool last) {
    bar_arrive_if(&bars->a_empty[q * kMaxKB + k], lane == 0);
    bar_arrive_if(&bars->b_empty[k], lane == 0 && last);
  }

  // Tile c: issue its MMAs on acc_m, then write the pending tile's h from acc_e while they run.
  // last: the tile is its unit's last (its B slots are released afterwards).
  __device__ __forceinline__ void step(Acc& acc_m, Acc& acc_e, const Pending& pend, bool last) {
    const int q = c & 1;
    const uint32_t ph = (c >> 1) & 1;
    // A no-op at run time (the previous step ended with wait<0>), but without it ptxas cannot see
    // across the loop that acc_e's wgmmas are complete and injects a full wait before the epilogue
    // below reads it, which would serialise epilogue and MMAs again.
    cute::warpgroup_wait<0>();
    cute::warpgroup_fence_operand(acc_e);
    cute::warpgroup_fence_operand(acc_m);
    // No branches between the wgmmas (ptxas serialises wgmmas on what it cannot prove
    // warp-uniform): the unit's B is waited for on every tile (its phase stays complete until the
    // unit's last tile releases it), and the first tile's epilogue runs on an unwritten accumulator
    // and stores no rows.
    CUTE_UNROLL
    for (int k = 0; k < kMaxKB; ++k) {
      bar_wait(&bars->b_full[k], units & 1);
      bar_wait(&bars->a_full[q * kMaxKB + k], ph);
      cute::warpgroup_arrive();
      mma_block(acc_m, q, k);
      cute::warpgroup_commit_batch();
    }
    store_part<0>(acc_e, pend);
    cute::warpgroup_wait<3>();
    release(q, 0, last);
    store_part<1>(acc_e, pend);
    cute::warpgroup_wait<2>();
    release(q, 1, last);
    store_part<2>(acc_e, pend);
    cute::warpgroup_wait<1>();
    release(q, 2, last);
    store_part<3>(acc_e, pend);
    cute::warpgroup_wait<0>();
    release(q, 3, last);
    cute::warpgroup_fence_operand(acc_m);
  }

  // The last tile's h, with no MMAs behind it.
  __device__ __forceinline__ void finish(const Acc& acc_e, const Pending& pend) {
    store_part<0>(acc_e, pend);
    store_part<1>(acc_e, pend);
    store_part<2>(acc_e, pend);
    store_part<3>(acc_e, pend);
  }
};

__global__ void __launch_bounds__(kGateUpThreads, 1)
    gateup_kernel(const __grid_constant__ CUtensorMap tma_a,
                  const __grid_constant__ CUtensorMap tma_b, GateUpParams p) {
  extern __shared__ char smem_raw[];
  // Aligned by an offset from smem_raw (not through an integer cast), so the compiler still knows
  // these are shared addresses and stores st.shared instead of generic stores.
  char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  Bars* bars = reinterpret_cast<Bars*>(smem + kOffBar);
  int* ring = reinterpret_cast<int*>(smem + kOffRing);
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2 * kMaxKB; ++i) {
      bar_init(&bars->a_full[i], 1);
      bar_init(&bars->a_empty[i], kConsumerWarps);
    }
    for (int i = 0; i < kMaxKB; ++i) {
      bar_init(&bars->b_full[i], 1);
      bar_init(&bars->b_empty[i], kConsumerWarps);
    }
    for (int i = 0; i < 4; ++i) {
      bar_init(&bars->r_full[i], 1);
      bar_init(&bars->r_empty[i], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x < 128) {  // producer warp group: one thread loads everything
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (threadIdx.x != 0) return;
    int c = 0, units = 0, sent = 0;
    for (;;) {
      int u, gl = 0, j = 0;
      int64_t beg = 0, M = 0;
      for (;;) {  // the next unit with rows (empty groups have no tiles)
        u = atomicAdd(p.counter, 1);
        if (u >= p.units) {
          u = -1;
          break;
        }
        gl = u / p.n_tiles;
        j = u % p.n_tiles;
        beg = p.offsets[gl];
        M = p.offsets[gl + 1] - beg;
        if (M > 0) break;
      }
      const int slot = sent & 3;
      bar_wait(&bars->r_empty[slot], ((sent >> 2) & 1) ^ 1);
      ring[slot] = u;
      bar_arrive(&bars->r_full[slot]);
      ++sent;
      if (u < 0) break;
      const int row0 = static_cast<int>(beg - p.chunk_row0);
      const int brow = static_cast<int>(p.b_row0 + int64_t(gl) * p.two_de + int64_t(j) * kBN);
      const int mt = static_cast<int>((M + kBM - 1) / kBM);
      for (int m = 0; m < mt; ++m, ++c) {
        const int q = c & 1;
        const uint32_t ph = (c >> 1) & 1;
        for (int k = 0; k < kMaxKB;
             ++k) {  // all four k-blocks: those past D arrive as TMA's zero fill
          if (m == 0) {
            bar_wait(&bars->b_empty[k], (units & 1) ^ 1);
            bar_expect(&bars->b_full[k], kSlotBytes);
            tma_load(&tma_b, &bars->b_full[k], smem + kOffB + k * kSlotBytes, k * kBK, brow);
          }
          uint64_t* full = &bars->a_full[q * kMaxKB + k];
          bar_wait(&bars->a_empty[q * kMaxKB + k], ph ^ 1);
          bar_expect(full, kSlotBytes);
          tma_load(&tma_a, full, smem + kOffA + (q * kMaxKB + k) * kSlotBytes, k * kBK,
                   row0 + m * kBM);
        }
      }
      ++units;
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<232>();
  Consumer cs{smem, bars, &p};
  cs.ct = threadIdx.x - 128;
  cs.wg = cs.ct / 128;
  cs.wt = cs.ct % 128;
  cs.lane = threadIdx.x % 32;
  Acc acc0 = cute::partition_fragment_C(TiledMma{}, cute::Shape<cute::_64, cute::_128>{});
  Acc acc1 = cute::partition_fragment_C(TiledMma{}, cute::Shape<cute::_64, cute::_128>{});
  Pending pend;  // rows = 0: nothing to store
  for (;;) {
    const int slot = cs.units & 3;
    bar_wait(&bars->r_full[slot], (cs.units >> 2) & 1);
    const int u = ring[slot];
    __syncwarp();
    if (cs.lane == 0) bar_arrive(&bars->r_empty[slot]);
    if (u < 0) break;
    const int gl = u / p.n_tiles, j = u % p.n_tiles;
    const int64_t beg = p.offsets[gl], M = p.offsets[gl + 1] - beg;
    const int mt = static_cast<int>((M + kBM - 1) / kBM);
    for (int m = 0; m < mt; ++m) {
      Pending cur;
      cur.hrow = beg - p.chunk_row0 + int64_t(m) * kBM;
      cur.rows = static_cast<int>(min(int64_t{kBM}, M - int64_t(m) * kBM));
      cur.hcol = j * kHCols;
      cur.cols = min(kHCols, p.de - cur.hcol);
      // acc0 for even tiles, acc1 for odd ones (registers cannot be indexed at run time).
      if (cs.c & 1)
        cs.step(acc1, acc0, pend, m == mt - 1);
      else
        cs.step(acc0, acc1, pend, m == mt - 1);
      pend = cur;
      ++cs.c;
    }
    ++cs.units;
  }
  if (cs.c > 0) {
    if (cs.c & 1)
      cs.finish(acc0, pend);
    else
      cs.finish(acc1, pend);
  }
}

// A 2-D TMA descriptor over a row-major bf16 matrix [rows, cols]: 64 x 128 boxes
// (mbarrier_sm90.cuh).
CUtensorMap make_map(const void* base, int64_t rows, int64_t cols, const char* what) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {kBK, kBM};
  return make_tma_map_bf16(base, 2, dims, strides, box, what);
}

}  // namespace

bool gateup_own_supported(int64_t D, int64_t De) {
  return D > 0 && D <= kMaxKB * kBK && D % 8 == 0 && De % 8 == 0;
}

void gateup_own_sm90(Device& dev, const GateUpRun& r) {
  AVDIT_REQUIRE(gateup_own_supported(r.D, r.De),
                "moe gate/up kernel 7: head_dim {} / expert width {} unsupported", r.D, r.De);
  if (r.a_rows == 0 || r.groups == 0) return;
  const CUtensorMap ta = make_map(r.a, r.a_rows, r.D, "the gathered rows (gate/up A)");
  const CUtensorMap tb = make_map(r.wgu, r.w_rows, r.D, "the packed gate/up weights");
  Tensor counter = cuda_empty(dev, {4}, DType::U8);
  AVDIT_CUDA_CHECK(cudaMemsetAsync(device_ptr(counter), 0, 4, dev.stream()));
  GateUpParams p{};
  p.offsets = r.offsets;
  p.chunk_row0 = r.chunk_row0;
  p.n_tiles = static_cast<int>((2 * r.De + kBN - 1) / kBN);
  p.units = r.groups * p.n_tiles;
  p.b_row0 = r.b_row0;
  p.two_de = static_cast<int>(2 * r.De);
  p.de = static_cast<int>(r.De);
  p.h = r.h;
  p.counter = static_cast<int*>(device_ptr(counter));
  AVDIT_CUDA_CHECK(
      cudaFuncSetAttribute(gateup_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemAlloc));
  const int grid = std::min(dev.props().multiProcessorCount, p.units);
  gateup_kernel<<<grid, kGateUpThreads, kSmemAlloc, dev.stream()>>>(ta, tb, p);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda::moe
#endif
