// The CUTLASS pieces of the grouped expert GEMMs (grouped.h), shared by the translation units that
// instantiate a kernel, one variant each so that they compile in parallel (GroupedOptions::kernel
// picks one):
//   0 grouped_sm90.cu                cooperative 128 x 256 tiles, h stored from registers
//   1 grouped_staged_sm90.cu         cooperative 128 x 256, h staged through shared memory for 16-byte stores
//   2 grouped_fast_sm90.cu           1 with the fast swiglu7 (swiglu7_fast_f)
//   3 grouped_pingpong_sm90.cu       2 on ping-pong consumers with 64 x 256 tiles: one warp group's
//                                    epilogue runs while the other's MMAs do
//   4 grouped_pingpong128_sm90.cu    the same with 128 x 128 tiles (fewer operand bytes per FLOP)
//   5 grouped_lean_sm90.cu           2 with the lean swiglu7 (swiglu7_lean_f: 12 instead of 16 instructions
//                                    per h value)
//   6 grouped_bulk_sm90.cu           5 with h leaving smem by bulk asynchronous copies, one per row (store_bulk)
//   7 gate/up: grouped_gateup_sm90.cu, our own kernel (no CUTLASS kernel; its epilogue runs
//                                    beside the next tile's wgmmas); down: 6
//   9 grouped_fused_sm90.cu          both GEMMs in one kernel of our own, h in registers (no
//                                    CUTLASS), each warp group's swiglu7 under its own down MMAs
//  10 (the default) the same file:   9 gathering its rows from x itself (no gather kernel, no scratch)
// (2 x 1 and 2 x 2 clusters, BK = 128, 4 with the lean swiglu7, and 8 - 9 with 64-column chunks and
// every MMA step waited for - were measured and removed: bench/NOTES.md.)
// Included only by *_sm90.cu files.
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/moe/moe_internal.h"
#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace avdit::cuda::moe::grouped_detail {

using bf16 = __nv_bfloat16;

// The epilogue of both GEMMs, for CUTLASS's ptr-array kernel (the interface of its
// DefaultEpilogueArray, wrapped in Sm90TmaWarpSpecializedAdapter as the builder does for
// PtrArrayNoSmemWarpSpecialized). Group l's output rows start at row_base[l] of `out` (leading
// dimension ldo).
// - swiglu (gate/up GEMM, N = 2 De): wgmma's accumulator layout gives each thread pairs of adjacent
//   columns (2j, 2j+1) of one row as consecutive fragment elements; with the interleaved weight these
//   are gate_j and up_j, so h[row][j] = bf16(swiglu7(gate, up)) needs no data exchange.
// - else (down GEMM, N = D): out[row][n] = bf16(slot_weight[sorted_slot[row]] * acc), two columns per
//   4-byte store.
// kStaged (gate/up only): h goes through shared memory first (store_staged below).
struct MoeEpilogueArgs {  // the run-time arguments, one type for every instance
  bf16* out = nullptr;
  const int* row_base = nullptr;  // [groups]
  int64_t ldo = 0;
  int swiglu = 0;
  const int* sorted_slot = nullptr;   // down only
  const float* slot_weight = nullptr; // down only
};

// The gate/up epilogue's swiglu7 (moe_internal.h): accurate swiglu7_f, swiglu7_fast_f, or swiglu7_lean_f.
enum SwigluForm : int { kSwigluAccurate = 0, kSwigluFast = 1, kSwigluLean = 2 };

// kSwiglu: the gate/up epilogue's swiglu7. kTileM x kTileN: the tile one epilogue call stores (the whole
// CTA tile on cooperative consumers, one warp group's on ping-pong). kBulk (staged, cooperative only):
// h rows leave shared memory by bulk asynchronous copies (store_bulk) instead of the threads' stores.
template <bool kStaged, SwigluForm kSwiglu = kSwigluAccurate, int kTileM = 128, int kTileN = 256, bool kBulk = false>
struct MoeEpilogueT {
  using EpilogueSchedule = cutlass::epilogue::PtrArrayNoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  using ElementOutput = cutlass::bfloat16_t;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementC = cutlass::bfloat16_t;
  using StrideC = cute::Stride<int64_t, cute::_1, cute::_0>*;
  using InternalStrideC = cute::remove_pointer_t<StrideC>;
  using ElementD = cutlass::bfloat16_t;
  using StrideD = StrideC;
  using InternalStrideD = InternalStrideC;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  // Only for GemmUniversalAdapter's type aliases; the arithmetic is in operator() below.
  using ThreadEpilogueOp = cutlass::epilogue::thread::LinearCombination<ElementD, 1, float, float>;

  // kStaged: the kTileM x kTileN / 2 h tile of the gate/up GEMM in bf16 (32 KB for 128 x 256), unpadded;
  // the 16-byte chunk j of row r sits at chunk j ^ (r % 8) of the row, so the 8 rows of one warp's
  // fragment stores land in distinct banks and 16-byte reads stay aligned. Ping-pong warp groups run
  // their epilogues one after the other (CUTLASS orders them), so one buffer serves both.
  // kBulk: rows must be contiguous for the bulk copies, so no swizzle; instead each row is padded by 16
  // bytes (272-byte rows for 128 x 256 tiles), which puts the 8 rows of a warp's stores 4 banks apart.
  static constexpr int kStageRows = kTileM, kStageCols = kTileN / 2, kStageLd = kStageCols + (kBulk ? 8 : 0);
  static_assert(kStageCols % 64 == 0, "staged epilogue: whole 8-chunk swizzle groups per row");
  CUTLASS_DEVICE static int staged_at(int r, int c) {
    if constexpr (kBulk)
      return r * kStageLd + c;
    else
      return r * kStageLd + ((((c >> 3) ^ r) & 7) | (c >> 3 & ~7)) * 8 + (c & 7);
  }
  struct StagedStorage {
    alignas(128) bf16 h[kStageRows * kStageLd];
  };
  struct EmptyStorage {};
  using SharedStorage = cute::conditional_t<kStaged, StagedStorage, EmptyStorage>;
  using TensorMapStorage = SharedStorage;

  using Arguments = MoeEpilogueArgs;
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&, int) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.out != nullptr && args.row_base != nullptr && args.ldo % 2 == 0;
  }

  CUTLASS_HOST_DEVICE explicit MoeEpilogueT(Params const& p) : params(p) {}

  CUTLASS_DEVICE static float act(float g, float u) {
    if constexpr (kSwiglu == kSwigluLean)
      return swiglu7_lean_f(g, u);
    else if constexpr (kSwiglu == kSwigluFast)
      return swiglu7_fast_f(g, u);
    else
      return swiglu7_f(g, u);
  }

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& acc,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char* smem) {
    using namespace cute;
    const int M = static_cast<int>(get<0>(problem_shape_mnkl));
    const int N = static_cast<int>(get<1>(problem_shape_mnkl));
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    (void)k_coord;
    // Absolute (m, n) of every accumulator element this thread holds.
    cute::Tensor cD = make_identity_tensor(make_shape(M, N));
    cute::Tensor cD_tile = local_tile(cD, take<0, 2>(blk_shape_MNK), make_coord(m_coord, n_coord));
    cute::Tensor tCcD = tiled_mma.get_thread_slice(thread_idx).partition_C(cD_tile);
    static_assert(is_static<FrgLayout>::value, "accumulator layout must be static");
    static_assert(decltype(size(acc))::value % 4 == 0, "accumulator pairs of two rows");
    const int64_t row0 = params.row_base[l_coord];
    bf16* out = params.out;
    const int64_t ldo = params.ldo;
    if constexpr (kStaged && kBulk) {
      if (params.swiglu) {
        store_bulk(M, N, static_cast<int>(m_coord), static_cast<int>(n_coord), blk_shape_MNK, acc, tiled_mma,
                   thread_idx, row0, smem);
        return;
      }
    } else if constexpr (kStaged) {
      if (params.swiglu) {
        store_staged(M, N, static_cast<int>(m_coord), static_cast<int>(n_coord), blk_shape_MNK, acc, tiled_mma,
                     thread_idx, row0, smem);
        return;
      }
    }
    if (params.swiglu) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc); i += 2) {
        const int m = get<0>(tCcD(i)), n = get<1>(tCcD(i));
        if (m < M && n + 1 < N)
          out[(row0 + m) * ldo + (n >> 1)] = __float2bfloat16_rn(act(acc(i), acc(i + 1)));
      }
    } else {
      // wgmma gives each thread two rows of a 64-row warp-group tile (r and r + 8): their weights are
      // loaded once (elements 0 and 2 of the fragment); any other row falls back to a direct load.
      const int ma = get<0>(tCcD(0)), mb = get<0>(tCcD(2));
      const float wa = ma < M ? params.slot_weight[params.sorted_slot[row0 + ma]] : 0.f;
      const float wb = mb < M ? params.slot_weight[params.sorted_slot[row0 + mb]] : 0.f;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc); i += 2) {
        const int m = get<0>(tCcD(i)), n = get<1>(tCcD(i));
        if (m < M && n + 1 < N) {
          const int64_t row = row0 + m;
          const float w = m == ma ? wa : m == mb ? wb : params.slot_weight[params.sorted_slot[row]];
          __nv_bfloat162 v;
          v.x = __float2bfloat16_rn(w * acc(i));
          v.y = __float2bfloat16_rn(w * acc(i + 1));
          *reinterpret_cast<__nv_bfloat162*>(out + row * ldo + n) = v;
        }
      }
    }
  }

  // Both staged epilogues' first half: this thread's h values (one per accumulator pair) into the smem tile.
  template <class BlockShapeMNK, class FrgEngine, class FrgLayout, class TiledMma>
  CUTLASS_DEVICE static void stage_h(BlockShapeMNK blk_shape_MNK, cute::Tensor<FrgEngine, FrgLayout> const& acc,
                                     TiledMma tiled_mma, int thread_idx, bf16* sh) {
    using namespace cute;
    constexpr int kBM = decltype(size<0>(blk_shape_MNK))::value, kBN = decltype(size<1>(blk_shape_MNK))::value;
    static_assert(kBM == kStageRows && kBN == 2 * kStageCols, "staged epilogue: the tile it was declared for");
    cute::Tensor cT = make_identity_tensor(take<0, 2>(blk_shape_MNK));  // (m, n) within the tile
    cute::Tensor tCcT = tiled_mma.get_thread_slice(thread_idx).partition_C(cT);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); i += 2) {
      const int mt = get<0>(tCcT(i)), nt = get<1>(tCcT(i));
      sh[staged_at(mt, nt >> 1)] = __float2bfloat16_rn(act(acc(i), acc(i + 1)));
    }
  }

  // The gate/up epilogue through shared memory: each thread writes its h values (one per accumulator
  // pair) into the tile's smem copy, the 256 consumer threads meet at a named barrier, then every
  // thread stores whole 16-byte pieces of h rows (a warp writes two full 256-byte row segments per
  // store instead of 8-byte pieces of 8 rows: ~16x fewer L2 write requests for the 12 GB of h at
  // T = 65,536). A second barrier keeps the next tile's writes behind this tile's reads. Both
  // consumer warp groups run the epilogue of the same tile together (cooperative kernel), or each warp
  // group its own tile in turn (ping-pong; kThreadsE is then one warp group).
  template <class BlockShapeMNK, class FrgEngine, class FrgLayout, class TiledMma>
  CUTLASS_DEVICE void store_staged(int M, int N, int m_coord, int n_coord, BlockShapeMNK blk_shape_MNK,
                                   cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma, int thread_idx,
                                   int64_t row0, char* smem) {
    using namespace cute;
    constexpr int kBM = decltype(size<0>(blk_shape_MNK))::value;
    constexpr int kThreadsE = decltype(size(tiled_mma))::value;
    bf16* sh = reinterpret_cast<StagedStorage*>(smem)->h;
    stage_h(blk_shape_MNK, acc, tiled_mma, thread_idx, sh);
    cutlass::arch::NamedBarrier::sync(kThreadsE, 0);
    const int rows = min(kBM, M - m_coord * kBM);
    const int cols = min(kStageCols, N / 2 - n_coord * kStageCols);  // h columns (multiples of 8)
    bf16* out = params.out + (row0 + int64_t(m_coord) * kBM) * params.ldo + int64_t(n_coord) * kStageCols;
    for (int j = thread_idx; j < kStageRows * (kStageCols / 8); j += kThreadsE) {
      const int r = j / (kStageCols / 8), c = (j % (kStageCols / 8)) * 8;
      if (r < rows && c < cols)
        *reinterpret_cast<uint4*>(out + int64_t(r) * params.ldo + c) = *reinterpret_cast<const uint4*>(sh + staged_at(r, c));
    }
    cutlass::arch::NamedBarrier::sync(kThreadsE, 0);
  }

  // The gate/up epilogue with bulk asynchronous stores: the consumer threads write their h values into the
  // padded smem tile, meet at a named barrier, then thread r < rows issues one cp.async.bulk of row r
  // (256 bytes) to global memory and goes on to the next tile's MMAs; the copy engine reads smem and
  // writes h meanwhile. Before the next tile's writes, every thread waits until its own bulk copies have
  // read smem (by then ~4k cycles of MMAs have passed) and all meet again. Replaces store_staged's loop
  // of 16 16-byte loads and stores per thread (bench/NOTES.md, session 6: the h stores are ~2.5 ms of
  // gate/up's 16 at T = 65,536). store_tail (StagedAdapter) waits for the last copies before the CTA ends.
  template <class BlockShapeMNK, class FrgEngine, class FrgLayout, class TiledMma>
  CUTLASS_DEVICE void store_bulk(int M, int N, int m_coord, int n_coord, BlockShapeMNK blk_shape_MNK,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma, int thread_idx,
                                 int64_t row0, char* smem) {
    using namespace cute;
    constexpr int kBM = decltype(size<0>(blk_shape_MNK))::value;
    constexpr int kThreadsE = decltype(size(tiled_mma))::value;
    static_assert(kStageRows <= kThreadsE, "bulk epilogue: one row per thread");
    bf16* sh = reinterpret_cast<StagedStorage*>(smem)->h;
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");  // the previous tile's copies read smem
    cutlass::arch::NamedBarrier::sync(kThreadsE, 0);
    stage_h(blk_shape_MNK, acc, tiled_mma, thread_idx, sh);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the copy engine sees the writes
    cutlass::arch::NamedBarrier::sync(kThreadsE, 0);
    const int rows = min(kBM, M - m_coord * kBM);
    const int cols = min(kStageCols, N / 2 - n_coord * kStageCols);  // h columns (multiples of 8: 16-byte sizes)
    if (thread_idx < rows) {
      bf16* dst = params.out + (row0 + int64_t(m_coord) * kBM + thread_idx) * params.ldo + int64_t(n_coord) * kStageCols;
      const unsigned src = static_cast<unsigned>(__cvta_generic_to_shared(sh + thread_idx * kStageLd));
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
                   "r"(cols * 2)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
  }

  Params params;
};

using MoeEpilogue = MoeEpilogueT<false>;

using ElementAB = cutlass::bfloat16_t;
using LayoutA = cutlass::layout::RowMajor;     // A [M, K], K contiguous
using LayoutB = cutlass::layout::ColumnMajor;  // B stored [N, K], K contiguous ("TN")
constexpr int kAlign = 8;                      // 16 bytes of bf16
using Cluster1x1 = cute::Shape<cute::_1, cute::_1, cute::_1>;
using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;
using StrideA = cute::Stride<int64_t, cute::_1, cute::_0>;  // per group: (lda, 1, -)
using StrideB = cute::Stride<int64_t, cute::_1, cute::_0>;  // per group: (ldb, 1, -)

// CUTLASS's adapter for register epilogues uses the epilogue's SharedStorage twice, as tensor storage
// and as TMA-descriptor storage; the staged epilogue's 32 KB must appear once, so its adapter declares
// empty descriptor storage and the (no-op) descriptor hooks that take it.
template <class Op, bool kBulk = false>
class StagedAdapter : public cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Op> {
  using Base = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Op>;

 public:
  // The consumers' last call: the bulk epilogue's copies must be complete before the CTA (and its smem) ends.
  template <class... Args>
  CUTLASS_DEVICE auto store_tail(Args... args) {
    if constexpr (kBulk) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    return Base::store_tail(args...);
  }
  using TensorMapStorage = typename Op::EmptyStorage;
  using Base::Base;

  CUTLASS_DEVICE auto load_init(typename Op::Params const&, TensorMapStorage&, int32_t, int32_t) {
    return cute::make_tuple(nullptr);
  }
  CUTLASS_DEVICE auto store_init(typename Op::Params const&, TensorMapStorage&, int32_t, int32_t, int32_t) {
    return cute::make_tuple(nullptr);
  }
  template <bool IsLoad, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage&, typename Op::Params const&,
                                                cute::TmaDescriptor const*, ProblemShapeMNKL, int32_t, int32_t) {}
  template <bool IsLoad>
  CUTLASS_DEVICE void tensormaps_cp_fence_release(TensorMapStorage&, cute::TmaDescriptor const*, int32_t) {}
};

// One CTA per cluster: 2 x 1 and 2 x 2 clusters with TMA multicast gained nothing (bench/NOTES.md).
template <class TileShape, class Schedule, bool kStaged, SwigluForm kSwiglu = kSwigluAccurate, bool kBulk = false>
struct GroupedGemm {
  static constexpr int kTileM = decltype(cute::size<0>(TileShape{}))::value;
  static constexpr int kTileN = decltype(cute::size<1>(TileShape{}))::value;
  using Epilogue = cute::conditional_t<
      kStaged, StagedAdapter<MoeEpilogueT<true, kSwiglu, kTileM, kTileN, kBulk>, kBulk>,
      cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<MoeEpilogueT<false, kSwiglu, kTileM, kTileN>>>;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, LayoutA*, kAlign, ElementAB, LayoutB*, kAlign,
      float, TileShape, Cluster1x1,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      Schedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  static_assert(std::is_same_v<typename Kernel::InternalStrideA, StrideA>, "A stride type");
  static_assert(std::is_same_v<typename Kernel::InternalStrideB, StrideB>, "B stride type");
  // The whole kernel's shared memory (stages, staged epilogue, pipelines, descriptors) must fit the
  // 227 KB an sm_90 block may have: a compile-time check instead of a launch failure.
  static_assert(Kernel::SharedStorageSize <= 232448, "grouped GEMM: shared memory over 227 KB");

  // One grouped GEMM on dev's stream; `workspace` grows to what CUTLASS asks for (TMA descriptors per SM).
  static void run(Device& dev, int groups, Shape3* shapes, const ElementAB** a, StrideA* sa, const ElementAB** b,
                  StrideB* sb, const MoeEpilogue::Arguments& epi, Tensor& workspace) {
    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = ProblemShape{groups, shapes, nullptr};  // sizes on the device only
    args.mainloop = {a, sa, b, sb};
    args.epilogue = epi;
    args.hw_info.device_id = dev.ordinal();
    args.hw_info.sm_count = dev.props().multiProcessorCount;
    Gemm gemm;
    AVDIT_REQUIRE(gemm.can_implement(args) == cutlass::Status::kSuccess,
                  "moe grouped GEMM: CUTLASS cannot run these arguments ({} groups)", groups);
    const size_t need = Gemm::get_workspace_size(args);
    if (!workspace.defined() || size_t(workspace.numel()) < need)
      workspace = cuda_empty(dev, {static_cast<int64_t>(need) + 256}, DType::U8);
    cutlass::Status st = gemm.initialize(args, device_ptr(workspace), dev.stream());
    AVDIT_REQUIRE(st == cutlass::Status::kSuccess, "moe grouped GEMM: initialize failed ({})",
                  cutlass::cutlassGetStatusString(st));
    st = gemm.run(dev.stream());
    AVDIT_REQUIRE(st == cutlass::Status::kSuccess, "moe grouped GEMM: launch failed ({})",
                  cutlass::cutlassGetStatusString(st));
    AVDIT_CUDA_CHECK_LAUNCH();
  }
};

using Tile128x256 = cute::Shape<cute::_128, cute::_256, cute::_64>;
using Tile64x256 = cute::Shape<cute::_64, cute::_256, cute::_64>;
using Tile128x128 = cute::Shape<cute::_128, cute::_128, cute::_64>;
using CooperativeSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
using PingpongSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;

// The other variants' instances, each in its own translation unit (see the top of this file).
#define AVDIT_GROUPED_GEMM_RUN(name)                                                                           \
  void name(Device& dev, int groups, Shape3* shapes, const ElementAB** a, StrideA* sa, const ElementAB** b, \
            StrideB* sb, const MoeEpilogue::Arguments& epi, Tensor& workspace)
AVDIT_GROUPED_GEMM_RUN(run_gemm_staged);         // 1
AVDIT_GROUPED_GEMM_RUN(run_gemm_fast);           // 2
AVDIT_GROUPED_GEMM_RUN(run_gemm_pingpong);       // 3
AVDIT_GROUPED_GEMM_RUN(run_gemm_pingpong128);    // 4
AVDIT_GROUPED_GEMM_RUN(run_gemm_lean);           // 5
AVDIT_GROUPED_GEMM_RUN(run_gemm_bulk);           // 6

}  // namespace avdit::cuda::moe::grouped_detail
