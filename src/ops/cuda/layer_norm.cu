// LayerNorm on the GPU: one block per row, the mean and then the centred sum of squares each
// reduced in a fixed order (warp butterflies, then one warp over the warp sums: no atomics, the
// same bits every run), the affine map in fp32, one rounding on store.
#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/layer_norm.h"

namespace avdit::cuda {
namespace {

constexpr int kLnThreads = 256;

// The sum of v over the block, the same value in every thread.
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kLnThreads / 32 ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) scratch[kLnThreads / 32] = v;
  }
  __syncthreads();
  const float total = scratch[kLnThreads / 32];
  __syncthreads();  // scratch is reused by the next reduction
  return total;
}

__global__ void __launch_bounds__(kLnThreads)
    layer_norm_kernel(const void* x, Elt xt, const void* w, Elt wt, const void* b, Elt bt,
                      float eps, void* y, Elt yt, int64_t D) {
  __shared__ float scratch[kLnThreads / 32 + 1];
  const int64_t base = blockIdx.x * D;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += load_elt(x, xt, base + i);
  const float mean = block_sum(s, scratch) / static_cast<float>(D);
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float c = load_elt(x, xt, base + i) - mean;
    ss += c * c;
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(D) + eps);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    float v = (load_elt(x, xt, base + i) - mean) * inv;
    if (w) v *= load_elt(w, wt, i);
    if (b) v += load_elt(b, bt, i);
    store_elt(y, yt, base + i, v);
  }
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void layer_norm(CudaContext& c, const Tensor& x, const Tensor* w, const Tensor* b, float eps,
                Tensor& y) {
  c.require_here(x, "layer_norm x");
  c.require_here(y, "layer_norm y");
  const int64_t D = x.size(-1), rows = D > 0 ? x.numel() / D : 0;
  AVDIT_CHECK(y.numel() == x.numel(), "layer_norm: output {} for x {}", y.shape_str(),
              x.shape_str());
  if (w) {
    c.require_here(*w, "layer_norm weight");
    AVDIT_CHECK(w->numel() == D, "layer_norm: weight {} for rows of {}", w->shape_str(), D);
  }
  if (b) {
    c.require_here(*b, "layer_norm bias");
    AVDIT_CHECK(b->numel() == D, "layer_norm: bias {} for rows of {}", b->shape_str(), D);
  }
  if (rows == 0) return;
  AVDIT_CHECK(rows < (int64_t{1} << 31), "layer_norm: {} rows exceed one grid", rows);
  layer_norm_kernel<<<static_cast<unsigned>(rows), kLnThreads, 0, c.stream()>>>(
      x.raw(), elt_of(x, "layer_norm x"), w ? w->raw() : nullptr,
      w ? elt_of(*w, "layer_norm weight") : Elt::F32, b ? b->raw() : nullptr,
      b ? elt_of(*b, "layer_norm bias") : Elt::F32, eps, device_ptr(y), elt_of(y, "layer_norm y"),
      D);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
