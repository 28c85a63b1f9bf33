// Kernel 3 of the grouped expert GEMMs (grouped_gemm_sm90.h): kernel 2 (h staged, fast swiglu7) on
// CUTLASS's ping-pong schedule. Each consumer warp group owns a whole 64 x 256 tile; the two take turns
// on the tensor cores, so one group's epilogue (swiglu7 of 8k accumulator pairs, the h stores) runs
// while the other's MMAs do. The cooperative kernels stop the MMAs for every epilogue.
#if AVDIT_HAVE_CUTLASS
#include "ops/cuda/moe/grouped_gemm_sm90.h"

namespace avdit::cuda::moe::grouped_detail {

AVDIT_GROUPED_GEMM_RUN(run_gemm_pingpong) {
  using Gemm = GroupedGemm<Tile64x256, PingpongSchedule, true, kSwigluFast>;
  Gemm::run(dev, groups, shapes, a, sa, b, sb, epi, workspace);
}

}  // namespace avdit::cuda::moe::grouped_detail
#endif
