// Kernel 4 of the grouped expert GEMMs (grouped_gemm_sm90.h): kernel 3's ping-pong schedule with
// 128 x 128 tiles per warp group: 128 KB of operands per 8.4 MFLOP tile (K = 256) against 160 KB for
// 64 x 256, at the price of twice as many N tiles over the gate/up width.
#if AVDIT_HAVE_CUTLASS
#include "ops/cuda/moe/grouped_gemm_sm90.h"

namespace avdit::cuda::moe::grouped_detail {

AVDIT_GROUPED_GEMM_RUN(run_gemm_pingpong128) {
  using Gemm = GroupedGemm<Tile128x128, PingpongSchedule, true, kSwigluFast>;
  Gemm::run(dev, groups, shapes, a, sa, b, sb, epi, workspace);
}

}  // namespace avdit::cuda::moe::grouped_detail
#endif
