#include "ops/cuda/cudnn_handle.h"

#if AVDIT_HAVE_CUDNN
#include <fmt/format.h>

#include <map>
#include <memory>

#include "core/error.h"

namespace avdit::cuda {

CudnnHandle& cudnn_handle(int ordinal) {
  static std::mutex registry_mu;
  static std::map<int, std::unique_ptr<CudnnHandle>> registry;
  std::lock_guard<std::mutex> lock(registry_mu);
  auto& slot = registry[ordinal];
  if (!slot) {
    auto h = std::make_unique<CudnnHandle>();
    const cudnnStatus_t st = cudnnCreate(&h->handle);
    if (st != CUDNN_STATUS_SUCCESS)
      throw RuntimeFailure(
          fmt::format("cudnnCreate failed on GPU {}: {}", ordinal, cudnnGetErrorString(st)));
    slot = std::move(h);
  }
  return *slot;
}

}  // namespace avdit::cuda
#endif
