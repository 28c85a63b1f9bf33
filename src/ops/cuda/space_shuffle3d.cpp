// The video channel/space shuffles on the device are not written yet: a CUDA build links, and a
// decode on the GPU stops with a message that says how to run it instead.
#include "ops/space_shuffle3d.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void channels_to_space3d(CudaContext&, const Tensor&, const ChannelsToSpace&, Tensor&) {
  AVDIT_REQUIRE(false,
                "channels_to_space3d is not implemented on CUDA yet (decode with --device cpu)");
}

void space_to_channels_mean3d(CudaContext&, const Tensor&, const SpaceToChannelsMean&, Tensor&) {
  AVDIT_REQUIRE(false,
                "space_to_channels_mean3d is not implemented on CUDA yet (decode with --device "
                "cpu)");
}

}  // namespace avdit::ops::cuda
