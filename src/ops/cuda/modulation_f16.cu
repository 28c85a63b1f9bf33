// The adaLN block's fused element-wise kernels for fp16 activations (the fp16 recipe of
// MiniMax-H3): the same math and rounding points as modulation.cu's bf16 mode, rounded to fp16,
// with the residual in fp16 or fp32 (the recipe's widened residual). Plain CUDA on half and float
// only, scalar accesses, no newer instruction than sm_70 has: this is the path for GPUs without bf16.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/cuda/block_sum.cuh"
#include "ops/cuda/modulation_kernels.h"

namespace avdit::cuda {
namespace {

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ float Rh(float v) { return __half2float(__float2half_rn(v)); }
// The residual's rounding point: fp16, or none for the widened fp32 residual.
template <class TX>
__device__ __forceinline__ float Rx(float v) {
  if constexpr (std::is_same_v<TX, __half>) return Rh(v);
  else return v;
}

constexpr int kRowThreads = 256;

// x and f in TX (half, or float for the widened residual); w, tables and out in half (out may be
// float holding fp16-rounded values).
template <class TX>
__global__ void __launch_bounds__(kRowThreads) resid_norm_f16_kernel(ResidNormArgs a) {
  extern __shared__ float row[];
  __shared__ float scratch[kRowThreads / 32];
  const int64_t r = blockIdx.x, H = a.H;
  TX* x = static_cast<TX*>(a.x) + r * H;
  const bool resid = a.f != nullptr, gated = a.gate.base != nullptr;
  const __half* g = gated ? static_cast<const __half*>(a.gate.base) + a.row[r] * a.gate.stride : nullptr;
  const TX* f = resid ? static_cast<const TX*>(a.f) + r * H : nullptr;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < H; c += kRowThreads) {
    float v = ld(x, c);
    if (resid) {
      float gf = ld(f, c);
      if (gated) {
        const float gv = ld(g, c);
        gf = a.zero_gate_guard && gv == 0.f ? 0.f : Rx<TX>(gv * gf);
      }
      v = Rx<TX>(v + gf);
      st(x, c, v);
    }
    row[c] = v;
    ss += v * v;
  }
  if (a.out == nullptr) return;
  const float inv = rsqrtf(block_sum<kRowThreads>(ss, scratch) / static_cast<float>(H) + a.eps);
  const __half* w = static_cast<const __half*>(a.w);
  const bool mod = a.shift.base != nullptr;
  const int64_t t = mod ? a.row2[r] : 0;
  const __half* sh = mod ? static_cast<const __half*>(a.shift.base) + t * a.shift.stride : nullptr;
  const __half* sc = mod ? static_cast<const __half*>(a.scale.base) + t * a.scale.stride : nullptr;
  for (int64_t c = threadIdx.x; c < H; c += kRowThreads) {
    float h = Rh(row[c] * inv * ld(w, c));
    if (mod) h = Rh(Rh(h * Rh(1.0f + ld(sc, c))) + ld(sh, c));
    if (a.out_f32) st(static_cast<float*>(a.out), r * H + c, h);
    else st(static_cast<__half*>(a.out), r * H + c, h);
  }
}

constexpr int kHeadDim = 128;
constexpr int kQkWarps = 4;

// As modulation.cu's qk_kernel, on fp16 storage: one warp per (row, head), 4 dims per lane.
__global__ void __launch_bounds__(kQkWarps * 32)
    qk_f16_kernel(const __half* qkv, const __half* qn, const __half* kn, float eps, const float* cos, const float* sin,
                  int64_t half, bool rope, __half* q, __half* k, __half* v_out, int64_t S, int64_t heads) {
  __shared__ float buf[kQkWarps][kHeadDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t item = blockIdx.x * int64_t{kQkWarps} + warp;
  if (item >= S * heads) return;
  const int64_t s = item / heads;
  const __half* g = qkv + item * 3 * kHeadDim;
  __half* outs[2] = {q + item * kHeadDim, k + item * kHeadDim};
  const __half* norms[2] = {qn, kn};
  for (int which = 0; which < 2; ++which) {
    float v[4];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = ld(g + which * kHeadDim, lane * 4 + j);
      ss += v[j] * v[j];
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = rsqrtf(ss / kHeadDim + eps);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = Rh(v[j] * inv * ld(norms[which], lane * 4 + j));
      buf[warp][lane * 4 + j] = v[j];
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t d = lane * 4 + j;
      float o = v[j];
      if (rope && d < 2 * half) {
        const int64_t p = d < half ? d : d - half;
        const float c = cos[s * half + p], sn = sin[s * half + p];
        o = Rh(d < half ? v[j] * c - buf[warp][d + half] * sn : v[j] * c + buf[warp][d - half] * sn);
      }
      st(outs[which], d, o);
    }
    __syncwarp();
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) v_out[item * kHeadDim + lane * 4 + j] = g[2 * kHeadDim + lane * 4 + j];
}

// out = R(Rh(silu(g)) * up): the product rounded to fp16, or kept in fp32 (the recipe's gating fix).
template <class TO>
__global__ void swiglu_f16_kernel(const __half* u_, TO* out_, int64_t F) {
  const int64_t r = blockIdx.y;
  const __half* u = u_ + r * 2 * F;
  TO* out = out_ + r * F;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < F; c += int64_t{gridDim.x} * blockDim.x) {
    const float gv = ld(u, c), up = ld(u, F + c);
    st(out, c, Rh(gv / (1.0f + expf(-gv))) * up);
  }
}

}  // namespace

void resid_norm_modulate_f16(cudaStream_t st, bool x_f32, const ResidNormArgs& a) {
  if (a.S == 0) return;
  const size_t smem = static_cast<size_t>(a.H) * sizeof(float);
  if (x_f32) {
    if (smem > 48 * 1024)
      cudaFuncSetAttribute(resid_norm_f16_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem));
    resid_norm_f16_kernel<float><<<static_cast<unsigned>(a.S), kRowThreads, smem, st>>>(a);
  } else {
    if (smem > 48 * 1024)
      cudaFuncSetAttribute(resid_norm_f16_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem));
    resid_norm_f16_kernel<__half><<<static_cast<unsigned>(a.S), kRowThreads, smem, st>>>(a);
  }
}

void qk_norm_rope_f16(cudaStream_t st, const void* qkv, const void* q_norm, const void* k_norm, float eps,
                      const float* cos, const float* sin, int64_t half, bool rope, void* q, void* k, void* v,
                      int64_t S, int64_t heads) {
  const int64_t items = S * heads;
  if (items == 0) return;
  const auto blocks = static_cast<unsigned>((items + kQkWarps - 1) / kQkWarps);
  qk_f16_kernel<<<blocks, kQkWarps * 32, 0, st>>>(
      static_cast<const __half*>(qkv), static_cast<const __half*>(q_norm), static_cast<const __half*>(k_norm), eps,
      cos, sin, half, rope, static_cast<__half*>(q), static_cast<__half*>(k), static_cast<__half*>(v), S, heads);
}

void swiglu_f16(cudaStream_t st, const void* u, void* out, bool out_f32, int64_t S, int64_t F) {
  if (S == 0 || F == 0) return;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((F + 255) / 256, 1024)), static_cast<unsigned>(S));
  if (out_f32) swiglu_f16_kernel<float><<<grid, 256, 0, st>>>(static_cast<const __half*>(u), static_cast<float*>(out), F);
  else swiglu_f16_kernel<__half><<<grid, 256, 0, st>>>(static_cast<const __half*>(u), static_cast<__half*>(out), F);
}

}  // namespace avdit::cuda
