// The routed experts' stage on Hopper (see moe/grouped.h): the fused experts kernel
// (moe_fused_experts.cu) where it applies, else the fallback - two CUTLASS 4.2 sm90 ptr-array
// grouped GEMMs (TMA loads into a multi-stage smem pipeline, wgmma, one producer warp group and two
// cooperative consumer warp groups, the persistent group tile scheduler) after a gather of the
// rows, with problem shapes, operand pointers and strides written by a small kernel from
// Permutation::offsets, so the host never waits for the routing. The epilogue is ours
// (moe_grouped_gemm.h); one GEMM type serves both GEMMs (the epilogue mode is a run-time flag), so
// the CUTLASS templates are instantiated once.
#include "ops/cuda/moe/grouped_internal.h"

#include <cuda_bf16.h>

#include "ops/cuda/common.cuh"
#include "ops/cuda/moe/moe_internal.h"

#if AVDIT_HAVE_CUTLASS
#include "ops/cuda/sm90/moe_grouped_gemm.h"
#endif

namespace avdit::cuda::moe {

#if AVDIT_HAVE_CUTLASS
namespace {

using namespace grouped_detail;
// 128 x 256 output tiles (two consumer warp groups of 64 x 256), 64-deep K stages: the down GEMM's
// N = D = 256 is one tile wide; gate/up's 2 De = 2560 is ten.
using Gemm = GroupedGemm<>;
// The padded h tile (34 KB) must still leave room for 4 mainloop stages.
static_assert(Gemm::Mainloop::DispatchPolicy::Stages == 4,
              "grouped GEMM: fewer than 4 mainloop stages");

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

// One thread per group g: its rows [offsets[g], offsets[g+1]) sit at local row offsets[g] -
// chunk_row0 of the chunk buffers, where the chunk holds heads [c*hpc, (c+1)*hpc) and every head
// owns exactly rows_per_head sorted rows. Empty groups get M = 0; the scheduler gives them no
// tiles.
__global__ void setup_kernel(GroupArrays g, const int* offsets, int G, int E, int hpc,
                             int64_t rows_per_head, int D, int De, const bf16* a_buf,
                             const bf16* h_buf, const bf16* wgu, const bf16* wd) {
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
__global__ void gather_kernel(const bf16* x, const int* sorted_slot, int64_t r0, int64_t n, int H,
                              int K, int D, bf16* a) {
  const int per = D / 8;
  const int64_t total = n * per;
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < total;
       j += int64_t{gridDim.x} * blockDim.x) {
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

}  // namespace

bool grouped_gemm_built() { return true; }

void grouped_run_sm90(Device& dev, const GroupedRun& r) {
  const int G = r.H * r.E;
  const int64_t rows_per_head = r.T * r.K;
  cudaStream_t st = dev.stream();
  // Optional per-stage timing (benchmarks): events between the stages, summed over the chunks.
  cudaEvent_t ev[4] = {};
  if (r.stage_ms) {
    for (auto& e : ev) AVDIT_CUDA_CHECK(cudaEventCreate(&e));
    for (int i = 0; i < 3; ++i) r.stage_ms[i] = 0.f;
  }
  auto mark = [&](int i) {
    if (r.stage_ms) AVDIT_CUDA_CHECK(cudaEventRecord(ev[i], st));
  };
  auto accumulate = [&] {
    if (!r.stage_ms) return;
    AVDIT_CUDA_CHECK(cudaEventSynchronize(ev[3]));
    for (int i = 0; i < 3; ++i) {
      float ms = 0.f;
      AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
      r.stage_ms[i] += ms;
    }
  };
  auto release = [&] {
    if (r.stage_ms)
      for (auto& e : ev) cudaEventDestroy(e);
  };
  if (fused_experts_supported(r.D, r.De)) {
    // The fused experts kernel gathers its rows from x itself: every head in one launch, no
    // scratch.
    FusedRun f{};
    f.x = r.x;
    f.T = r.T;
    f.H = r.H;
    f.K = r.K;
    f.a_rows = int64_t(r.H) * rows_per_head;
    f.wgu = r.wgu;
    f.wd = r.wd;
    f.G = G;
    f.offsets = r.offsets;
    f.groups = G;
    f.g0 = 0;
    f.D = r.D;
    f.De = r.De;
    f.sorted_slot = r.sorted_slot;
    f.slot_weight = r.slot_weight;
    f.rows = r.rows;
    mark(0);
    mark(1);  // no gather kernel: its stage reads 0
    fused_experts_sm90(dev, f);
    mark(2);  // the down GEMM's share is inside the fused kernel: its stage reads 0
    mark(3);
    accumulate();
    release();
    return;
  }
  // The fallback: gather, then the two grouped GEMMs; the per-group argument arrays of both in one
  // allocation.
  GroupArrays ga{};
  const int64_t bytes =
      2 * (int64_t(sizeof(Shape3)) * G + 256) + 4 * (int64_t(sizeof(void*)) * G + 256) +
      2 * (int64_t(sizeof(StrideA)) * G + 256) + 2 * (int64_t(sizeof(StrideB)) * G + 256) +
      2 * (int64_t(sizeof(int)) * G + 256) + 256;
  Tensor arena = cuda_empty(dev, {bytes}, DType::U8);
  char* p = static_cast<char*>(device_ptr(arena));
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
  setup_kernel<<<(G + 255) / 256, 256, 0, st>>>(ga, r.offsets, G, r.E, r.heads_per_chunk,
                                                rows_per_head, r.D, r.De, r.a_buf, r.h_buf, r.wgu,
                                                r.wd);
  AVDIT_CUDA_CHECK_LAUNCH();
  Tensor workspace;
  for (int h0 = 0; h0 < r.H; h0 += r.heads_per_chunk) {
    const int h1 = std::min(r.H, h0 + r.heads_per_chunk);
    const int g0 = h0 * r.E, groups = (h1 - h0) * r.E;
    const int64_t row0 = h0 * rows_per_head, nrows = (h1 - h0) * rows_per_head;
    mark(0);
    gather_kernel<<<grid_for(nrows * (r.D / 8)), kThreads, 0, st>>>(r.x, r.sorted_slot, row0, nrows,
                                                                    r.H, r.K, r.D, r.a_buf);
    AVDIT_CUDA_CHECK_LAUNCH();
    mark(1);
    MoeEpilogueArgs e1{};
    e1.out = r.h_buf;
    e1.row_base = ga.base1 + g0;
    e1.ldo = r.De;
    e1.swiglu = 1;
    Gemm::run(dev, groups, ga.shape1 + g0, ga.a1 + g0, ga.sa1 + g0, ga.b1 + g0, ga.sb1 + g0, e1,
              workspace);
    mark(2);
    MoeEpilogueArgs e2{};
    e2.out = r.rows;
    e2.row_base = ga.base2 + g0;
    e2.ldo = r.D;
    e2.swiglu = 0;
    e2.sorted_slot = r.sorted_slot;
    e2.slot_weight = r.slot_weight;
    Gemm::run(dev, groups, ga.shape2 + g0, ga.a2 + g0, ga.sa2 + g0, ga.b2 + g0, ga.sb2 + g0, e2,
              workspace);
    mark(3);
    accumulate();
  }
  release();
}

#else  // no CUTLASS headers in this build

bool grouped_gemm_built() { return false; }

void grouped_run_sm90(Device&, const GroupedRun&) {
  throw BadInput("moe grouped experts: this build has no CUTLASS headers (third_party/cutlass)");
}

#endif

}  // namespace avdit::cuda::moe
