// Kernel 6 of the grouped expert GEMMs (grouped_gemm_sm90.h): kernel 5 (cooperative 128 x 256 tiles, lean
// swiglu7) whose gate/up epilogue hands the h rows to bulk asynchronous copies (store_bulk) instead of
// storing them with the consumer threads.
#if AVDIT_HAVE_CUTLASS
#include "ops/cuda/moe/grouped_gemm_sm90.h"

namespace avdit::cuda::moe::grouped_detail {

AVDIT_GROUPED_GEMM_RUN(run_gemm_bulk) {
  using Gemm = GroupedGemm<Tile128x256, CooperativeSchedule, true, kSwigluLean, true>;
  // The padded h tile (34 KB instead of 32) must still leave room for kernel 5's 4 mainloop stages.
  static_assert(Gemm::Mainloop::DispatchPolicy::Stages == 4, "bulk epilogue: fewer mainloop stages than kernel 5");
  Gemm::run(dev, groups, shapes, a, sa, b, sb, epi, workspace);
}

}  // namespace avdit::cuda::moe::grouped_detail
#endif
