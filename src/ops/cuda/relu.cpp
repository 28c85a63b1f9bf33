// relu on the device is not written yet: a CUDA build links, and a decode on the GPU stops with a
// message that says how to run it instead.
#include "ops/relu.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void relu(CudaContext&, const Tensor&, Tensor&) {
  AVDIT_REQUIRE(false, "relu is not implemented on CUDA yet (decode with --device cpu)");
}

}  // namespace avdit::ops::cuda
