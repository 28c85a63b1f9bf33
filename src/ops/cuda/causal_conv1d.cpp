// The causal depthwise conv1d + SiLU on a CUDA context: not written yet, so the library links with
// CUDA on and a GPU run stops with a message that says what to do instead.
#include "ops/causal_conv1d.h"
#include "backend/cuda/context.h"
#include "core/error.h"

namespace avdit::ops::cuda {

void causal_conv1d_silu(CudaContext&, const Tensor&, const Tensor&, Tensor&) {
  AVDIT_REQUIRE(false,
                "causal_conv1d_silu: the causal depthwise convolution is not implemented on CUDA "
                "yet (run the text encoder with --device cpu)");
}

}  // namespace avdit::ops::cuda
