// Deterministic synthetic tensors made on the GPU (benchmarks: the MoE layer's 6 GB of expert
// weights per layer would take minutes to make on the host). Values: a splitmix64 hash of (seed,
// index) mapped to [lo, hi), never exactly zero.
#include "ops/cuda/common.cuh"
#include "ops/cuda/moe/moe.h"

namespace avdit::cuda::moe {
namespace {

__global__ void fill_kernel(void* p, Elt t, int64_t n, float lo, float hi, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t z = (uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float v = lo + (hi - lo) * (float((z >> 40) & 0xFFFFFF) / 16777216.0f);
    if (v == 0.0f) v = (hi - lo) * 1e-3f;
    store_elt(p, t, i, v);
  }
}

}  // namespace

void fill_uniform(Device& dev, Tensor& t, float lo, float hi, uint64_t seed) {
  require_cuda(t, "fill_uniform");
  const Elt et = elt_of(t, "fill_uniform");
  if (t.numel() == 0) return;
  fill_kernel<<<grid_for(t.numel()), kThreads, 0, dev.stream()>>>(device_ptr(t), et, t.numel(), lo, hi, seed);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda::moe
