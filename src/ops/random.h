// Deterministic pseudo-normal fills for random weights made where they are used (full-width
// benchmarks and --random-weights runs without a checkpoint on disk): value i of a tensor depends
// only on (seed, i), so the CPU and the GPU make the same tensor (up to the last bit of their
// libm).
#pragma once

#include <cstdint>

#include "ops/dispatch.h"

namespace avdit::ops {

namespace cpu {
void fill_normal(Tensor& t, uint64_t seed, float mean, float std);
}
namespace cuda {
void fill_normal(CudaContext& c, Tensor& t, uint64_t seed, float mean, float std);
}

// t = mean + std * z, z from a counter hash and Box-Muller (never all zeros); t F32, BF16 or F16.
inline void fill_normal(Context& ctx, Tensor& t, uint64_t seed, float mean, float std) {
  AVDIT_OP(ctx, fill_normal, t, seed, mean, std);
}

}  // namespace avdit::ops
