// How an op reaches its implementation: ops::cpu::NAME (ops/cpu/) on the CPU context,
// ops::cuda::NAME (ops/cuda/) with the CUDA context first on the GPU. AVDIT_HAVE_CUDA is defined
// for every file of a CUDA build (CMakeLists.txt), so these inline dispatchers are the same
// everywhere.
#pragma once

#include "ops/context.h"

#if AVDIT_HAVE_CUDA
#define AVDIT_OP(ctx, fn, ...)                                         \
  ((ctx).is_cuda() ? ::avdit::ops::cuda::fn((ctx).cuda(), __VA_ARGS__) \
                   : ::avdit::ops::cpu::fn(__VA_ARGS__))
#else
#define AVDIT_OP(ctx, fn, ...) \
  (::avdit::ops::require_cpu_build(ctx, #fn), ::avdit::ops::cpu::fn(__VA_ARGS__))
#endif

namespace avdit::ops {
// RuntimeFailure when a CUDA context reaches an op in a build without the CUDA backend.
void require_cpu_build(const Context& ctx, const char* op);
}  // namespace avdit::ops
