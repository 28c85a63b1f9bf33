// The ping-pong instance of the grouped expert GEMMs (grouped_gemm_sm90.h): 64 x 256 tiles, the two
// consumer warp groups on different tiles, so that one's epilogue (the swiglu7 of gate/up, 64 values
// per thread per tile) overlaps the other's wgmma. Its own translation unit to compile in parallel
// with the cooperative instance in grouped_sm90.cu.
#if AVDIT_HAVE_CUTLASS
#include "backend/cuda/moe/grouped_gemm_sm90.h"

namespace avdit::cuda::moe::grouped_detail {

using PingPong = GroupedGemm<cute::Shape<cute::_64, cute::_256, cute::_64>,
                             cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>;

void run_gemm_pingpong(Device& dev, int groups, Shape3* shapes, const ElementAB** a, StrideA* sa, const ElementAB** b,
                       StrideB* sb, const MoeEpilogue::Arguments& epi, Tensor& workspace) {
  PingPong::run(dev, groups, shapes, a, sa, b, sb, epi, workspace);
}

}  // namespace avdit::cuda::moe::grouped_detail
#endif
