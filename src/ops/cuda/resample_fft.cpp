// ops::resample_fft on the device: not written yet. The op refuses by name so a CUDA build links
// and a GPU run of the audio decoders says what to do instead of failing inside.
#include "ops/resample_fft.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void resample_fft(CudaContext& c, const Tensor& x, Tensor& y) {
  (void)c, (void)x, (void)y;
  AVDIT_REQUIRE(false, "resample_fft is not implemented on CUDA yet (decode with --device cpu)");
}

}  // namespace avdit::ops::cuda
