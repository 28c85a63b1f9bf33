// What the Hopper attention studies in dev/cuda share: CHECK (every one of them), and for
// attention_fa3.cu the mbarrier and TMA pieces on shared-memory addresses, the driver's tensor-map
// encoder, the pooled random inputs and the float64 reference of one output row. The library's own
// versions (src/ops/cuda/sm90/mbarrier.cuh) report through the library's errors, which these
// self-contained programs do not link.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

namespace study {

__device__ __forceinline__ void bar_init(unsigned b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(count));
}
// The spin is inside the PTX: a C++ loop around try_wait makes ptxas serialise the wgmmas.
__device__ __forceinline__ void bar_wait(unsigned b, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra "
      "WAIT;\n}\n" ::"r"(b),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bar_arrive_if(unsigned b, bool pred) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %1, 0;\n @p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(b),
      "r"(unsigned(pred))
      : "memory");
}
__device__ __forceinline__ void bar_expect(unsigned b, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_load_3d(unsigned dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
      "%4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// A 3-d tensor map {inner, mid, outer} of `type`, boxes {box[0..2]}, 128-byte swizzle; exits on failure.
inline CUtensorMap map_3d(CUtensorMapDataType type, const void* ptr, const cuuint64_t (&dims)[3],
                          const cuuint64_t (&strides)[2], const cuuint32_t (&box)[3]) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || !f) {
    std::fprintf(stderr, "no cuTensorMapEncodeTiled\n");
    std::exit(1);
  }
  CUtensorMap m;
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f)(
      &m, type, 3, const_cast<void*>(ptr), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d)\n", int(r));
    std::exit(1);
  }
  return m;
}

// Standard normal bf16 values from a pool of 2^20 draws picked by a hashed index: 600M mt19937
// draws at 64k x 24 heads took ~15 s a run; the timing does not care, and the check reads the same
// host copies.
struct PooledNormal {
  std::vector<__nv_bfloat16> pool = std::vector<__nv_bfloat16>(1 << 20);
  uint64_t hs = 0x9e3779b97f4a7c15ull;
  explicit PooledNormal(std::mt19937& rng) {
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& x : pool) x = __float2bfloat16(nd(rng));
  }
  void fill(std::vector<__nv_bfloat16>& v) {
    for (auto& x : v) {
      hs ^= hs << 13, hs ^= hs >> 7, hs ^= hs << 17;
      x = pool[hs >> 44];
    }
  }
};

// Output row r of head h in float64 over the bf16 inputs ([S, H or Hkv, 128]): softmax over the
// keys and, when `sink` is given, the sink logit in the denominator; times sigmoid(gate) when given.
inline void reference_row(const std::vector<__nv_bfloat16>& q, const std::vector<__nv_bfloat16>& k,
                          const std::vector<__nv_bfloat16>& v, int64_t S, int64_t H, int64_t Hkv, int64_t r,
                          int64_t h, double scale, const float* sink, const __nv_bfloat16* gate,
                          double (&out)[128]) {
  constexpr int kD = 128;
  const int64_t kh = h / (H / Hkv);
  std::vector<double> w(S);
  double mx = sink ? double(*sink) : -1e300;
  for (int64_t j = 0; j < S; ++j) {
    double dot = 0;
    for (int d = 0; d < kD; ++d)
      dot += double(__bfloat162float(q[(r * H + h) * kD + d])) * __bfloat162float(k[(j * Hkv + kh) * kD + d]);
    w[j] = dot * scale;
    mx = std::max(mx, w[j]);
  }
  double den = sink ? std::exp(double(*sink) - mx) : 0.0;
  for (double& x : w) den += (x = std::exp(x - mx));
  const double g = gate ? 1.0 / (1.0 + std::exp(-double(__bfloat162float(*gate)))) : 1.0;
  for (int d = 0; d < kD; ++d) {
    double acc = 0;
    for (int64_t j = 0; j < S; ++j) acc += w[j] * __bfloat162float(v[(j * Hkv + kh) * kD + d]);
    out[d] = acc * g / den;
  }
}

}  // namespace study
