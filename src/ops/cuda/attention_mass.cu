// The attention mass on the GPU (see ops/attention_mass.h): one block per query. Pass 1 writes the
// query's float32 scores to a scratch row and reduces their maximum and the float64 sum of
// exponentials; pass 2 sums the pattern's probabilities, finds the top_k-th largest score by a
// radix select over its bits (four 8-bit digits, shared-memory histograms) and sums the
// probabilities above it plus the ties it needs. Sums in float64 in a fixed order: the same bits
// every run.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "backend/cuda/context.h"
#include "ops/attention_mass.h"
#include "ops/cuda/block_sum.cuh"
#include "ops/cuda/common.cuh"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::block_reduce;
using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::load_elt;

constexpr int kMassThreads = 256, kMaxHeadDim = 256;
constexpr int64_t kMaxBatch = 1024;  // queries per launch: scratch of kMaxBatch x keys floats

// Larger float -> larger unsigned (for the radix select).
__device__ __forceinline__ uint32_t ordered(float f) {
  const uint32_t b = __float_as_uint(f);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}

struct Args {
  const void* q;
  const void* k;
  Elt qt, kt;
  int64_t H, D, head, begin, nk;
  float scale;
  const int* rows;
  const int* top_k;
  const int* frame;
  float* scores;  // [batch, nk]
  double* topk;
  double* pattern;
};

__global__ void __launch_bounds__(kMassThreads) attention_mass_kernel(Args a, int64_t first) {
  __shared__ float qs[kMaxHeadDim];
  __shared__ float fscratch[kMassThreads / 32];
  __shared__ double dscratch[kMassThreads / 32];
  __shared__ uint32_t hist[256];
  __shared__ uint32_t sel[2];  // the digit chosen, the count still needed
  const int64_t i = first + blockIdx.x;
  const int64_t row = a.rows[i];
  for (int d = threadIdx.x; d < a.D; d += kMassThreads)
    qs[d] = load_elt(a.q, a.qt, (row * a.H + a.head) * a.D + d);
  __syncthreads();
  float* s = a.scores + blockIdx.x * a.nk;
  // Pass 1: scores, their maximum, the sum of exponentials.
  float mx = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < a.nk; j += kMassThreads) {
    const int64_t base = ((a.begin + j) * a.H + a.head) * a.D;
    float dot = 0.f;
    for (int64_t d = 0; d < a.D; ++d) dot = fmaf(qs[d], load_elt(a.k, a.kt, base + d), dot);
    const float v = a.scale * dot;
    s[j] = v;
    mx = fmaxf(mx, v);
  }
  mx = block_reduce<kMassThreads>(mx, fscratch, [](float x, float y) { return fmaxf(x, y); });
  double sum = 0;
  for (int64_t j = threadIdx.x; j < a.nk; j += kMassThreads) sum += exp(double(s[j]) - mx);
  sum = block_reduce<kMassThreads>(sum, dscratch, [](double x, double y) { return x + y; });
  const double lse = double(mx) + log(sum);
  // Pass 2: the pattern's mass.
  const int f = a.frame[row];
  double pat = 0;
  for (int64_t j = threadIdx.x; j < a.nk; j += kMassThreads) {
    const int fj = a.frame[a.begin + j];
    if (fj < 0 || fj == f) pat += exp(double(s[j]) - lse);
  }
  pat = block_reduce<kMassThreads>(pat, dscratch, [](double x, double y) { return x + y; });
  // The top_k-th largest score's bits, digit by digit from the top.
  uint32_t prefix = 0, mask = 0, need = static_cast<uint32_t>(a.top_k[i]);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kMassThreads) hist[b] = 0;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < a.nk; j += kMassThreads) {
      const uint32_t u = ordered(s[j]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t above = 0;
      int b = 255;
      for (; b > 0 && above + hist[b] < need; --b) above += hist[b];
      sel[0] = static_cast<uint32_t>(b);
      sel[1] = need - above;
    }
    __syncthreads();
    prefix |= sel[0] << shift;
    mask |= 255u << shift;
    need = sel[1];
    __syncthreads();
  }
  // prefix = the threshold's bits; `need` keys equal to it complete the top-k.
  double top = 0;
  for (int64_t j = threadIdx.x; j < a.nk; j += kMassThreads)
    if (ordered(s[j]) > prefix) top += exp(double(s[j]) - lse);
  top = block_reduce<kMassThreads>(top, dscratch, [](double x, double y) { return x + y; });
  if (threadIdx.x == 0) {
    const float t = __uint_as_float(prefix & 0x80000000u ? prefix & 0x7fffffffu : ~prefix);
    a.topk[i] = top + double(need) * exp(double(t) - lse);
    a.pattern[i] = pat;
  }
}

}  // namespace

void attention_mass(CudaContext& c, const Tensor& q, const Tensor& k, int64_t head, double scale,
                    const MassQueries& m, Tensor& topk, Tensor& pattern) {
  check_attention_mass(q, k, head, m, topk, pattern);
  for (const Tensor* t : {&q, &k, &m.rows, &m.top_k, &m.frame})
    c.require_here(*t, "attention mass operand");
  c.require_here(topk, "attention mass topk");
  c.require_here(pattern, "attention mass pattern");
  AVDIT_REQUIRE(q.size(2) <= kMaxHeadDim, "attention mass: head dim {} above the kernel's {}",
                q.size(2), kMaxHeadDim);
  const int64_t n = m.rows.numel(), nk = m.end - m.begin;
  if (n == 0) return;
  const int64_t batch = std::min(n, kMaxBatch);
  Tensor scratch = c.empty({batch, nk}, DType::F32);
  Args a{q.raw(),
         k.raw(),
         elt_of(q, "attention mass q"),
         elt_of(k, "attention mass k"),
         q.size(1),
         q.size(2),
         head,
         m.begin,
         nk,
         static_cast<float>(scale),
         static_cast<const int*>(m.rows.raw()),
         static_cast<const int*>(m.top_k.raw()),
         static_cast<const int*>(m.frame.raw()),
         static_cast<float*>(device_ptr(scratch)),
         static_cast<double*>(device_ptr(topk)),
         static_cast<double*>(device_ptr(pattern))};
  for (int64_t first = 0; first < n; first += batch) {
    const auto blocks = static_cast<unsigned>(std::min(batch, n - first));
    attention_mass_kernel<<<blocks, kMassThreads, 0, c.stream()>>>(a, first);
    AVDIT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace avdit::ops::cuda
