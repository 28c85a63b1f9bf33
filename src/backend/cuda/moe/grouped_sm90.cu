// The two grouped GEMMs of the routed experts on Hopper (see grouped.h): CUTLASS 4.2's sm90 ptr-array
// grouped GEMM (TMA loads into a multi-stage smem pipeline, wgmma, one producer warp group and two
// cooperative consumer warp groups, the persistent group tile scheduler), with problem shapes,
// operand pointers and strides written by a small kernel from Permutation::offsets, so the host never
// waits for the routing. The epilogue is ours (MoeEpilogue below): it reads the accumulators straight
// from registers (no smem staging) and writes either h = bf16(swiglu7(gate, up)) or
// bf16(weight * y) rows. One GEMM type serves both GEMMs (the epilogue mode is a run-time flag), so
// the CUTLASS templates are instantiated once.
#include "backend/cuda/moe/grouped_internal.h"

#include <cuda_bf16.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/moe/moe_internal.h"

#if AVDIT_HAVE_CUTLASS
#include "cute/tensor.hpp"
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
#endif

namespace avdit::cuda::moe {

#if AVDIT_HAVE_CUTLASS
namespace {

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
struct MoeEpilogue {
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

  struct SharedStorage {};
  using TensorMapStorage = SharedStorage;

  struct Arguments {
    bf16* out = nullptr;
    const int* row_base = nullptr;  // [groups]
    int64_t ldo = 0;
    int swiglu = 0;
    const int* sorted_slot = nullptr;   // down only
    const float* slot_weight = nullptr; // down only
  };
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

  CUTLASS_HOST_DEVICE explicit MoeEpilogue(Params const& p) : params(p) {}

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& acc,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
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
    static_assert(decltype(size(acc))::value % 2 == 0, "accumulator pairs");
    const int64_t row0 = params.row_base[l_coord];
    bf16* out = params.out;
    const int64_t ldo = params.ldo;
    if (params.swiglu) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc); i += 2) {
        const int m = get<0>(tCcD(i)), n = get<1>(tCcD(i));
        if (m < M && n + 1 < N)
          out[(row0 + m) * ldo + (n >> 1)] = __float2bfloat16_rn(swiglu7_f(acc(i), acc(i + 1)));
      }
    } else {
      // One weight per row: the rows a thread touches repeat across its fragments, but the loads hit L1.
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc); i += 2) {
        const int m = get<0>(tCcD(i)), n = get<1>(tCcD(i));
        if (m < M && n + 1 < N) {
          const int64_t row = row0 + m;
          const float w = params.slot_weight[params.sorted_slot[row]];
          __nv_bfloat162 v;
          v.x = __float2bfloat16_rn(w * acc(i));
          v.y = __float2bfloat16_rn(w * acc(i + 1));
          *reinterpret_cast<__nv_bfloat162*>(out + row * ldo + n) = v;
        }
      }
    }
  }

  Params params;
};

using ElementAB = cutlass::bfloat16_t;
using LayoutA = cutlass::layout::RowMajor;     // A [M, K], K contiguous
using LayoutB = cutlass::layout::ColumnMajor;  // B stored [N, K], K contiguous ("TN")
constexpr int kAlign = 8;                      // 16 bytes of bf16
// 128 x 256 output tiles (two consumer warp groups of 64 x 256), 64-deep K stages: the down GEMM's
// N = D = 256 is one tile wide; gate/up's 2 De = 2560 is ten.
using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
using Epilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<MoeEpilogue>;
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, LayoutA*, kAlign, ElementAB, LayoutB*, kAlign,
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
using StrideA = typename Kernel::InternalStrideA;
using StrideB = typename Kernel::InternalStrideB;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;

// Per-group GEMM arguments of both GEMMs, on the device.
struct GroupArrays {
  Shape3* shape1;
  Shape3* shape2;
  const ElementAB** a1;
  const ElementAB** b1;
  const ElementAB** a2;
  const ElementAB** b2;
  StrideA* sa1;
  StrideB* sb1;
  StrideA* sa2;
  StrideB* sb2;
  int* base1;  // h row (within the chunk buffer) of the group's first row
  int* base2;  // global sorted row of the group's first row
};

// One thread per group g: its rows [offsets[g], offsets[g+1]) sit at local row offsets[g] - chunk_row0
// of the chunk buffers, where the chunk holds heads [c*hpc, (c+1)*hpc) and every head owns exactly
// rows_per_head sorted rows. Empty groups get M = 0; the scheduler gives them no tiles.
__global__ void setup_kernel(GroupArrays g, const int* offsets, int G, int E, int hpc, int64_t rows_per_head, int D,
                             int De, const bf16* a_buf, const bf16* h_buf, const bf16* wgu, const bf16* wd) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= G) return;
  const int64_t chunk_row0 = int64_t((i / E) / hpc) * hpc * rows_per_head;
  const int M = offsets[i + 1] - offsets[i];
  const int64_t local = offsets[i] - chunk_row0;
  g.shape1[i] = Shape3{M, 2 * De, D};
  g.shape2[i] = Shape3{M, D, De};
  g.a1[i] = reinterpret_cast<const ElementAB*>(a_buf + local * D);
  g.b1[i] = reinterpret_cast<const ElementAB*>(wgu + int64_t(i) * 2 * De * D);
  g.a2[i] = reinterpret_cast<const ElementAB*>(h_buf + local * De);
  g.b2[i] = reinterpret_cast<const ElementAB*>(wd + int64_t(i) * D * De);
  g.sa1[i] = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(M, D, 1));
  g.sb1[i] = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(2 * De, D, 1));
  g.sa2[i] = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(M, De, 1));
  g.sb2[i] = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(D, De, 1));
  g.base1[i] = static_cast<int>(local);
  g.base2[i] = offsets[i];
}

// A[i - r0] = x row of sorted row i (its token, its head's D columns), 16 bytes per thread.
__global__ void gather_kernel(const bf16* x, const int* sorted_slot, int64_t r0, int64_t n, int H, int K, int D,
                              bf16* a) {
  const int per = D / 8;
  const int64_t total = n * per;
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < total; j += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = j / per;
    const int c = static_cast<int>(j % per) * 8;
    const int s = sorted_slot[r0 + i];
    const int64_t t = s / (H * K);
    const int h = (s / K) % H;
    *reinterpret_cast<uint4*>(a + i * D + c) =
        *reinterpret_cast<const uint4*>(x + (t * H + h) * int64_t(D) + c);
  }
}

template <class T>
T* carve(char*& p, int64_t count) {
  T* r = reinterpret_cast<T*>(p);
  p += (count * int64_t(sizeof(T)) + 255) / 256 * 256;
  return r;
}

void run_gemm(Device& dev, int groups, Shape3* shapes, const ElementAB** a, StrideA* sa, const ElementAB** b,
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

}  // namespace

bool grouped_gemm_built() { return true; }

void grouped_run_sm90(Device& dev, const GroupedRun& r) {
  const int G = r.H * r.E;
  const int64_t rows_per_head = r.T * r.K;
  cudaStream_t st = dev.stream();
  // The per-group argument arrays of both GEMMs in one allocation.
  const int64_t bytes = 2 * (int64_t(sizeof(Shape3)) * G + 256) + 4 * (int64_t(sizeof(void*)) * G + 256) +
                        2 * (int64_t(sizeof(StrideA)) * G + 256) + 2 * (int64_t(sizeof(StrideB)) * G + 256) +
                        2 * (int64_t(sizeof(int)) * G + 256) + 256;
  Tensor arena = cuda_empty(dev, {bytes}, DType::U8);
  char* p = static_cast<char*>(device_ptr(arena));
  GroupArrays ga{};
  ga.shape1 = carve<Shape3>(p, G);
  ga.shape2 = carve<Shape3>(p, G);
  ga.a1 = carve<const ElementAB*>(p, G);
  ga.b1 = carve<const ElementAB*>(p, G);
  ga.a2 = carve<const ElementAB*>(p, G);
  ga.b2 = carve<const ElementAB*>(p, G);
  ga.sa1 = carve<StrideA>(p, G);
  ga.sb1 = carve<StrideB>(p, G);
  ga.sa2 = carve<StrideA>(p, G);
  ga.sb2 = carve<StrideB>(p, G);
  ga.base1 = carve<int>(p, G);
  ga.base2 = carve<int>(p, G);
  setup_kernel<<<(G + 255) / 256, 256, 0, st>>>(ga, r.offsets, G, r.E, r.heads_per_chunk, rows_per_head, r.D, r.De,
                                               r.a_buf, r.h_buf, r.wgu, r.wd);
  AVDIT_CUDA_CHECK_LAUNCH();
  Tensor workspace;
  for (int h0 = 0; h0 < r.H; h0 += r.heads_per_chunk) {
    const int h1 = std::min(r.H, h0 + r.heads_per_chunk);
    const int g0 = h0 * r.E, groups = (h1 - h0) * r.E;
    const int64_t row0 = h0 * rows_per_head, nrows = (h1 - h0) * rows_per_head;
    gather_kernel<<<grid_for(nrows * (r.D / 8)), kThreads, 0, st>>>(r.x, r.sorted_slot, row0, nrows, r.H, r.K, r.D,
                                                                    r.a_buf);
    AVDIT_CUDA_CHECK_LAUNCH();
    MoeEpilogue::Arguments e1{};
    e1.out = r.h_buf;
    e1.row_base = ga.base1 + g0;
    e1.ldo = r.De;
    e1.swiglu = 1;
    run_gemm(dev, groups, ga.shape1 + g0, ga.a1 + g0, ga.sa1 + g0, ga.b1 + g0, ga.sb1 + g0, e1, workspace);
    MoeEpilogue::Arguments e2{};
    e2.out = r.rows;
    e2.row_base = ga.base2 + g0;
    e2.ldo = r.D;
    e2.swiglu = 0;
    e2.sorted_slot = r.sorted_slot;
    e2.slot_weight = r.slot_weight;
    run_gemm(dev, groups, ga.shape2 + g0, ga.a2 + g0, ga.sa2 + g0, ga.b2 + g0, ga.sb2 + g0, e2, workspace);
  }
}

#else  // no CUTLASS headers in this build

bool grouped_gemm_built() { return false; }

void grouped_run_sm90(Device&, const GroupedRun&) {
  throw BadInput("moe grouped experts: this build has no CUTLASS headers (third_party/cutlass)");
}

#endif

}  // namespace avdit::cuda::moe
