// The routed experts in one Hopper kernel (moe/grouped.h): gate/up -> swiglu7 -> down, with h never
// leaving the registers and each unit's rows gathered from x by the kernel itself (one TMA load per
// row and k-block, gather_rows below), so there is no gather kernel and no row or h buffer.
//
// Why: the two-GEMM path (moe_grouped_gemm.cu) writes h (T x 72 x 1280 bf16, 12 GB at T = 65,536)
// and reads it back, and its gate/up kernel spends most of its instructions on the h stores beside
// the swiglu7. Here a CTA owns one work unit: 128 rows of one (head, expert) group,
// and sweeps the expert's intermediate width in chunks of 48 h columns. Per chunk and consumer warp
// group (64 rows):
//   gate/up: acc_gu [64 x 96] (48 interleaved gate/up pairs) = A [64 x D] (resident in smem for the
//            unit) x W_gu chunk (smem, TMA), 16 wgmma m64n96k16;
//   swiglu7 in place on acc_gu, rounded to bf16 and packed into the A fragment of the down GEMM;
//   down:    acc_out [64 x 256] += h chunk [64 x 48] (registers: wgmma's RS form) x W_d chunk,
//            3 wgmma m64n256k16.
// At the end of the unit: out row = bf16(routing weight x acc_out), as the two-GEMM path's down
// epilogue.
//
// The register trick (as FlashAttention-3 feeds P to its second GEMM): wgmma's accumulator gives a
// thread the column pairs (8i + 2q, 8i + 2q + 1) of rows r and r + 8 (q = lane % 4), which with
// the interleaved weight are (gate, up) of h column pair p = 4i + q: the thread holds h at p = q,
// 4 + q, 8 + q, ... But the RS A fragment of a k16 slice wants k = 2q, 2q + 1, 2q + 8, 2q + 9 of
// rows r, r + 8. So the gate/up weight rows are loaded in a permuted order: accumulator pair
// i = 4s + e (slice s, e = 0..3) holds h column j = 16s + 2q + (e & 1) + 8 (e >> 1) of the chunk,
// and then the thread's h values are exactly its A fragment for W_d's natural k order. The
// permutation costs nothing at run time: it is a 5-D TMA view of the packed weight rows
// (row = t + 4q + 2 e0 + 16 u with t = gate/up, e0 = e & 1, u = (e >> 1) + 2s + 6c) whose box
// walks (t, q, e0, u) - the smem row order - with the global strides (1, 4, 2, 16) rows.
//
// The schedule: each consumer warp group's swiglu7 of chunk c+1 runs under its own down MMAs of
// chunk c (a step: pack h -> issue gate/up c+1 and down c -> wait for gate/up c+1 -> swiglu7 ->
// wait for down c). Two things make ptxas keep the wgmmas asynchronous:
// - the chunk loop's back edge sits where no wgmma is in flight; with the back edge crossing
//   wgmmas in flight ptxas serialised every wgmma (C7511 / C7514);
// - chunks of 48 columns: out 128 + gate/up 48 + h 12 registers held by wgmmas (64-column chunks
//   hold 208 and ptxas runs out: C7512, spills). A 288-thread CTA gets no more registers than 168
//   (ptxas allocates per four warps), so a producer warp group and setmaxnreg 232 / 40.
//
// Shared memory (225 KB): A [4 k-blocks x 128 x 64] (64 KB, once per unit), a ring of 8 gate/up
// slots (12 KB: one k-block of one chunk; two chunks of prefetch) and a ring of 2 down slots
// (32 KB: W_d [256 x 64] from column 48c; its last 16 columns are unused, the 128-byte swizzle
// wants 64), and two UnitInfo (2 x 528 bytes). Warp roles: warp groups 0, 1 = consumers (rows 0-63,
// 64-127), one thread of warp group 2 issues every weight load, its warps 1-3 gather the rows.
// Units come from an atomic counter over a (group, m-tile) table made by a one-block scan kernel,
// in group order, so CTAs on one expert read its weights from L2 together.
//
// Limits: head_dim <= 256 (the gate/up K in four 64-wide k-blocks, the down N one 256-wide
// wgmma; past D both are TMA's zero fill or rows never stored), head_dim and the expert width
// multiples of 8, the expert width above 48 (two chunks at least); elsewhere the two-GEMM path
// runs. Arithmetic: fp32 accumulation, h = bf16(swiglu7_lean_f(gate, up)), out = bf16(w * acc) -
// the contract of the two-GEMM path (only the fp32 summation order differs).
#include "ops/cuda/moe/grouped_internal.h"

#include "ops/cuda/common.cuh"

#if AVDIT_HAVE_CUTLASS
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstddef>
#include <utility>

#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/tensor.hpp"
#include "cutlass/arch/reg_reconfig.h"
#include "ops/cuda/moe/moe_internal.h"
#include "ops/cuda/sm90/mbarrier.cuh"

namespace avdit::cuda::moe {
namespace {

using namespace sm90;  // mbarrier helpers, TMA maps
using bf16 = __nv_bfloat16;
constexpr int kBM = 128, kBK = 64, kMaxKB = 4;  // unit rows, k-block, k-blocks (head_dim <= 256)
constexpr int kChunk = 48;                      // h columns per chunk (gate/up N = 96)
constexpr int kDN = 256;                        // the down GEMM's N (head_dim <= 256)
constexpr int kSlot = kBM * kBK * 2;            // A slot: 128 x 64 bf16, 16 KB
constexpr int kGuSlot = 96 * kBK * 2;           // gate/up slot: 96 x 64 bf16, 12 KB
constexpr int kWdSlot = kDN * kBK * 2;          // down slot: 256 x 64 bf16, 32 KB
constexpr int kGuSlots = 8, kWdSlots = 2, kRing = 4;
constexpr int kThreads = 384;  // two consumer warp groups (warps 0-7) + the producer warp group
constexpr int kConsumerWarps = 8;
// Producer warps 1-3 gather the unit's rows of x (a TMA load per row and k-block).
constexpr int kGatherWarps = 3, kGatherThreads = 32 * kGatherWarps;
constexpr int kOffA = 0;
constexpr int kOffGu = kOffA + kMaxKB * kSlot;
constexpr int kOffWd = kOffGu + kGuSlots * kGuSlot;
constexpr int kOffBar = kOffWd + kWdSlots * kWdSlot;

struct Bars {
  uint64_t a_full[kMaxKB], a_empty[kMaxKB], gu_full[kGuSlots], gu_empty[kGuSlots],
      wd_full[kWdSlots], wd_empty[kWdSlots], r_full[kRing], r_empty[kRing];
};
constexpr int kOffRing = kOffBar + int(sizeof(Bars));
// A unit's out-row bookkeeping, written by the gather warps with its rows so that the consumers'
// epilogue reads shared memory rather than a chain of four dependent global loads (units -> offsets
// -> sorted_slot -> slot_weight). Two of them: the gather of unit i + 1 overlaps unit i's epilogue.
struct UnitInfo {
  int64_t row0;  // the unit's first sorted row
  int rows;      // its rows (<= 128)
  int pad;
  float w[kBM];  // the routing weight of each row (0 past rows)
};
constexpr int kOffInfo = kOffRing + kRing * 4;
constexpr int kSmemBytes = kOffInfo + 2 * int(sizeof(UnitInfo));
constexpr int kSmemAlloc = kSmemBytes + 1024;  // room to align the base to 1024 (128-byte swizzle)
static_assert(kSmemAlloc <= 232448, "fused experts kernel: shared memory over 227 KB");
static_assert(kOffInfo % 8 == 0, "UnitInfo holds an int64");
static_assert(kOffGu % 1024 == 0 && kOffWd % 1024 == 0 && kSlot % 1024 == 0, "1024-byte slots");

struct FusedParams {
  const bf16* x;  // [T, H * D], the rows of slot s at token s / (H K), head (s / K) % H
  int H, K;
  int x_rows;          // T * H: x seen as [T * H, D] (the TMA map)
  const int* offsets;  // Permutation::offsets at the chunk's first group
  const int2* units;   // (group in the chunk, m-tile) per unit, group order
  const int* total;    // number of units
  int* counter;        // next unit (zero before the launch)
  int g0;              // global group of the chunk's first group (weight coordinates)
  int D, De, nc;       // head_dim, expert width, chunks of 48 h columns
  const int* sorted_slot;
  const float* slot_weight;
  bf16* rows;  // [S, D] out, by global sorted row
};

constexpr uint64_t kHint = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
// x's rows are read once: they should not push the experts' weights out of L2.
constexpr uint64_t kHintX = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_FIRST);

using AtomGu =
    cute::SM90::GMMA::MMA_64x96x16_F32BF16BF16_SS<cute::GMMA::Major::K, cute::GMMA::Major::K>;
// The Lead kernel's first chunk (32 h columns): the first 64 rows of the gate/up slot (smem rows
// 0-63 = u 0-3 = the down's k16 slices 0, 1 under the permutation above) into gu(0..31), which are
// the first 32 accumulators of the n96 layout.
using AtomGu64 =
    cute::SM90::GMMA::MMA_64x64x16_F32BF16BF16_SS<cute::GMMA::Major::K, cute::GMMA::Major::K>;
using AtomDn =
    cute::SM90::GMMA::MMA_64x256x16_F32BF16BF16_RS<cute::GMMA::Major::K, cute::GMMA::Major::K>;
using MmaGu = decltype(cute::make_tiled_mma(AtomGu{}));  // one warp group: 64 x 96
using MmaDn = decltype(cute::make_tiled_mma(AtomDn{}));  // one warp group: 64 x 256
using LayoutA = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<cute::bfloat16_t>{},
                                             cute::Shape<cute::_64, cute::_64>{}));
using LayoutGu = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<cute::bfloat16_t>{},
                                              cute::Shape<cute::_96, cute::_64>{}));
using LayoutWd = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<cute::bfloat16_t>{},
                                              cute::Shape<cute::_256, cute::_64>{}));
using AccGu = decltype(cute::partition_fragment_C(MmaGu{}, cute::Shape<cute::_64, cute::_96>{}));
using AccDn = decltype(cute::partition_fragment_C(MmaDn{}, cute::Shape<cute::_64, cute::_256>{}));

// One RS wgmma m64n256k16 with the A fragment a[0..3] and B descriptor desc into acc.
template <size_t... I>
__device__ __forceinline__ void down_fma(const uint32_t* a, uint64_t desc, AccDn& acc,
                                         cute::GMMA::ScaleOut scale, std::index_sequence<I...>) {
  AtomDn::fma(a[0], a[1], a[2], a[3], desc, acc(I)..., scale);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// One SS wgmma m64n96k16 (Narrow: m64n64k16 into the first 32 accumulators) with the descriptors
// da, db into acc.
template <bool Narrow, size_t... I>
__device__ __forceinline__ void gu_fma(uint64_t da, uint64_t db, AccGu& acc,
                                       cute::GMMA::ScaleOut scale, std::index_sequence<I...>) {
  if constexpr (Narrow)
    AtomGu64::fma(da, db, acc(I)..., scale);
  else
    AtomGu::fma(da, db, acc(I)..., scale);
}
__device__ __forceinline__ uint64_t desc_at(uint32_t hi, uint32_t lo) {
  return (uint64_t{hi} << 32) | lo;
}

// The consumer warp groups' side of a unit. The wgmma descriptors are built once per thread (the
// first k-block / slot / k16 step; the others add their byte offset / 16 to the low word, the
// 14-bit start address field: no carry below 256 KB) and the barriers are addressed from one shared
// base.
struct Consumer {
  char* smem;
  Bars* bars;
  int wg, wt, lane;
  int n = 0;  // chunks issued so far (the slot rings' position)
  uint32_t a_lo = 0, a_hi = 0, gu_lo = 0, gu_hi = 0, wd_lo = 0, wd_hi = 0;  // descriptor words
  uint32_t bar_s = 0;  // the shared-memory address of *bars
  // The shared-memory address of barrier `i` of the array at byte offset `off` in Bars.
  __device__ __forceinline__ uint32_t bar_at(size_t off, uint32_t i) const {
    return bar_s + static_cast<uint32_t>(off) + 8u * i;
  }

  __device__ __forceinline__ void init_descs() {
    using namespace cute;
    MmaGu mg;
    auto tg = mg.get_slice(wt);
    cute::Tensor sA = make_tensor(
        make_smem_ptr(reinterpret_cast<bfloat16_t*>(smem + kOffA) + wg * 64 * kBK), LayoutA{});
    cute::Tensor sB =
        make_tensor(make_smem_ptr(reinterpret_cast<bfloat16_t*>(smem + kOffGu)), LayoutGu{});
    const uint64_t da = tg.make_fragment_A(tg.partition_A(sA))(0, 0, 0).desc_;
    const uint64_t db = tg.make_fragment_B(tg.partition_B(sB))(0, 0, 0).desc_;
    MmaDn md;
    auto td = md.get_slice(wt);
    cute::Tensor sW =
        make_tensor(make_smem_ptr(reinterpret_cast<bfloat16_t*>(smem + kOffWd)), LayoutWd{});
    const uint64_t dw = td.make_fragment_B(td.partition_B(sW))(0, 0, 0).desc_;
    // Through a volatile move: ptxas would otherwise rematerialise the conversion (S2UR SR_CgaCtaId
    // and six uniform ops) at every use rather than hold the result.
    asm volatile("mov.b32 %0, %1;\n" : "=r"(bar_s) : "r"(smem_u32(bars)));
    a_lo = uint32_t(da), a_hi = uint32_t(da >> 32);
    gu_lo = uint32_t(db), gu_hi = uint32_t(db >> 32);
    wd_lo = uint32_t(dw), wd_hi = uint32_t(dw >> 32);
  }

  // Issues chunk n's gate/up MMAs on acc (16 wgmmas, one commit group). Chunk n's four k-blocks are
  // slots 4 (n & 1) + k of the 8-slot ring, all of phase (n >> 1) & 1. wait_a: only at a unit's
  // first chunk (its rows then stay in A for the whole unit). Narrow: n64 wgmmas (the Lead kernel's
  // chunk 0).
  template <bool Narrow = false>
  __device__ __forceinline__ void issue_gu(AccGu& acc, uint32_t a_phase, bool wait_a) {
    using namespace cute;
    const uint32_t s0 = (uint32_t(n) & 1u) << 2, ph = (uint32_t(n) >> 1) & 1u;
    static_assert(kGuSlots == 2 * kMaxKB, "two chunks of k-blocks in the gate/up ring");
    constexpr size_t kAcc = Narrow ? 32 : 48;  // accumulators the wgmma writes
    warpgroup_fence_operand(acc);
    CUTE_UNROLL
    for (int k = 0; k < kMaxKB; ++k) {
      if (wait_a) bar_wait(bar_at(offsetof(Bars, a_full), k), a_phase);
      bar_wait(bar_at(offsetof(Bars, gu_full), s0 + k), ph);
      warpgroup_arrive();
      const uint32_t b_lo = gu_lo + (s0 + k) * (kGuSlot >> 4);
      CUTE_UNROLL
      for (int kk = 0; kk < kBK / 16;
           ++kk)  // a k16 step is 32 bytes further along the swizzled rows
        gu_fma<Narrow>(desc_at(a_hi, a_lo + uint32_t((k * kSlot + kk * 32) >> 4)),
                       desc_at(gu_hi, b_lo + uint32_t(kk * 2)), acc,
                       (k == 0 && kk == 0) ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One,
                       std::make_index_sequence<kAcc>{});
    }
    warpgroup_commit_batch();
    warpgroup_fence_operand(acc);
  }

  // Issues chunk n's down MMAs: acc (+)= h [64 x 48] x W_d chunk (3 wgmmas, one commit group;
  // Narrow: the first 2, h columns 0-31: the Narrow kernel's last chunk, whose columns past De meet
  // W_d's zero fill).
  template <bool Narrow = false>
  __device__ __forceinline__ void issue_down(AccDn& acc, const uint32_t (&h)[12], bool first) {
    using namespace cute;
    const uint32_t s = uint32_t(n) & 1u;
    bar_wait(bar_at(offsetof(Bars, wd_full), s), (uint32_t(n) >> 1) & 1u);
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    const uint32_t w_lo = wd_lo + s * (kWdSlot >> 4);
    CUTE_UNROLL
    for (int ks = 0; ks < (Narrow ? 2 : 3); ++ks)
      down_fma(h + 4 * ks, desc_at(wd_hi, w_lo + uint32_t(ks * 2)), acc,
               (first && ks == 0) ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One,
               std::make_index_sequence<128>{});
    warpgroup_commit_batch();
    warpgroup_fence_operand(acc);
  }

  // After gate/up n is complete (its slots released): swiglu7 in place, h(row r, pair i) into
  // gu(4i) and h(row r + 8, pair i) into gu(4i + 2).
  __device__ __forceinline__ void swiglu(AccGu& gu) {
    CUTE_UNROLL
    for (int i = 0; i < 12; ++i) {
      gu(4 * i) = swiglu7_lean_f(gu(4 * i), gu(4 * i + 1));
      gu(4 * i + 2) = swiglu7_lean_f(gu(4 * i + 2), gu(4 * i + 3));
    }
  }
  __device__ __forceinline__ void pack(const AccGu& gu, uint32_t (&h)[12]) {
    CUTE_UNROLL
    for (int s = 0; s < 3; ++s) {
      const int i = 4 * s;
      h[4 * s + 0] = pack_bf16(gu(4 * i), gu(4 * (i + 1)));
      h[4 * s + 1] = pack_bf16(gu(4 * i + 2), gu(4 * (i + 1) + 2));
      h[4 * s + 2] = pack_bf16(gu(4 * (i + 2)), gu(4 * (i + 3)));
      h[4 * s + 3] = pack_bf16(gu(4 * (i + 2) + 2), gu(4 * (i + 3) + 2));
    }
  }
  __device__ __forceinline__ void release_gu(bool last_gu) {
    const uint32_t s0 = (uint32_t(n) & 1u) << 2;
    CUTE_UNROLL
    for (int k = 0; k < kMaxKB; ++k) {
      bar_arrive_if(bar_at(offsetof(Bars, gu_empty), s0 + k), lane == 0);
      bar_arrive_if(bar_at(offsetof(Bars, a_empty), k), lane == 0 && last_gu);
    }
  }
  __device__ __forceinline__ void release_wd(uint32_t chunk) {
    bar_arrive_if(bar_at(offsetof(Bars, wd_empty), chunk & 1u), lane == 0);
  }
  // One step, entered with nothing in flight and chunk n's h (fp32) in gu: pack h, issue gate/up
  // n + 1 and down n, then swiglu7 of n + 1 while down n runs. The loop's back edge is where
  // nothing is in flight, so ptxas sees every wgmma group it must track in straight-line code.
  __device__ __forceinline__ void step(AccGu& gu, AccDn& out, uint32_t (&h)[12], uint32_t a_phase,
                                       bool first, bool next_is_last) {
    pack(gu, h);
    ++n;
    issue_gu(gu, a_phase, false);  // chunk n + 1 (the unit's rows were waited for at its chunk 0)
    --n;
    issue_down(out, h, first);
    cute::warpgroup_wait<1>();  // gate/up n + 1 done; down n runs on
    cute::warpgroup_fence_operand(gu);
    ++n;
    release_gu(next_is_last);
    swiglu(gu);
    cute::warpgroup_wait<0>();
    cute::warpgroup_fence_operand(out);
    release_wd(uint32_t(n) - 1u);
  }
  // Warp group 1 in a unit of <= 64 rows (its 64 rows all past the group): no MMAs, only
  // the barrier protocol, so that the rings stay in step. Every full phase is waited for before its
  // empty barrier is arrived at: an arrival ahead of the slot's load would count towards the phase
  // warp group 0 is still reading. Entered after a_full[0] (which releases the unit's UnitInfo and
  // orders the A slots: the gather waited for every a_empty before any load of this unit).
  __device__ __forceinline__ void skip_unit(int nc) {
    CUTE_UNROLL
    for (int k = 0; k < kMaxKB; ++k) bar_arrive_if(bar_at(offsetof(Bars, a_empty), k), lane == 0);
    for (int c = 0; c < nc; ++c, ++n) {
      const uint32_t s0 = (uint32_t(n) & 1u) << 2, ph = (uint32_t(n) >> 1) & 1u;
      CUTE_UNROLL
      for (int k = 0; k < kMaxKB; ++k) {
        bar_wait(bar_at(offsetof(Bars, gu_full), s0 + k), ph);
        bar_arrive_if(bar_at(offsetof(Bars, gu_empty), s0 + k), lane == 0);
      }
      bar_wait(bar_at(offsetof(Bars, wd_full), uint32_t(n) & 1u), ph);
      release_wd(uint32_t(n));
    }
  }
};

// The producer warps 1-3 (gw = 0..2): each unit's 128 rows of x into the A slots. Lane l of
// warp gw owns rows gw + 3 l and gw + 3 (l + 32) (below 128), reads their x rows and routing
// weights as soon as the unit is claimed (one unit ahead of the weights, see the producer), then,
// once the unit before has freed A, issues one TMA load per row and k-block: a 64 x 1 box, which
// TMA writes in the 128-byte swizzle of its shared-memory address, so row r lands where the wgmmas
// read it. Rows past the group (x row T * H) and columns past D are TMA's zero fill (their products
// meet zero-filled weights or are never stored).

struct GatherRows {
  int64_t beg = 0;  // the unit's first sorted row
  int rows = 0;     // its rows (<= 128)
  int xr0 = 0,
      xr1 = 0;  // x rows (token * H + head) of this lane's rows gw + 3 lane, gw + 3 (lane + 32)
  float w0 = 0.f, w1 = 0.f;  // their routing weights (0 past the group)
};

__device__ __forceinline__ GatherRows gather_plan(const FusedParams& p, int u, int gw, int lane) {
  GatherRows g;
  if (u < 0) return g;
  const int2 um = p.units[u];
  g.beg = p.offsets[um.x] + int64_t(um.y) * kBM;
  g.rows = static_cast<int>(min(int64_t{kBM}, p.offsets[um.x + 1] - g.beg));
  const int r0 = gw + kGatherWarps * lane, r1 = gw + kGatherWarps * (lane + 32);
  const int hk = p.H * p.K;
  if (r0 < g.rows) {
    const int s = p.sorted_slot[g.beg + r0];
    g.xr0 = (s / hk) * p.H + (s / p.K) % p.H;
    g.w0 = p.slot_weight[s];
  }
  if (r1 < g.rows) {
    const int s = p.sorted_slot[g.beg + r1];
    g.xr1 = (s / hk) * p.H + (s / p.K) % p.H;
    g.w1 = p.slot_weight[s];
  }
  return g;
}

__device__ __forceinline__ void gather_rows(const FusedParams& p, const CUtensorMap* tma_x,
                                            char* smem, Bars* bars, const int* ring, UnitInfo* info,
                                            int gw) {
  const int lane = threadIdx.x % 32;
  const int r0 = gw + kGatherWarps * lane, r1 = gw + kGatherWarps * (lane + 32);
  const bool two = r1 < kBM;  // lanes 0-9 or 0-10 have a second row
  for (int units = 0;; ++units) {
    const int slot = units & (kRing - 1);
    bar_wait(&bars->r_full[slot], (units / kRing) & 1);
    const int u = ring[slot];
    __syncwarp();
    if (lane == 0) bar_arrive(&bars->r_empty[slot]);
    if (u < 0) break;
    const GatherRows cur = gather_plan(p, u, gw, lane);
    // Rows past the group read x row x_rows, past its end: TMA fills them with zeros.
    const int y0 = r0 < cur.rows ? cur.xr0 : p.x_rows, y1 = r1 < cur.rows ? cur.xr1 : p.x_rows;
    for (int k = 0; k < kMaxKB; ++k) bar_wait(&bars->a_empty[k], (units & 1) ^ 1);
    // info[units & 1] was last read by the epilogue of unit units - 2, which each consumer warp ran
    // before it released the rows of unit units - 1 (the wait above).
    UnitInfo& in = info[units & 1];
    in.w[r0] = cur.w0;
    if (two) in.w[r1] = cur.w1;
    if (gw == 0 && lane == 0) in.row0 = cur.beg, in.rows = cur.rows;
    // One 64-column k-block of one row per TMA load (128 bytes); the 128-byte swizzle follows the
    // shared-memory address, so row r lands in the layout the wgmmas read. The arrives release the
    // info writes too (the consumers' a_full wait acquires them).
    CUTE_UNROLL
    for (int k = 0; k < kMaxKB; ++k) {
      bar_expect(&bars->a_full[k], (two ? 2 : 1) * kBK * 2);
      cute::SM90_TMA_LOAD_2D::copy(tma_x, &bars->a_full[k], kHintX,
                                   smem + kOffA + k * kSlot + r0 * 128, k * kBK, y0);
      if (two)
        cute::SM90_TMA_LOAD_2D::copy(tma_x, &bars->a_full[k], kHintX,
                                     smem + kOffA + k * kSlot + r1 * 128, k * kBK, y1);
    }
  }
}

// The MMAs on rows and columns that no output reads are skipped:
// - warp group 1 sits out units of <= 64 rows (about half of every group's last unit) and keeps
//   only the barrier protocol (skip_unit);
// - Narrow (the last chunk holds <= 32 of the expert's h columns): that chunk's down runs 2 of its
// 3
//   k16 steps. The skipped step multiplies h columns past De by W_d's TMA zero fill, so the sums
//   are unchanged. Its gate/up stays n96: n64 wgmmas for it need the loop's last step peeled, and
//   ptxas then serialises the wgmmas (C7511, insufficient registers).
// Lead (De % 48 == 32, as De = 1280): the 32-column chunk comes first instead of last. Chunk 0's
// gate/up is outside the chunk loop already, so it runs as n64 wgmmas with no peel (a third fewer
// gate/up MMAs for that chunk); its h columns 32-47 are set to zero, so its third down k16 step
// (W_d columns 32-47, which chunk 1 multiplies by their real h) adds +0. Every k16 slice of the
// down sum then comes in the plain kernel's order: all three forms give the same bytes.
template <bool Narrow = false, bool Lead = false>
__global__ void __launch_bounds__(kThreads, 1)
    fused_kernel(const __grid_constant__ CUtensorMap tma_a,
                 const __grid_constant__ CUtensorMap tma_gu,
                 const __grid_constant__ CUtensorMap tma_wd, FusedParams p) {
  extern __shared__ char smem_raw[];
  // Aligned by an offset from smem_raw (not an integer cast), so stores stay st.shared.
  char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  Bars* bars = reinterpret_cast<Bars*>(smem + kOffBar);
  int* ring = reinterpret_cast<int*>(smem + kOffRing);
  UnitInfo* info = reinterpret_cast<UnitInfo*>(smem + kOffInfo);
  if (threadIdx.x == 0) {
    for (int i = 0; i < kMaxKB; ++i) {
      bar_init(&bars->a_full[i], kGatherThreads);
      bar_init(&bars->a_empty[i], kConsumerWarps);
    }
    for (int i = 0; i < kGuSlots; ++i) {
      bar_init(&bars->gu_full[i], 1);
      bar_init(&bars->gu_empty[i], kConsumerWarps);
    }
    for (int i = 0; i < kWdSlots; ++i) {
      bar_init(&bars->wd_full[i], 1);
      bar_init(&bars->wd_empty[i], kConsumerWarps);
    }
    for (int i = 0; i < kRing; ++i) {
      bar_init(&bars->r_full[i], 1);
      bar_init(&bars->r_empty[i], kConsumerWarps + kGatherWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int nc = p.nc;
  const int u_per_group = p.De / 8;  // 16-row units of the gate/up view per group (2 De / 16)
  static_assert(!(Lead && Narrow), "the narrow chunk is either first (Lead) or last (Narrow)");
  // Chunk c's first h column: 48 c, or with Lead 0, then 32 + 48 (c - 1).
  auto chunk_col = [](int c) { return Lead && c > 0 ? c * kChunk - 16 : c * kChunk; };

  if (threadIdx.x >= 256) {  // the producer warp group: one thread loads every weight
    cutlass::arch::warpgroup_reg_dealloc<40>();
    const int pw = (threadIdx.x - 256) / 32;
    if (pw > 0) {
      gather_rows(p, &tma_a, smem, bars, ring, info, pw - 1);
      return;
    }
    if (threadIdx.x != 256) return;
    const int total = *p.total;
    int n = 0, sent = 0;
    // Claims the next unit (-1: none left) and hands it to the consumers and the gather warps.
    auto claim = [&]() {
      int u = atomicAdd(p.counter, 1);
      if (u >= total) u = -1;
      const int slot = sent & (kRing - 1);
      bar_wait(&bars->r_empty[slot], ((sent / kRing) & 1) ^ 1);
      ring[slot] = u;
      bar_arrive(&bars->r_full[slot]);
      ++sent;
      return u;
    };
    // One unit ahead of the weights: the gather warps read unit i + 1's row indices and weights
    // (three dependent global loads) while unit i runs, off the path from unit i freeing A to unit
    // i + 1's first gate/up.
    for (int u = claim(); u >= 0;) {
      const int next = claim();
      const int2 um = p.units[u];
      const int g = p.g0 + um.x;
      for (int c = 0; c < nc; ++c, ++n) {
        for (int k = 0; k < kMaxKB; ++k) {
          const int idx = 4 * n + k, s = idx % kGuSlots;
          bar_wait(&bars->gu_empty[s], ((idx / kGuSlots) & 1) ^ 1);
          bar_expect(&bars->gu_full[s], kGuSlot);
          cute::SM90_TMA_LOAD_5D::copy(&tma_gu, &bars->gu_full[s], kHint,
                                       smem + kOffGu + s * kGuSlot, k * kBK, 0, 0, 0,
                                       g * u_per_group + chunk_col(c) / 8);
        }
        const int s = n & 1;
        bar_wait(&bars->wd_empty[s], ((n >> 1) & 1) ^ 1);
        bar_expect(&bars->wd_full[s], kWdSlot);
        cute::SM90_TMA_LOAD_2D::copy(&tma_wd, &bars->wd_full[s], kHint, smem + kOffWd + s * kWdSlot,
                                     chunk_col(c), g * p.D);
      }
      u = next;
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<232>();
  Consumer cs{smem, bars};
  const int ct = threadIdx.x;
  cs.wg = cutlass::canonical_warp_group_idx();
  cs.wt = ct % 128;
  cs.lane = threadIdx.x % 32;
  cs.init_descs();
  AccGu gu = cute::partition_fragment_C(MmaGu{}, cute::Shape<cute::_64, cute::_96>{});
  AccDn out = cute::partition_fragment_C(MmaDn{}, cute::Shape<cute::_64, cute::_256>{});
  uint32_t h[12];
  const int q = cs.lane & 3;
  // This thread's first row of the unit (and r + 8): the sm90 accumulator layout.
  const int rt = 64 * cs.wg + 16 * (cs.wt / 32) + (cs.lane >> 2);
  for (int units = 0;; ++units) {
    const int slot = units & (kRing - 1);
    bar_wait(&bars->r_full[slot], (units / kRing) & 1);
    const int u = ring[slot];
    __syncwarp();
    if (cs.lane == 0) bar_arrive(&bars->r_empty[slot]);
    if (u < 0) break;
    const uint32_t a_phase = units & 1;
    // Both warp groups wait (warp group 0's first gate/up would anyway): a branch around a wait
    // makes ptxas serialise the wgmmas after it (mbarrier.cuh).
    bar_wait(cs.bar_at(offsetof(Bars, a_full), 0), a_phase);  // acquires info[units & 1]
    if (cs.wg == 1 && info[units & 1].rows <= 64) {
      cs.skip_unit(nc);
      continue;
    }
    cs.template issue_gu<Lead>(gu, a_phase, true);
    cute::warpgroup_wait<0>();
    cute::warpgroup_fence_operand(gu);
    cs.release_gu(nc == 1);
    cs.swiglu(gu);
    if constexpr (Lead) {  // chunk 0 holds h columns 0-31: h of pairs 8-11 (columns 32-47) is zero
      CUTE_UNROLL
      for (int i = 8; i < 12; ++i) gu(4 * i) = gu(4 * i + 2) = 0.f;
    }
    for (int c = 0; c < nc - 1; ++c) cs.step(gu, out, h, a_phase, c == 0, c + 1 == nc - 1);
    cs.pack(gu, h);  // the last chunk
    cs.template issue_down<Narrow>(out, h, nc == 1);
    cute::warpgroup_wait<0>();
    cute::warpgroup_fence_operand(out);
    bar_arrive_if(&bars->wd_empty[cs.n & 1], cs.lane == 0);
    ++cs.n;

    // out rows: bf16(weight x acc), columns < D, rows of the group only; the unit's rows and
    // weights from shared memory (UnitInfo).
    const int64_t row0 = info[units & 1].row0;
    const int rows = info[units & 1].rows;
    CUTE_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int r = rt + 8 * half;
      const bool ok = r < rows;
      const int64_t row = row0 + (ok ? r : 0);
      const float w = info[units & 1].w[r];
      bf16* dst = p.rows + row * p.D + 2 * q;
      CUTE_UNROLL
      for (int i = 0; i < kDN / 8; ++i) {
        const uint32_t v = pack_bf16(w * out(4 * i + 2 * half), w * out(4 * i + 2 * half + 1));
        asm volatile(  // predicated, not branched (see bar_wait)
            "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p st.global.b32 [%0], %1;\n}\n" ::"l"(
                dst + 8 * i),
            "r"(v), "r"(uint32_t(ok && 8 * i + 2 * q < p.D))
            : "memory");
      }
    }
  }
}

// The unit table (moe_internal.h: scan, then fill): (group in the chunk, m-tile) per unit, group
// order.
struct UnitOut {
  int2* units;
  __device__ void operator()(int64_t j, int g, int m) const { units[j] = make_int2(g, m); }
};

}  // namespace

bool fused_experts_supported(int64_t D, int64_t De) {
  return D > 0 && D <= kMaxKB * kBK && D % 8 == 0 && De % 8 == 0 && De > kChunk;
}

void fused_experts_sm90(Device& dev, const FusedRun& r) {
  AVDIT_REQUIRE(fused_experts_supported(r.D, r.De),
                "moe fused experts: head_dim {} / expert width {} unsupported", r.D, r.De);
  if (r.a_rows == 0 || r.groups == 0) return;
  const cuuint64_t D = static_cast<cuuint64_t>(r.D), De = static_cast<cuuint64_t>(r.De);
  // x as [T * H, D], one 64-column k-block of one row per load.
  AVDIT_REQUIRE(r.T * r.H < (int64_t{1} << 31),
                "moe fused experts: {} x {} token rows exceed the TMA row index", r.T, r.H);
  const cuuint64_t x_dims[2] = {D, static_cast<cuuint64_t>(r.T * r.H)};
  const cuuint64_t x_strides[1] = {D * 2};
  const cuuint32_t x_box[2] = {kBK, 1};
  const CUtensorMap ta = make_tma_map_bf16(r.x, 2, x_dims, x_strides, x_box, "the token rows x");
  // gate/up: packed rows [G * 2 De, D] seen as (k, t, q, e0, u) with row = t + 4q + 2 e0 + 16u
  // (the permutation in the header comment); a box is 64 k x 96 rows in the smem order.
  const cuuint64_t row = D * 2;
  const cuuint64_t gu_dims[5] = {D, 2, 4, 2, static_cast<cuuint64_t>(r.G) * De / 8};
  const cuuint64_t gu_strides[4] = {row, 4 * row, 2 * row, 16 * row};
  const cuuint32_t gu_box[5] = {kBK, 2, 4, 2, 6};
  const CUtensorMap tg =
      make_tma_map_bf16(r.wgu, 5, gu_dims, gu_strides, gu_box, "the gate/up weights");
  // down: [G * D, De], 64 k x 256 rows (one group's D rows and, for D < 256, rows never stored).
  const cuuint64_t wd_dims[2] = {De, static_cast<cuuint64_t>(r.G) * D};
  const cuuint64_t wd_strides[1] = {De * 2};
  const cuuint32_t wd_box[2] = {kBK, kDN};
  const CUtensorMap tw =
      make_tma_map_bf16(r.wd, 2, wd_dims, wd_strides, wd_box, "the down weights");

  // The unit table: at most a_rows / 128 + groups units; the scan's tile bases [groups + 1] after
  // it.
  const int64_t max_units = r.a_rows / kBM + r.groups + 1;
  Tensor scratch = cuda_empty(dev, {max_units * 8 + 256 + (int64_t(r.groups) + 1) * 4}, DType::U8);
  char* base = static_cast<char*>(device_ptr(scratch));
  int* counter = reinterpret_cast<int*>(base);
  int* total = counter + 1;
  int2* units = reinterpret_cast<int2*>(base + 256);
  int* unit_base = reinterpret_cast<int*>(base + 256 + max_units * 8);
  AVDIT_CUDA_CHECK(cudaMemsetAsync(counter, 0, 4, dev.stream()));
  tile_scan_kernel<<<1, kTileScanThreads, 0, dev.stream()>>>(r.offsets, r.groups, kBM, unit_base,
                                                             total);
  AVDIT_CUDA_CHECK_LAUNCH();
  tile_fill_kernel<<<grid_for(max_units), kThreads, 0, dev.stream()>>>(
      r.offsets, unit_base, r.groups, max_units, UnitOut{units});
  AVDIT_CUDA_CHECK_LAUNCH();

  FusedParams p{};
  p.x = r.x;
  p.H = r.H;
  p.K = r.K;
  p.x_rows = static_cast<int>(r.T * r.H);
  p.offsets = r.offsets;
  p.units = units;
  p.total = total;
  p.counter = counter;
  p.g0 = r.g0;
  p.D = static_cast<int>(r.D);
  p.De = static_cast<int>(r.De);
  p.nc = static_cast<int>((r.De + kChunk - 1) / kChunk);
  p.sorted_slot = r.sorted_slot;
  p.slot_weight = r.slot_weight;
  p.rows = r.rows;
  // A chunk of exactly 32 h columns first where De % 48 == 32 (Lead); else a narrow last chunk
  // where it holds <= 32 (Narrow).
  const bool lead = r.De % kChunk == 32;
  const bool narrow = r.De - kChunk * (p.nc - 1) <= 32;
  auto kernel = lead     ? fused_kernel<false, true>
                : narrow ? fused_kernel<true>
                         : fused_kernel<false>;
  AVDIT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemAlloc));
  const int grid = static_cast<int>(std::min<int64_t>(dev.props().multiProcessorCount, max_units));
  kernel<<<grid, kThreads, kSmemAlloc, dev.stream()>>>(ta, tg, tw, p);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda::moe
#else  // no CUTLASS headers in this build (grouped.cu asks before sizing its scratch)

namespace avdit::cuda::moe {
bool fused_experts_supported(int64_t, int64_t) { return false; }
void fused_experts_sm90(Device&, const FusedRun&) {
  throw BadInput("moe fused experts: this build has no CUTLASS headers (third_party/cutlass)");
}
}  // namespace avdit::cuda::moe
#endif
