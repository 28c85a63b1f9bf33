// conv3d on the device is not written yet: a CUDA build links, and a decode on the GPU stops with
// a message that says how to run it instead.
#include "ops/conv3d.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void conv3d(CudaContext&, const Tensor&, const Tensor&, const Tensor*, const Conv3dGeometry&,
            Tensor&) {
  AVDIT_REQUIRE(false, "conv3d is not implemented on CUDA yet (decode with --device cpu)");
}

}  // namespace avdit::ops::cuda
