// Attention by GEMMs (see attention_gemm.h): cuBLASLt for both products, one block per row for the
// softmax (max, then the sum of exponentials, then the normalised row, all fp32).
#include "ops/cuda/attention_gemm.h"

#include <cmath>

#include "ops/cuda/block_sum.cuh"
#include "ops/cuda/common.cuh"
#include "ops/linear.h"
#include "ops/rows.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::block_reduce;
using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::store_elt;

constexpr int kSoftmaxThreads = 256;

// p[r, :] = softmax(scale * s[r, :]) of the fp32 scores s [rows, n], stored in p's dtype.
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_kernel(const float* __restrict__ s, int64_t n, float scale, void* p, Elt pt) {
  __shared__ float scratch[kSoftmaxThreads / 32];
  const float* row = s + blockIdx.x * n;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += kSoftmaxThreads) m = fmaxf(m, row[i]);
  m = block_reduce<kSoftmaxThreads>(m, scratch, [](float x, float y) { return fmaxf(x, y); });
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += kSoftmaxThreads) sum += expf(scale * (row[i] - m));
  sum = block_reduce<kSoftmaxThreads>(sum, scratch, [](float x, float y) { return x + y; });
  const float inv = 1.f / sum;
  for (int64_t i = threadIdx.x; i < n; i += kSoftmaxThreads)
    store_elt(p, pt, blockIdx.x * n + i, expf(scale * (row[i] - m)) * inv);
}

}  // namespace

void gemm_attention(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                    const std::vector<int64_t>& cu, Tensor& out) {
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = k.size(1);
  AVDIT_CHECK(!cu.empty() && cu.front() == 0 && cu.back() == S,
              "gemm_attention: cu_seqlens {} .. {} for {} rows", cu.empty() ? 0 : cu.front(),
              cu.empty() ? 0 : cu.back(), S);
  // [S, H * D] views; one head's columns copied out when there are several heads.
  const Tensor q2 = q.reshape({S, Hq * D}), k2 = k.reshape({S, Hkv * D}),
               v2 = v.reshape({S, Hkv * D});
  Tensor o2 = out.reshape({S, Hq * D});
  auto head = [&](const Tensor& t, int64_t h, int64_t heads) {
    return heads == 1 ? t : ops::take_columns(c, t, h * D, (h + 1) * D);
  };
  for (int64_t h = 0; h < Hq; ++h) {
    const int64_t hk = h / (Hq / Hkv);
    const Tensor qh = head(q2, h, Hq), kh = head(k2, hk, Hkv), vh = head(v2, hk, Hkv);
    Tensor oh = Hq == 1 ? o2 : c.empty({S, D}, out.dtype());
    for (size_t d = 0; d + 1 < cu.size(); ++d) {
      const int64_t r0 = cu[d], n = cu[d + 1] - cu[d];
      if (n == 0) continue;
      const Tensor qs = qh.slice_rows(r0, r0 + n), ks = kh.slice_rows(r0, r0 + n),
                   vs = vh.slice_rows(r0, r0 + n);
      Tensor scores = c.empty({n, n}, DType::F32);
      linear(c, qs, ks, nullptr, nullptr, scores);  // q k^T in fp32
      Tensor p = c.empty({n, n}, v.dtype());
      softmax_rows_kernel<<<static_cast<unsigned>(n), kSoftmaxThreads, 0, c.stream()>>>(
          static_cast<const float*>(scores.raw()), n, scale, device_ptr(p),
          elt_of(p, "gemm_attention p"));
      AVDIT_CUDA_CHECK_LAUNCH();
      Tensor os = oh.slice_rows(r0, r0 + n);
      matmul(c, p, vs, os);
    }
    if (Hq > 1) ops::copy_columns(c, oh, 0, o2, h * D, D);
  }
}

}  // namespace avdit::ops::cuda
