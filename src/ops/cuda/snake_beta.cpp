// ops::snake_beta on the device: not written yet. The op refuses by name so a CUDA build links and
// a GPU run of the audio decoders says what to do instead of failing inside.
#include "ops/snake_beta.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void snake_beta(CudaContext& c, const Tensor& x, const Tensor& alpha, const Tensor& beta,
                Tensor& y) {
  (void)c, (void)x, (void)alpha, (void)beta, (void)y;
  AVDIT_REQUIRE(false, "snake_beta is not implemented on CUDA yet (decode with --device cpu)");
}

}  // namespace avdit::ops::cuda
