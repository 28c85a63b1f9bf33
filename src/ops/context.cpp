// The CPU context and the checks every context shares (see context.h).
#include "ops/context.h"

#include <cstring>

#include "core/error.h"
#include "ops/dispatch.h"

namespace avdit::ops {

#if !AVDIT_HAVE_CUDA
CudaContext& Context::cuda() {
  throw RuntimeFailure(
      fmt::format("a CUDA op was asked of the {} context in a build without CUDA", name()));
}
#endif

void Context::require_here(const Tensor& t, const char* what) const {
  AVDIT_CHECK(t.defined(), "{}: the tensor is missing", what);
  AVDIT_CHECK(t.device() == kind_, "{}: a {} tensor given to the {} context", what,
              t.device() == Device::CUDA ? "cuda" : "cpu", name());
}

void require_cpu_build(const Context& ctx, const char* op) {
  if (ctx.is_cuda())
    throw RuntimeFailure(fmt::format("{}: this avdit was built without the CUDA backend", op));
}

Tensor CpuContext::empty(Shape shape, DType dtype) {
  return Tensor::empty(std::move(shape), dtype);
}
Tensor CpuContext::zeros(Shape shape, DType dtype) {
  return Tensor::zeros(std::move(shape), dtype);
}

Tensor CpuContext::upload(const Tensor& host) {
  AVDIT_CHECK(!host.defined() || host.device() == Device::CPU,
              "upload to the CPU of a cuda tensor");
  return host;
}

Tensor CpuContext::download(const Tensor& t) {
  AVDIT_CHECK(!t.defined() || t.device() == Device::CPU,
              "download on the CPU context of a cuda tensor");
  return t;
}

}  // namespace avdit::ops
