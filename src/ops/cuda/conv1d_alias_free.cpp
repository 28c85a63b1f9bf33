// ops::conv1d_alias_free_snake on the device: not written yet. The op refuses by name so a CUDA
// build links and a GPU run of the audio decoders says what to do instead of failing inside.
#include "ops/conv1d_alias_free.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void conv1d_alias_free_snake(CudaContext& c, const Tensor& x, const Tensor& up, const Tensor& down,
                             const Tensor& alpha, const Tensor& beta, int64_t ratio, Tensor& y) {
  (void)c, (void)x, (void)up, (void)down, (void)alpha, (void)beta, (void)ratio, (void)y;
  AVDIT_REQUIRE(
      false, "conv1d_alias_free_snake is not implemented on CUDA yet (decode with --device cpu)");
}

}  // namespace avdit::ops::cuda
