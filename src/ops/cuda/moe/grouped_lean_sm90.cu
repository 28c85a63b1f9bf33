// Kernel 5 of the grouped expert GEMMs (grouped_gemm_sm90.h): kernel 2 (cooperative 128 x 256 tiles, staged
// h) with the lean swiglu7 (swiglu7_lean_f): the gate/up epilogue issues ~25% fewer instructions.
#if AVDIT_HAVE_CUTLASS
#include "ops/cuda/moe/grouped_gemm_sm90.h"

namespace avdit::cuda::moe::grouped_detail {

AVDIT_GROUPED_GEMM_RUN(run_gemm_lean) {
  using Gemm = GroupedGemm<Tile128x256, CooperativeSchedule, true, kSwigluLean>;
  Gemm::run(dev, groups, shapes, a, sa, b, sb, epi, workspace);
}

}  // namespace avdit::cuda::moe::grouped_detail
#endif
