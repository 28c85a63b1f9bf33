// The CUTLASS pieces of the two-GEMM grouped expert path (moe/grouped.h), the fallback where the
// fused experts kernel (moe_fused_experts.cu) does not apply: CUTLASS's sm90 ptr-array grouped GEMM
// with cooperative 128 x 256 tiles and our epilogue - gate/up: h = bf16(swiglu7(gate, up)) staged
// in shared memory and stored by bulk asynchronous copies, one per row; down: bf16(weight * acc)
// from registers. Included only by files under ops/cuda/sm90/.
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

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
#include "ops/cuda/common.cuh"
#include "ops/cuda/moe/moe_internal.h"

namespace avdit::cuda::moe::grouped_detail {

using bf16 = __nv_bfloat16;

// The epilogue of both GEMMs, for CUTLASS's ptr-array kernel (the interface of its
// DefaultEpilogueArray, wrapped as the builder does for PtrArrayNoSmemWarpSpecialized). Group l's
// output rows start at row_base[l] of `out` (leading dimension ldo).
// - swiglu (gate/up GEMM, N = 2 De): wgmma's accumulator layout gives each thread pairs of adjacent
//   columns (2j, 2j+1) of one row as consecutive fragment elements; with the interleaved weight
//   these are gate_j and up_j, so h[row][j] = bf16(swiglu7(gate, up)) needs no data exchange; the h
//   tile goes through shared memory to the bulk copies (store_bulk).
// - else (down GEMM, N = D): out[row][n] = bf16(slot_weight[sorted_slot[row]] * acc), two columns
// per
//   4-byte store.
struct MoeEpilogueArgs {  // the run-time arguments of both GEMMs
  bf16* out = nullptr;
  const int* row_base = nullptr;  // [groups]
  int64_t ldo = 0;
  int swiglu = 0;
  const int* sorted_slot = nullptr;    // down only
  const float* slot_weight = nullptr;  // down only
};

// kTileM x kTileN: the CTA tile (both consumer warp groups store it together).
template <int kTileM = 128, int kTileN = 256>
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

  // The kTileM x kTileN / 2 h tile of the gate/up GEMM in bf16. Rows must be contiguous for the
  // bulk copies, so no swizzle; instead each row is padded by 16 bytes (272-byte rows for 128 x 256
  // tiles), which puts the 8 rows of a warp's stores 4 banks apart.
  static constexpr int kStageRows = kTileM, kStageCols = kTileN / 2, kStageLd = kStageCols + 8;
  static_assert(kStageCols % 8 == 0, "staged epilogue: 16-byte row pieces");
  CUTLASS_DEVICE static int staged_at(int r, int c) { return r * kStageLd + c; }
  struct StagedStorage {
    alignas(128) bf16 h[kStageRows * kStageLd];
  };
  struct EmptyStorage {};
  using SharedStorage = StagedStorage;
  using TensorMapStorage = SharedStorage;

  using Arguments = MoeEpilogueArgs;
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args,
                                                  void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&, int) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*,
                                              cudaStream_t, cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.out != nullptr && args.row_base != nullptr && args.ldo % 2 == 0;
  }

  CUTLASS_HOST_DEVICE explicit MoeEpilogueT(Params const& p) : params(p) {}

  CUTLASS_DEVICE static float act(float g, float u) { return swiglu7_lean_f(g, u); }

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma,
                                 ResidueMNK, int thread_idx, char* smem) {
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
    if (params.swiglu) {
      store_bulk(M, N, static_cast<int>(m_coord), static_cast<int>(n_coord), blk_shape_MNK, acc,
                 tiled_mma, thread_idx, row0, smem);
    } else {
      // wgmma gives each thread two rows of a 64-row warp-group tile (r and r + 8): their weights
      // are loaded once (elements 0 and 2 of the fragment); any other row falls back to a direct
      // load.
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

  // This thread's h values (one per accumulator pair) into the smem tile.
  template <class BlockShapeMNK, class FrgEngine, class FrgLayout, class TiledMma>
  CUTLASS_DEVICE static void stage_h(BlockShapeMNK blk_shape_MNK,
                                     cute::Tensor<FrgEngine, FrgLayout> const& acc,
                                     TiledMma tiled_mma, int thread_idx, bf16* sh) {
    using namespace cute;
    constexpr int kBM = decltype(size<0>(blk_shape_MNK))::value,
                  kBN = decltype(size<1>(blk_shape_MNK))::value;
    static_assert(kBM == kStageRows && kBN == 2 * kStageCols,
                  "staged epilogue: the tile it was declared for");
    cute::Tensor cT = make_identity_tensor(take<0, 2>(blk_shape_MNK));  // (m, n) within the tile
    cute::Tensor tCcT = tiled_mma.get_thread_slice(thread_idx).partition_C(cT);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); i += 2) {
      const int mt = get<0>(tCcT(i)), nt = get<1>(tCcT(i));
      sh[staged_at(mt, nt >> 1)] = __float2bfloat16_rn(act(acc(i), acc(i + 1)));
    }
  }

  // The gate/up epilogue with bulk asynchronous stores: the consumer threads write their h values
  // into the padded smem tile, meet at a named barrier, then thread r < rows issues one
  // cp.async.bulk of row r (256 bytes) to global memory and goes on to the next tile's MMAs; the
  // copy engine reads smem and writes h meanwhile. Before the next tile's writes, every thread
  // waits until its own bulk copies have read smem (by then ~4k cycles of MMAs have passed) and all
  // meet again. store_tail (StagedAdapter) waits for the last copies before the CTA ends.
  template <class BlockShapeMNK, class FrgEngine, class FrgLayout, class TiledMma>
  CUTLASS_DEVICE void store_bulk(int M, int N, int m_coord, int n_coord,
                                 BlockShapeMNK blk_shape_MNK,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma,
                                 int thread_idx, int64_t row0, char* smem) {
    using namespace cute;
    constexpr int kBM = decltype(size<0>(blk_shape_MNK))::value;
    constexpr int kThreadsE = decltype(size(tiled_mma))::value;
    static_assert(kStageRows <= kThreadsE, "bulk epilogue: one row per thread");
    bf16* sh = reinterpret_cast<StagedStorage*>(smem)->h;
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::
                     : "memory");  // the previous tile's copies read smem
    cutlass::arch::NamedBarrier::sync(kThreadsE, 0);
    stage_h(blk_shape_MNK, acc, tiled_mma, thread_idx, sh);
    asm volatile("fence.proxy.async.shared::cta;\n" ::
                     : "memory");  // the copy engine sees the writes
    cutlass::arch::NamedBarrier::sync(kThreadsE, 0);
    const int rows = min(kBM, M - m_coord * kBM);
    const int cols =
        min(kStageCols, N / 2 - n_coord * kStageCols);  // h columns (multiples of 8: 16-byte sizes)
    if (thread_idx < rows) {
      bf16* dst = params.out + (row0 + int64_t(m_coord) * kBM + thread_idx) * params.ldo +
                  int64_t(n_coord) * kStageCols;
      const unsigned src =
          static_cast<unsigned>(__cvta_generic_to_shared(sh + thread_idx * kStageLd));
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst),
                   "r"(src), "r"(cols * 2)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
  }

  Params params;
};

using MoeEpilogue = MoeEpilogueT<>;

using ElementAB = cutlass::bfloat16_t;
using LayoutA = cutlass::layout::RowMajor;     // A [M, K], K contiguous
using LayoutB = cutlass::layout::ColumnMajor;  // B stored [N, K], K contiguous ("TN")
constexpr int kAlign = 8;                      // 16 bytes of bf16
using Cluster1x1 = cute::Shape<cute::_1, cute::_1, cute::_1>;
using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;
using StrideA = cute::Stride<int64_t, cute::_1, cute::_0>;  // per group: (lda, 1, -)
using StrideB = cute::Stride<int64_t, cute::_1, cute::_0>;  // per group: (ldb, 1, -)

// CUTLASS's adapter for register epilogues uses the epilogue's SharedStorage twice, as tensor
// storage and as TMA-descriptor storage; the staged h tile must appear once, so this adapter
// declares empty descriptor storage and the (no-op) descriptor hooks that take it.
template <class Op>
class StagedAdapter
    : public cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Op> {
  using Base = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Op>;

 public:
  // The consumers' last call: the bulk copies must be complete before the CTA (and its smem) ends.
  template <class... Args>
  CUTLASS_DEVICE auto store_tail(Args... args) {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    return Base::store_tail(args...);
  }
  using TensorMapStorage = typename Op::EmptyStorage;
  using Base::Base;

  CUTLASS_DEVICE auto load_init(typename Op::Params const&, TensorMapStorage&, int32_t, int32_t) {
    return cute::make_tuple(nullptr);
  }
  CUTLASS_DEVICE auto store_init(typename Op::Params const&, TensorMapStorage&, int32_t, int32_t,
                                 int32_t) {
    return cute::make_tuple(nullptr);
  }
  template <bool IsLoad, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage&, typename Op::Params const&,
                                                cute::TmaDescriptor const*, ProblemShapeMNKL,
                                                int32_t, int32_t) {}
  template <bool IsLoad>
  CUTLASS_DEVICE void tensormaps_cp_fence_release(TensorMapStorage&, cute::TmaDescriptor const*,
                                                  int32_t) {}
};

using Tile128x256 = cute::Shape<cute::_128, cute::_256, cute::_64>;
using CooperativeSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;

// One CTA per cluster (larger clusters with TMA multicast gained nothing).
template <class TileShape = Tile128x256, class Schedule = CooperativeSchedule>
struct GroupedGemm {
  static constexpr int kTileM = decltype(cute::size<0>(TileShape{}))::value;
  static constexpr int kTileN = decltype(cute::size<1>(TileShape{}))::value;
  using Epilogue = StagedAdapter<MoeEpilogueT<kTileM, kTileN>>;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, LayoutA*, kAlign, ElementAB,
      LayoutB*, kAlign, float, TileShape, Cluster1x1,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      Schedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  static_assert(std::is_same_v<typename Kernel::InternalStrideA, StrideA>, "A stride type");
  static_assert(std::is_same_v<typename Kernel::InternalStrideB, StrideB>, "B stride type");
  // The whole kernel's shared memory (stages, staged epilogue, pipelines, descriptors) must fit the
  // 227 KB an sm_90 block may have: a compile-time check instead of a launch failure.
  static_assert(Kernel::SharedStorageSize <= 232448, "grouped GEMM: shared memory over 227 KB");

  // One grouped GEMM on dev's stream; `workspace` grows to what CUTLASS asks for (TMA descriptors
  // per SM).
  static void run(Device& dev, int groups, Shape3* shapes, const ElementAB** a, StrideA* sa,
                  const ElementAB** b, StrideB* sb, const MoeEpilogue::Arguments& epi,
                  Tensor& workspace) {
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

}  // namespace avdit::cuda::moe::grouped_detail
