// The adaLN block's element-wise work, fused so that each activation is read and written once per
// step (bench/notes/h3_forward.md has the predicted and measured savings):
// gated residual + RMSNorm + adaLN modulation in one row pass, per-head QK-norm + RoPE + the
// q/k/v split in one pass over the qkv GEMM output, SwiGLU in one pass. fp32 math throughout;
// the bf16 mode rounds where the CPU reference (ops/cpu/modulation.cpp) rounds, in registers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/context.h"
#include "ops/cuda/block_sum.cuh"
#include "ops/cuda/modulation_kernels.h"
#include "ops/modulation.h"
#include "ops/random.h"

namespace avdit::cuda {
namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const bf16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(bf16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// The bf16 mode's rounding point (identity in the fp32 mode).
template <bool BF>
__device__ __forceinline__ float R(float v) {
  if constexpr (BF) return __bfloat162float(__float2bfloat16_rn(v));
  else return v;
}

// 8 bf16 (16 bytes) at once: the bf16 mode's element-wise kernels are memory-bound, and 2-byte
// scalar accesses leave most of each transaction's width unused. p must be 16-byte aligned.
__device__ __forceinline__ void ld8(const bf16* p, float* o) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    o[2 * i] = f.x;
    o[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void st8(bf16* p, const float* v) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}
// 4 elements at once (qk kernel: a lane's 4 dims): 8 bytes of bf16 or 16 of fp32.
__device__ __forceinline__ void ld4(const bf16* p, float* o) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
  const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  o[0] = a.x, o[1] = a.y, o[2] = b.x, o[3] = b.y;
}
__device__ __forceinline__ void ld4(const float* p, float* o) {
  const float4 f = *reinterpret_cast<const float4*>(p);
  o[0] = f.x, o[1] = f.y, o[2] = f.z, o[3] = f.w;
}
__device__ __forceinline__ void st4(bf16* p, const float* v) {
  uint2 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
  h[0] = __floats2bfloat162_rn(v[0], v[1]);
  h[1] = __floats2bfloat162_rn(v[2], v[3]);
  *reinterpret_cast<uint2*>(p) = u;
}
__device__ __forceinline__ void st4(float* p, const float* v) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}

constexpr int kRowThreads = 256;

template <bool BF>
__global__ void __launch_bounds__(kRowThreads) resid_norm_kernel(ResidNormArgs a) {
  using T = std::conditional_t<BF, bf16, float>;
  extern __shared__ float row[];  // the updated residual row, read again by the norm
  __shared__ float scratch[kRowThreads / 32];
  const int64_t r = blockIdx.x, H = a.H;
  T* x = static_cast<T*>(a.x) + r * H;
  const bool resid = a.f != nullptr, gated = a.gate.base != nullptr;
  const T* g = gated ? static_cast<const T*>(a.gate.base) + a.row[r] * a.gate.stride : nullptr;
  const T* f = resid ? static_cast<const T*>(a.f) + r * H : nullptr;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < H; c += kRowThreads) {
    float v = ld(x, c);
    if (resid) {
      // x + gate * f as gated_residual_; the refiner's plain residual has no gate.
      float gf = ld(f, c);
      if (gated) {
        const float gv = ld(g, c);
        gf = a.zero_gate_guard && gv == 0.f ? 0.f : R<BF>(gv * gf);
      }
      v = R<BF>(v + gf);
      st(x, c, v);
    }
    row[c] = v;
    ss += v * v;
  }
  if (a.out == nullptr) return;  // uniform over the block
  const float inv = rsqrtf(block_sum<kRowThreads>(ss, scratch) / static_cast<float>(H) + a.eps);
  const T* w = static_cast<const T*>(a.w);
  const bool mod = a.shift.base != nullptr;
  const int64_t t = mod ? a.row2[r] : 0;
  const T* sh = mod ? static_cast<const T*>(a.shift.base) + t * a.shift.stride : nullptr;
  const T* sc = mod ? static_cast<const T*>(a.scale.base) + t * a.scale.stride : nullptr;
  for (int64_t c = threadIdx.x; c < H; c += kRowThreads) {
    float h = R<BF>(row[c] * inv * ld(w, c));
    if (mod) h = R<BF>(R<BF>(h * R<BF>(1.0f + ld(sc, c))) + ld(sh, c));
    if (a.out_f32) st(static_cast<float*>(a.out), r * H + c, h);
    else st(static_cast<T*>(a.out), r * H + c, h);
  }
}

// resid_norm_kernel<true> with 16-byte accesses and the row kept in registers (no shared row):
// thread t owns the 8-channel groups t, t + 256, ... (at most kVecPerThread of them, H <= 8192).
// The same math per element; only the order of the fp32 sum of squares differs.
constexpr int kVecPerThread = 4;
__global__ void __launch_bounds__(kRowThreads) resid_norm_bf16x8_kernel(ResidNormArgs a) {
  __shared__ float scratch[kRowThreads / 32];
  const int64_t r = blockIdx.x, H = a.H;
  bf16* x = static_cast<bf16*>(a.x) + r * H;
  const bool resid = a.f != nullptr, gated = a.gate.base != nullptr;
  const bf16* g = gated ? static_cast<const bf16*>(a.gate.base) + a.row[r] * a.gate.stride : nullptr;
  const bf16* f = resid ? static_cast<const bf16*>(a.f) + r * H : nullptr;
  float v[kVecPerThread][8];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int64_t c = (threadIdx.x + int64_t{k} * kRowThreads) * 8;
    if (c >= H) break;
    ld8(x + c, v[k]);
    if (resid) {
      float fv[8], gv[8];
      ld8(f + c, fv);
      if (gated) ld8(g + c, gv);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float gf = !gated ? fv[j] : a.zero_gate_guard && gv[j] == 0.f ? 0.f : R<true>(gv[j] * fv[j]);
        v[k][j] = R<true>(v[k][j] + gf);
      }
      st8(x + c, v[k]);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += v[k][j] * v[k][j];
  }
  if (a.out == nullptr) return;  // uniform over the block
  const float inv = rsqrtf(block_sum<kRowThreads>(ss, scratch) / static_cast<float>(H) + a.eps);
  const bf16* w = static_cast<const bf16*>(a.w);
  const bool mod = a.shift.base != nullptr;
  const int64_t t = mod ? a.row2[r] : 0;
  const bf16* sh = mod ? static_cast<const bf16*>(a.shift.base) + t * a.shift.stride : nullptr;
  const bf16* sc = mod ? static_cast<const bf16*>(a.scale.base) + t * a.scale.stride : nullptr;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int64_t c = (threadIdx.x + int64_t{k} * kRowThreads) * 8;
    if (c >= H) break;
    float wv[8], h[8];
    ld8(w + c, wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) h[j] = R<true>(v[k][j] * inv * wv[j]);
    if (mod) {
      float scv[8], shv[8];
      ld8(sc + c, scv);
      ld8(sh + c, shv);
#pragma unroll
      for (int j = 0; j < 8; ++j) h[j] = R<true>(R<true>(h[j] * R<true>(1.0f + scv[j])) + shv[j]);
    }
    if (a.out_f32) {
      float* o = static_cast<float*>(a.out) + r * H + c;
      *reinterpret_cast<float4*>(o) = make_float4(h[0], h[1], h[2], h[3]);
      *reinterpret_cast<float4*>(o + 4) = make_float4(h[4], h[5], h[6], h[7]);
    } else {
      st8(static_cast<bf16*>(a.out) + r * H + c, h);
    }
  }
}

// Whether resid_norm_bf16x8_kernel can take these operands: H a multiple of 8 up to 8 x 256 x
// kVecPerThread, every pointer 16-byte aligned, every table stride a multiple of 8 elements.
bool resid_norm_vectorizable(const ResidNormArgs& a) {
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (a.H % 8 != 0 || a.H > int64_t{8} * kRowThreads * kVecPerThread) return false;
  if (!al(a.x) || !al(a.f) || !al(a.w) || !al(a.out)) return false;
  for (const TableSlice* t : {&a.gate, &a.shift, &a.scale})
    if (!al(t->base) || t->stride % 8 != 0) return false;
  return true;
}

constexpr int kHeadDim = 128;
constexpr int kQkWarps = 4;

// One warp per (row, head); each lane owns dims 4 lane .. 4 lane + 3 (heads of D <= 128 dims, D a
// multiple of 4: lanes past D hold zeros). The normalised head goes through shared memory so that
// RoPE can read its partner dim (i +- half).
template <bool BF>
__global__ void __launch_bounds__(kQkWarps * 32)
    qk_kernel(const void* qkv_, const void* qn_, const void* kn_, float eps, const float* cos, const float* sin,
              int64_t half, bool rope, void* q_, void* k_, void* v_, int64_t S, int64_t heads, int D) {
  using T = std::conditional_t<BF, bf16, float>;
  __shared__ float buf[kQkWarps][kHeadDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t item = blockIdx.x * int64_t{kQkWarps} + warp;
  if (item >= S * heads) return;  // whole warps: item is warp-uniform
  const int64_t s = item / heads;
  const bool mine = lane * 4 < D;
  const T* g = static_cast<const T*>(qkv_) + item * 3 * D;  // [q | k | v] of this head
  T* outs[3] = {static_cast<T*>(q_) + item * D, static_cast<T*>(k_) + item * D, static_cast<T*>(v_) + item * D};
  const T* norms[2] = {static_cast<const T*>(qn_), static_cast<const T*>(kn_)};
  for (int which = 0; which < 2; ++which) {
    float v[4] = {0.f, 0.f, 0.f, 0.f}, nw[4] = {0.f, 0.f, 0.f, 0.f};
    if (mine) {
      ld4(g + which * D + lane * 4, v);
      ld4(norms[which] + lane * 4, nw);
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) ss += v[j] * v[j];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = rsqrtf(ss / D + eps);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = R<BF>(v[j] * inv * nw[j]);
      buf[warp][lane * 4 + j] = v[j];
    }
    __syncwarp();
    float o4[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t d = lane * 4 + j;
      float o = v[j];
      if (rope && d < 2 * half) {
        const int64_t p = d < half ? d : d - half;
        const float c = cos[s * half + p], sn = sin[s * half + p];
        o = d < half ? v[j] * c - buf[warp][d + half] * sn : v[j] * c + buf[warp][d - half] * sn;
        o = R<BF>(o);
      }
      o4[j] = o;
    }
    if (mine) st4(outs[which] + lane * 4, o4);
    __syncwarp();  // buf is rewritten by the next operand
  }
  if (mine) {
    float vv[4];
    ld4(g + 2 * D + lane * 4, vv);
    st4(outs[2] + lane * 4, vv);
  }
}

// One block row per token row, two channels per thread.
template <bool BF>
__global__ void swiglu_kernel(const void* u_, void* out_, int64_t F) {
  using T = std::conditional_t<BF, bf16, float>;
  const int64_t r = blockIdx.y;
  const T* u = static_cast<const T*>(u_) + r * 2 * F;
  T* out = static_cast<T*>(out_) + r * F;
  for (int64_t c = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 2; c < F; c += int64_t{gridDim.x} * blockDim.x * 2) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (c + e >= F) break;
      const float gv = ld(u, c + e), up = ld(u, F + c + e);
      st(out, c + e, R<BF>(R<BF>(gv / (1.0f + expf(-gv))) * up));
    }
  }
}

// bf16 SwiGLU, 8 channels per thread (F a multiple of 8, u and out 16-byte aligned).
__global__ void swiglu_bf16x8_kernel(const bf16* u_, bf16* out_, int64_t F) {
  const int64_t r = blockIdx.y, c = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 8;
  if (c >= F) return;
  const bf16* u = u_ + r * 2 * F;
  float gv[8], up[8], o[8];
  ld8(u + c, gv);
  ld8(u + F + c, up);
#pragma unroll
  for (int j = 0; j < 8; ++j) o[j] = R<true>(R<true>(gv[j] / (1.0f + expf(-gv[j]))) * up[j]);
  st8(out_ + r * F + c, o);
}

__device__ __forceinline__ uint64_t splitmix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// dt: 0 fp32, 1 bf16, 2 fp16.
__global__ void fill_kernel(void* p, int dt, int64_t n, uint64_t seed, float mean, float std) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t z = splitmix(seed * 0x632be59bd9b4e019ull + static_cast<uint64_t>(i));
    // u1 in (0, 1], u2 in [0, 1): Box-Muller, one value per counter.
    const float u1 = (static_cast<float>(z >> 40) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>((z >> 8) & 0xffffffu) * (1.0f / 16777216.0f);
    const float v = mean + std * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (dt == 1) static_cast<bf16*>(p)[i] = __float2bfloat16_rn(v);
    else if (dt == 2) static_cast<__half*>(p)[i] = __float2half_rn(v);
    else static_cast<float*>(p)[i] = v;
  }
}

unsigned grid_1d(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > (int64_t{1} << 20)) b = int64_t{1} << 20;
  return static_cast<unsigned>(b);
}

}  // namespace

void resid_norm_modulate(cudaStream_t st, bool bf16_mode, const ResidNormArgs& a) {
  if (a.S == 0) return;
  const size_t smem = static_cast<size_t>(a.H) * sizeof(float);
  if (bf16_mode && resid_norm_vectorizable(a)) {
    resid_norm_bf16x8_kernel<<<static_cast<unsigned>(a.S), kRowThreads, 0, st>>>(a);
  } else if (bf16_mode) {
    if (smem > 48 * 1024)
      cudaFuncSetAttribute(resid_norm_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    resid_norm_kernel<true><<<static_cast<unsigned>(a.S), kRowThreads, smem, st>>>(a);
  } else {
    if (smem > 48 * 1024)
      cudaFuncSetAttribute(resid_norm_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    resid_norm_kernel<false><<<static_cast<unsigned>(a.S), kRowThreads, smem, st>>>(a);
  }
}

void qk_norm_rope(cudaStream_t st, bool bf16_mode, const void* qkv, const void* q_norm, const void* k_norm,
                  float eps, const float* cos, const float* sin, int64_t half, bool rope, void* q, void* k,
                  void* v, int64_t S, int64_t heads, int64_t D) {
  const int64_t items = S * heads;
  if (items == 0) return;
  const auto blocks = static_cast<unsigned>((items + kQkWarps - 1) / kQkWarps);
  const int d = static_cast<int>(D);
  if (bf16_mode)
    qk_kernel<true><<<blocks, kQkWarps * 32, 0, st>>>(qkv, q_norm, k_norm, eps, cos, sin, half, rope, q, k, v, S, heads, d);
  else
    qk_kernel<false><<<blocks, kQkWarps * 32, 0, st>>>(qkv, q_norm, k_norm, eps, cos, sin, half, rope, q, k, v, S, heads, d);
}

void swiglu(cudaStream_t st, bool bf16_mode, const void* u, void* out, int64_t S, int64_t F) {
  if (S == 0 || F == 0) return;
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (bf16_mode && F % 8 == 0 && al(u) && al(out)) {
    const dim3 g8(static_cast<unsigned>((F / 8 + 255) / 256), static_cast<unsigned>(S));
    swiglu_bf16x8_kernel<<<g8, 256, 0, st>>>(static_cast<const bf16*>(u), static_cast<bf16*>(out), F);
    return;
  }
  const dim3 grid(static_cast<unsigned>((F / 2 + 255) / 256 + 1), static_cast<unsigned>(S));
  if (bf16_mode) swiglu_kernel<true><<<grid, 256, 0, st>>>(u, out, F);
  else swiglu_kernel<false><<<grid, 256, 0, st>>>(u, out, F);
}

void fill_normal(cudaStream_t st, void* p, DType dtype, int64_t n, uint64_t seed, float mean, float std) {
  if (n == 0) return;
  const int dt = dtype == DType::BF16 ? 1 : dtype == DType::F16 ? 2 : 0;
  fill_kernel<<<grid_1d(n, 256), 256, 0, st>>>(p, dt, n, seed, mean, std);
}

}  // namespace avdit::cuda

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;

// A table slice for the kernels: base pointer of column `col` of row 0 and the row stride.
::avdit::cuda::TableSlice slice(const TableColumns& t, DType act, int64_t H, const char* what) {
  if (!t.defined()) return {};
  AVDIT_CHECK(t.table.dtype() == act && t.table.ndim() == 2 && t.col >= 0 && t.col + H <= t.table.size(1),
              "residual_norm_modulate: {} table {} {} (columns {} .. {}) for {} rows of {}", what,
              dtype_name(t.table.dtype()), t.table.shape_str(), t.col, t.col + H - 1, dtype_name(act), H);
  return {static_cast<const char*>(t.table.raw()) + t.col * dtype_nbytes(act, 1), t.table.size(1)};
}

bool act_dtype(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

}  // namespace

void residual_norm_modulate(CudaContext& c, Tensor& x, const ResidualNormModulate& a, Tensor* out) {
  c.require_here(x, "residual_norm_modulate x");
  const DType act = a.act.value_or(x.dtype());
  AVDIT_CHECK(x.ndim() == 2 && act_dtype(x.dtype()) && (x.dtype() == act || (x.dtype() == DType::F32 && act == DType::F16)),
              "residual_norm_modulate: x {} {} with {} activations (F32, BF16 or F16 [S, H]; an F32 residual "
              "beside F16 activations)",
              dtype_name(x.dtype()), x.shape_str(), dtype_name(act));
  const int64_t S = x.size(0), H = x.size(1);
  ::avdit::cuda::ResidNormArgs r;
  r.x = device_ptr(x);
  r.S = S;
  r.H = H;
  r.zero_gate_guard = a.zero_gate_guard;
  if (a.f) {
    AVDIT_CHECK(a.f->dtype() == x.dtype() && a.f->numel() == S * H, "residual_norm_modulate: f {} {} for x {} {}",
                dtype_name(a.f->dtype()), a.f->shape_str(), dtype_name(x.dtype()), x.shape_str());
    r.f = a.f->raw();
    r.gate = slice(a.gate, act, H, "gate");
    if (a.gate.defined()) {
      AVDIT_CHECK(a.row && a.row->numel() == S, "residual_norm_modulate: the gate needs {} row indices", S);
      r.row = a.row->data<int32_t>();
    }
  }
  if (out) {
    AVDIT_CHECK(out->numel() == S * H && (out->dtype() == act || out->dtype() == DType::F32),
                "residual_norm_modulate: out {} {} for x {} {}", dtype_name(out->dtype()), out->shape_str(),
                dtype_name(act), x.shape_str());
    AVDIT_CHECK(a.w.dtype() == act && a.w.numel() == H, "residual_norm_modulate: norm weight {} {} for {} rows of {}",
                dtype_name(a.w.dtype()), a.w.shape_str(), dtype_name(act), H);
    r.w = a.w.raw();
    r.eps = a.eps;
    r.shift = slice(a.shift, act, H, "shift");
    r.scale = slice(a.scale, act, H, "scale");
    if (a.shift.defined()) {
      AVDIT_CHECK(a.row2 && a.row2->numel() == S, "residual_norm_modulate: the modulation needs {} row indices", S);
      r.row2 = a.row2->data<int32_t>();
    }
    r.out = device_ptr(*out);
    r.out_f32 = out->dtype() == DType::F32 && act != DType::F32;
  }
  if (act == DType::F16)
    ::avdit::cuda::resid_norm_modulate_f16(c.stream(), x.dtype() == DType::F32, r);
  else
    ::avdit::cuda::resid_norm_modulate(c.stream(), act == DType::BF16, r);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void qk_norm_rope_per_head(CudaContext& c, const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                           const Tensor* cos, const Tensor* sin, Tensor& q, Tensor& k, Tensor& v) {
  c.require_here(qkv, "qk_norm_rope qkv");
  AVDIT_CHECK(qkv.ndim() == 4 && qkv.size(2) == 3 && qkv.size(3) % 4 == 0 && qkv.size(3) <= 128 &&
                  (qkv.size(3) == 128 || qkv.dtype() != DType::F16) && act_dtype(qkv.dtype()),
              "qk_norm_rope: qkv {} {} (the kernel takes F32 or BF16 [S, heads, 3, D] with D a multiple of 4 up "
              "to 128, F16 with D = 128)",
              dtype_name(qkv.dtype()), qkv.shape_str());
  const int64_t S = qkv.size(0), heads = qkv.size(1), D = qkv.size(3);
  for (const Tensor* t : {&q_norm, &k_norm})
    AVDIT_CHECK(t->dtype() == qkv.dtype() && t->numel() == D, "qk_norm_rope: norm weight {} {}",
                dtype_name(t->dtype()), t->shape_str());
  for (const Tensor* t : {&q, &k, &v})
    AVDIT_CHECK(t->dtype() == qkv.dtype() && t->numel() == S * heads * D, "qk_norm_rope: output {} {}",
                dtype_name(t->dtype()), t->shape_str());
  int64_t half = 0;
  if (cos) {
    AVDIT_CHECK(sin && cos->dtype() == DType::F32 && sin->dtype() == DType::F32 && cos->size(0) == S &&
                    cos->numel() == sin->numel() && 2 * cos->size(-1) <= D,
                "qk_norm_rope: cos {} sin {} (F32 [S, half])", cos->shape_str(), sin ? sin->shape_str() : "none");
    half = cos->size(-1);
  }
  if (qkv.dtype() == DType::F16) {
    ::avdit::cuda::qk_norm_rope_f16(c.stream(), qkv.raw(), q_norm.raw(), k_norm.raw(), eps,
                                    cos ? cos->data<float>() : nullptr, sin ? sin->data<float>() : nullptr, half,
                                    cos != nullptr, device_ptr(q), device_ptr(k), device_ptr(v), S, heads);
    AVDIT_CUDA_CHECK_LAUNCH();
    return;
  }
  ::avdit::cuda::qk_norm_rope(c.stream(), qkv.dtype() == DType::BF16, qkv.raw(), q_norm.raw(), k_norm.raw(), eps,
                              cos ? cos->data<float>() : nullptr, sin ? sin->data<float>() : nullptr, half,
                              cos != nullptr, device_ptr(q), device_ptr(k), device_ptr(v), S, heads, D);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void fill_normal(CudaContext& c, Tensor& t, uint64_t seed, float mean, float std) {
  c.require_here(t, "fill_normal");
  AVDIT_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16,
              "fill_normal: dtype {} (F32, BF16 or F16)", dtype_name(t.dtype()));
  ::avdit::cuda::fill_normal(c.stream(), device_ptr(t), t.dtype(), t.numel(), seed, mean, std);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
