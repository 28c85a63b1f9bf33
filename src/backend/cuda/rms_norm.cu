// RMSNorm with the weight conventions of both DiTs: w or (1 + w), and per-modality weight rows
// chosen per token by an index. One block per row; the sum of squares reduces in a fixed tree
// order (no atomics), so results are bit-reproducible.
#include "backend/cuda/common.cuh"
#include "backend/cuda/ops_cuda.h"

namespace avdit::cuda {
namespace {

constexpr int kNormThreads = 256;

// rows_per_token: consecutive rows of x that share one token's weight row (the heads of q / k).
__global__ void rms_norm_kernel(const void* x, Elt xt, const void* w, Elt wt, int64_t w_rows, const int* group,
                                int64_t rows_per_token, bool one_plus, float eps, void* y, Elt yt, int64_t D) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * D;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = load_elt(x, xt, base + i);
    ss += v * v;
  }
  // Warp butterfly then one warp over the warp sums: a fixed order, same bits every run.
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float warp_sums[kNormThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    ss = lane < kNormThreads / 32 ? warp_sums[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) warp_sums[0] = ss;
  }
  __syncthreads();
  const float inv = rsqrtf(warp_sums[0] / static_cast<float>(D) + eps);
  int64_t wrow = 0;
  if (group) {
    wrow = group[r / rows_per_token];
    if (wrow < 0 || wrow >= w_rows) wrow = -1;  // caller bug: emit NaN rather than read out of bounds
  }
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    float g = 1.f;
    if (w) {
      g = wrow < 0 ? __int_as_float(0x7fc00000) : load_elt(w, wt, wrow * D + i);
      if (one_plus) g += 1.f;
    }
    store_elt(y, yt, base + i, load_elt(x, xt, base + i) * inv * g);
  }
}

}  // namespace

Tensor rms_norm(Device& dev, const Tensor& x, const Tensor& w, float eps, bool one_plus_weight,
                const Tensor* group, std::optional<DType> out) {
  require_cuda(x, "rms_norm");
  AVDIT_REQUIRE(x.ndim() >= 1, "rms_norm: scalar input");
  const int64_t D = x.size(-1), rows = D ? x.numel() / D : 0;
  int64_t w_rows = 0, rows_per_token = 1;
  Elt wt = Elt::F32;
  if (w.defined()) {
    require_cuda(w, "rms_norm weight");
    wt = elt_of(w, "rms_norm weight");
    AVDIT_REQUIRE(w.numel() % D == 0 && w.numel() > 0, "rms_norm: weight {} for rows of {}", w.shape_str(), D);
    w_rows = w.numel() / D;
    AVDIT_REQUIRE(w_rows == 1 || group, "rms_norm: {} weight rows but no group index", w_rows);
  }
  if (group && w_rows > 1) {
    require_i32(*group, "rms_norm group");
    const int64_t tokens = group->numel();
    AVDIT_REQUIRE(tokens > 0 && rows % tokens == 0, "rms_norm: {} rows do not split into {} tokens", rows, tokens);
    rows_per_token = rows / tokens;
  }
  Tensor y = cuda_empty(dev, x.shape(), out.value_or(x.dtype()));
  if (rows == 0) return y;
  AVDIT_REQUIRE(rows <= 0x7fffffff, "rms_norm: {} rows exceed one launch", rows);
  rms_norm_kernel<<<static_cast<unsigned>(rows), kNormThreads, 0, dev.stream()>>>(
      x.raw(), elt_of(x, "rms_norm"), w.defined() ? w.raw() : nullptr, wt, w_rows,
      group && w_rows > 1 ? group->data<int32_t>() : nullptr, rows_per_token, one_plus_weight, eps, device_ptr(y),
      elt_of(y, "rms_norm"), D);
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

}  // namespace avdit::cuda
