// Kernel 2 of the grouped expert GEMMs (grouped_gemm_sm90.h): kernel 1 (cooperative 128 x 256 tiles, h
// staged through shared memory) with the fast swiglu7 (MUFU exp and reciprocal, swiglu7_fast_f).
#if AVDIT_HAVE_CUTLASS
#include "ops/cuda/moe/grouped_gemm_sm90.h"

namespace avdit::cuda::moe::grouped_detail {

AVDIT_GROUPED_GEMM_RUN(run_gemm_fast) {
  using Gemm = GroupedGemm<Tile128x256, CooperativeSchedule, true, kSwigluFast>;
  Gemm::run(dev, groups, shapes, a, sa, b, sb, epi, workspace);
}

}  // namespace avdit::cuda::moe::grouped_detail
#endif
