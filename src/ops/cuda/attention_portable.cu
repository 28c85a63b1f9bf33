// Portable softmax attention (sm_75 and up): one warp per (head, query) with an online softmax in
// fp32, GQA, cu_seqlens segments (causal within each or not), sinks as an extra denominator term
// and MAGI-2's per-head sigmoid output gate. Correctness first: it is the fallback and the
// oracle's twin for the cuDNN path. ops::attention runs it for F32 and wherever cuDNN does not take
// the shape.
#include <cmath>

#include "ops/cuda/attention_portable.h"
#include "ops/cuda/common.cuh"

namespace avdit::cuda {
namespace {

constexpr int kMaxHeadDim = static_cast<int>(kPortableMaxHeadDim);
constexpr int kPerLane = kMaxHeadDim / 32;  // head dims held by each lane (d = lane + 32 j)
constexpr int kWarpsPerBlock = 4;

struct AttnArgs {
  const void *q, *k, *v, *sinks, *gate;
  Elt qt, kt, vt, sinkt, gatet, yt;
  const int* cu;  // nullptr: one segment
  int64_t n_cu;   // entries of cu (segments + 1)
  int64_t S, Hq, Hkv, D;
  float scale;
  bool causal;  // query s sees the keys of its segment up to s
  void* y;
};

__global__ void __launch_bounds__(kWarpsPerBlock * 32) attention_kernel(AttnArgs a) {
  const int64_t item = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  if (item >= a.S * a.Hq) return;  // whole warps leave together: item is uniform in a warp
  const int lane = threadIdx.x % 32;
  // Consecutive warps take consecutive queries of one head, so they share K/V rows in L1/L2.
  const int64_t h = item / a.S, s = item % a.S;
  const int64_t kh = h / (a.Hq / a.Hkv);
  int64_t begin = 0, end = a.S;
  if (a.cu) {  // the segment [cu[i], cu[i+1]) holding s: binary search on the boundaries
    int64_t lo = 0, hi = a.n_cu - 1;
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (a.cu[mid] <= s) lo = mid; else hi = mid;
    }
    begin = a.cu[lo];
    end = a.cu[hi];
  }
  if (a.causal) end = s + 1;
  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    qr[j] = d < a.D ? load_elt(a.q, a.qt, (s * a.Hq + h) * a.D + d) : 0.f;
    acc[j] = 0.f;
  }
  // The sink starts the running max and contributes exp(sink - m) to the denominator only.
  float m = -INFINITY, l = 0.f;
  if (a.sinks) {
    m = load_elt(a.sinks, a.sinkt, h);
    l = 1.f;
  }
  for (int64_t key = begin; key < end; ++key) {
    const int64_t kbase = (key * a.Hkv + kh) * a.D;
    float dot = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < a.D) dot += qr[j] * load_elt(a.k, a.kt, kbase + d);
    }
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);  // same sum in all lanes
    const float score = dot * a.scale;
    const float m_new = fmaxf(m, score);
    const float corr = expf(m - m_new);  // 0 on the first key without a sink (m = -inf)
    const float p = expf(score - m_new);
    l = l * corr + p;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < a.D) acc[j] = acc[j] * corr + p * load_elt(a.v, a.vt, kbase + d);
    }
    m = m_new;
  }
  float g = 1.f / l;
  if (a.gate) g *= sigmoid_f(load_elt(a.gate, a.gatet, s * a.Hq + h));
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    if (d < a.D) store_elt(a.y, a.yt, (s * a.Hq + h) * a.D + d, acc[j] * g);
  }
}

}  // namespace

void portable_attention(Device& dev, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                        const Tensor& cu_seqlens, const Tensor* sinks, const Tensor* gate, Tensor& y,
                        bool causal) {
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = k.size(1);
  AVDIT_REQUIRE(D <= kMaxHeadDim, "attention: head dim {} above the portable kernel's {}", D, kMaxHeadDim);
  AttnArgs a{};
  a.q = q.raw();
  a.k = k.raw();
  a.v = v.raw();
  a.qt = elt_of(q, "attention q");
  a.kt = elt_of(k, "attention k");
  a.vt = elt_of(v, "attention v");
  a.S = S;
  a.Hq = Hq;
  a.Hkv = Hkv;
  a.D = D;
  a.scale = scale;
  a.causal = causal;
  if (cu_seqlens.defined()) {
    require_i32(cu_seqlens, "attention cu_seqlens");
    // Contents (0 first, S last, non-decreasing) are the caller's contract: checking them here
    // would cost a synchronisation per call.
    AVDIT_REQUIRE(cu_seqlens.numel() >= 2, "attention: cu_seqlens needs at least 2 entries");
    a.cu = cu_seqlens.data<int32_t>();
    a.n_cu = cu_seqlens.numel();
  }
  if (sinks) {
    require_cuda(*sinks, "attention sinks");
    AVDIT_REQUIRE(sinks->numel() == Hq, "attention: sinks {} for {} heads", sinks->shape_str(), Hq);
    a.sinks = sinks->raw();
    a.sinkt = elt_of(*sinks, "attention sinks");
  }
  if (gate) {
    require_cuda(*gate, "attention gate");
    AVDIT_REQUIRE(gate->numel() == S * Hq, "attention: gate {} for {} tokens x {} heads", gate->shape_str(), S, Hq);
    a.gate = gate->raw();
    a.gatet = elt_of(*gate, "attention gate");
  }
  AVDIT_CHECK(y.numel() == S * Hq * D, "attention: output {} for q {}", y.shape_str(), q.shape_str());
  a.y = device_ptr(y);
  a.yt = elt_of(y, "attention output");
  const int64_t warps = S * Hq;
  if (warps == 0) return;
  const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  AVDIT_REQUIRE(blocks <= 0x7fffffff, "attention: {} queries x heads exceed one launch", warps);
  attention_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, dev.stream()>>>(a);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda
