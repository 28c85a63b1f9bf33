// One cuDNN handle per GPU for every cuDNN op (SDPA, conv3d). A handle belongs to a CUDA context,
// not a stream, so every CudaContext of a GPU shares it: an op locks `mu`, binds its stream and
// executes. Process-wide; it holds no stream and no memory of a Device. cuDNN builds only.
#pragma once

#if AVDIT_HAVE_CUDNN
#include <cudnn.h>

#include <mutex>

namespace avdit::cuda {

struct CudnnHandle {
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
};

// The handle of GPU `ordinal`, created on first use (RuntimeFailure when cudnnCreate fails).
CudnnHandle& cudnn_handle(int ordinal);

}  // namespace avdit::cuda
#endif
