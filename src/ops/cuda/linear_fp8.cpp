// The FP8 linear on the device: not written yet (ops/linear_fp8.h); the op says so, naming the way
// that works.
#include "ops/linear_fp8.h"
#include "backend/cuda/context.h"

namespace avdit::ops::cuda {

void linear_fp8(CudaContext&, const Tensor&, const Fp8Weight&, Tensor&) {
  throw BadInput(
      "FP8 GEMMs (--fp8-gemm) run on the CPU only so far (--device cpu): the e4m3 emulation that "
      "measures their quality; the cuBLASLt FP8 path is not written yet");
}

}  // namespace avdit::ops::cuda
