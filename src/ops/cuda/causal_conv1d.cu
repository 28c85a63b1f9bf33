// The causal depthwise conv1d + SiLU on the GPU (see ops/causal_conv1d.h): one thread per output
// element, channels fastest so a warp reads consecutive channels of one token; the taps are summed
// in tap order in fp32 as on the CPU. K is tiny (4), so every x element is read K times from cache.
#include "backend/cuda/context.h"
#include "ops/causal_conv1d.h"
#include "ops/cuda/common.cuh"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::Elt;
using ::avdit::cuda::load_elt;
using ::avdit::cuda::store_elt;

__global__ void causal_conv1d_silu_kernel(const void* x, Elt xt, const void* w, Elt wt, void* y,
                                          Elt yt, int64_t T, int64_t C, int64_t K) {
  const int64_t n = T * C;
  for (int64_t i = ::avdit::cuda::first_of(); i < n; i += ::avdit::cuda::stride_of()) {
    const int64_t t = i / C, c = i % C;
    float acc = 0.f;
    // Tap j reads token t - K + 1 + j; taps before the first token read the zero padding.
    for (int64_t j = 0; j < K; ++j) {
      const int64_t s = t - K + 1 + j;
      if (s >= 0) acc += load_elt(w, wt, c * K + j) * load_elt(x, xt, s * C + c);
    }
    store_elt(y, yt, i, acc / (1.f + expf(-acc)));
  }
}

}  // namespace

void causal_conv1d_silu(CudaContext& c, const Tensor& x, const Tensor& w, Tensor& y) {
  c.require_here(x, "causal_conv1d_silu x");
  c.require_here(w, "causal_conv1d_silu weight");
  c.require_here(y, "causal_conv1d_silu output");
  AVDIT_CHECK(x.ndim() == 2, "causal_conv1d_silu: x {} (expected [T, C])", x.shape_str());
  const int64_t T = x.size(0), C = x.size(1);
  const bool layout_ok =
      (w.ndim() == 2 && w.size(0) == C) || (w.ndim() == 3 && w.size(0) == C && w.size(1) == 1);
  AVDIT_CHECK(layout_ok && w.numel() % std::max<int64_t>(C, 1) == 0,
              "causal_conv1d_silu: weight {} for {} channels (expected [C, K] or [C, 1, K])",
              w.shape_str(), C);
  AVDIT_CHECK(y.numel() == T * C, "causal_conv1d_silu: output {} for x {}", y.shape_str(),
              x.shape_str());
  const int64_t K = C > 0 ? w.numel() / C : 0;
  const Elt xt = ::avdit::cuda::elt_of(x, "causal_conv1d_silu x");
  const Elt wt = ::avdit::cuda::elt_of(w, "causal_conv1d_silu weight");
  const Elt yt = ::avdit::cuda::elt_of(y, "causal_conv1d_silu output");
  if (T * C == 0) return;
  causal_conv1d_silu_kernel<<<::avdit::cuda::grid_for(T * C), ::avdit::cuda::kThreads, 0,
                              c.stream()>>>(x.raw(), xt, w.raw(), wt, ::avdit::cuda::device_ptr(y),
                                            yt, T, C, K);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
