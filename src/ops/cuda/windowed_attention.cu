// Windowed attention on the GPU (ops/windowed_attention.h), the exact portable kernel: one warp
// per (head, query), the query's segment found by binary search in the plan's table, its key
// ranges read in place from K/V (no mask, no gathered copy, no workspace), an online softmax in
// fp32, GQA, the optional gate rounded as the CPU reference rounds it: the path of every shape and
// GPU the tensor-core kernel (windowed_attention_tc.h: sm_90, bf16, head dim 128) does not take.
#include <cmath>

#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/windowed_attention_tc.h"
#include "ops/windowed_attention.h"

namespace avdit::cuda {
namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;  // head dims held by each lane (d = lane + 32 j)
constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float round_elt(Elt t, float v) {
  switch (t) {
    case Elt::BF16: return __bfloat162float(__float2bfloat16_rn(v));
    case Elt::F16: return __half2float(__float2half_rn(v));
    default: return v;
  }
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32) windowed_kernel(WindowArgs a) {
  const int64_t item = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  if (item >= a.S * a.Hq) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  // Consecutive warps take consecutive queries of one head: they share the segment's K/V rows.
  const int64_t h = item / a.S, s = item % a.S, kh = h / (a.Hq / a.Hkv);
  int64_t lo = 0, hi = a.n_seg;  // the last segment starting at or before s
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (a.segments[2 * mid] <= s)
      lo = mid + 1;
    else
      hi = mid;
  }
  const int64_t seg = lo - 1;
  const bool covered = seg >= 0 && s < a.segments[2 * seg + 1];
  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    qr[j] = d < a.D ? load_elt(a.q, a.qt, (s * a.Hq + h) * a.D + d) : 0.f;
    acc[j] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  if (covered) {
    for (int64_t r = a.offsets[seg]; r < a.offsets[seg + 1]; ++r) {
      const int64_t kb = a.keys[2 * r], ke = a.keys[2 * r + 1];
      for (int64_t key = kb; key < ke; ++key) {
        const int64_t base = (key * a.Hkv + kh) * a.D;
        float dot = 0.f;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j) {
          const int64_t d = lane + 32 * j;
          if (d < a.D) dot += qr[j] * load_elt(a.k, a.kt, base + d);
        }
        for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        const float score = dot * a.scale;
        const float m_new = fmaxf(m, score);
        const float corr = expf(m - m_new);  // 0 on the first key (m = -inf)
        const float p = expf(score - m_new);
        l = l * corr + p;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j) {
          const int64_t d = lane + 32 * j;
          if (d < a.D) acc[j] = acc[j] * corr + p * load_elt(a.v, a.vt, base + d);
        }
        m = m_new;
      }
    }
  }
  const float inv = covered ? 1.f / l : 0.f;
  float g = 1.f;
  if (a.gate) g = round_elt(a.yt, sigmoid_f(load_elt(a.gate, a.gatet, s * a.Hq + h)));
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    if (d >= a.D) continue;
    float o = acc[j] * inv;
    if (a.gate) o = round_elt(a.yt, o) * g;  // as the CPU: core, sigmoid and product rounded
    store_elt(a.y, a.yt, (s * a.Hq + h) * a.D + d, o);
  }
  if (a.lse && lane == 0) a.lse[s * a.Hq + h] = covered ? m + logf(l) : -INFINITY;
}

// Queries no segment covers: output 0 (set before the kernel), LSE -inf.
__global__ void fill_kernel(float* p, int64_t n, float v) {
  for (int64_t i = first_of(); i < n; i += stride_of()) p[i] = v;
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void windowed_attention(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v,
                        float scale, const WindowPlan& plan, const Tensor* gate, Tensor& out,
                        Tensor* lse) {
  c.require_here(q, "windowed attention q");
  c.require_here(k, "windowed attention k");
  c.require_here(v, "windowed attention v");
  c.require_here(out, "windowed attention output");
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2);
  AVDIT_REQUIRE(D <= kMaxHeadDim, "windowed attention: head dim {} above the kernel's {}", D,
                kMaxHeadDim);
  const int64_t n_seg = static_cast<int64_t>(plan.segments.size());
  AVDIT_REQUIRE(n_seg == 0 || plan.table.defined(),
                "windowed attention: the plan was made on the CPU; plan it on this context");
  WindowArgs a{};
  a.q = q.raw();
  a.k = k.raw();
  a.v = v.raw();
  a.qt = elt_of(q, "windowed attention q");
  a.kt = elt_of(k, "windowed attention k");
  a.vt = elt_of(v, "windowed attention v");
  a.yt = elt_of(out, "windowed attention output");
  a.S = S;
  a.Sk = k.size(0);
  a.Hq = Hq;
  a.Hkv = k.size(1);
  a.D = D;
  a.scale = scale;
  a.n_seg = n_seg;
  if (n_seg > 0) {
    require_i32(plan.table, "windowed attention plan");
    const int* t = plan.table.data<int32_t>();
    a.segments = t;
    a.offsets = t + 2 * n_seg;
    a.keys = t + 2 * n_seg + (n_seg + 1);
    a.tiles = a.keys + 2 * static_cast<int64_t>(plan.keys.size());
    a.n_tiles = plan.tiles;
  }
  if (gate) {
    c.require_here(*gate, "windowed attention gate");
    a.gate = gate->raw();
    a.gatet = elt_of(*gate, "windowed attention gate");
  }
  if (lse) {
    c.require_here(*lse, "windowed attention lse");
    a.lse = static_cast<float*>(device_ptr(*lse));
  }
  a.y = device_ptr(out);
  if (n_seg > 0 && windowed_attention_tc_takes(a, c.dev().props())) {
    int64_t covered = 0;
    for (const Range& sg : plan.segments) covered += sg.size();
    if (covered < S) {
      AVDIT_CUDA_CHECK(cudaMemsetAsync(a.y, 0, static_cast<size_t>(out.nbytes()), c.stream()));
      if (a.lse) {
        fill_kernel<<<grid_for(S * Hq), kThreads, 0, c.stream()>>>(a.lse, S * Hq, -INFINITY);
        AVDIT_CUDA_CHECK_LAUNCH();
      }
    }
    windowed_attention_tc(c.stream(), a);
    return;
  }
  const int64_t warps = S * Hq;
  if (warps == 0) return;
  const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  AVDIT_REQUIRE(blocks <= 0x7fffffff, "windowed attention: {} queries x heads exceed one launch",
                warps);
  windowed_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, c.stream()>>>(a);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
