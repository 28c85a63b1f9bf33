// The staged instance of the grouped expert GEMMs (grouped_gemm_sm90.h): cooperative 128 x 256 tiles
// as in grouped_sm90.cu, but the gate/up epilogue stages the bf16 h tile in shared memory (32 KB,
// carved out of the mainloop's stages) and writes it with 16-byte row stores (MoeEpilogueT<true>).
// Its own translation unit to compile in parallel with grouped_sm90.cu.
#if AVDIT_HAVE_CUTLASS
#include "ops/cuda/moe/grouped_gemm_sm90.h"

namespace avdit::cuda::moe::grouped_detail {

AVDIT_GROUPED_GEMM_RUN(run_gemm_staged) {
  GroupedGemm<Tile128x256, CooperativeSchedule, true>::run(dev, groups, shapes, a, sa, b, sb, epi, workspace);
}

}  // namespace avdit::cuda::moe::grouped_detail
#endif
