// ops::conv1d_affine on the device: not written yet. The op refuses by name so a CUDA build links
// and a GPU run of the audio decoders says what to do instead of failing inside.
#include "ops/conv1d_affine.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void conv1d_affine(CudaContext& c, const Tensor& x, const Tensor& scale, const Tensor* shift,
                   float lo, float hi, Tensor& y) {
  (void)c, (void)x, (void)scale, (void)shift, (void)lo, (void)hi, (void)y;
  AVDIT_REQUIRE(false, "conv1d_affine is not implemented on CUDA yet (decode with --device cpu)");
}

}  // namespace avdit::ops::cuda
