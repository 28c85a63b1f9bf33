// ops::conv1d_transpose on the device: not written yet. The op refuses by name so a CUDA build
// links and a GPU run of the audio decoders says what to do instead of failing inside.
#include "ops/conv1d_transpose.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void conv1d_transpose(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Conv1dTransposeParams& p, Tensor& y) {
  (void)c, (void)x, (void)w, (void)bias, (void)p, (void)y;
  AVDIT_REQUIRE(false,
                "conv1d_transpose is not implemented on CUDA yet (decode with --device cpu)");
}

}  // namespace avdit::ops::cuda
