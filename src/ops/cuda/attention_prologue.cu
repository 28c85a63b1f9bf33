// The attention prologue and gate on the GPU (see ops/attention_prologue.h): one warp per (packed
// token, head) for the QK-norm + RoPE + gather, one thread per element for the gate; fp32 math with
// explicitly rounded steps where the CPU reference rounds.
#include "backend/cuda/context.h"
#include "ops/attention_prologue.h"
#include "ops/cuda/common.cuh"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::grid_for;
using ::avdit::cuda::kThreads;
using ::avdit::cuda::load_elt;
using ::avdit::cuda::sigmoid_f;
using ::avdit::cuda::store_elt;

constexpr int kPrologueWarps = 4;
constexpr int kMaxHeadDim = 256;

// v rounded to the element type t (F32: unchanged).
__device__ __forceinline__ float rounded(float v, Elt t) {
  switch (t) {
    case Elt::BF16: return __bfloat162float(__float2bfloat16_rn(v));
    case Elt::F16: return __half2float(__float2half_rn(v));
    default: return v;
  }
}

// One warp per (packed token, head of q | k | v).
__global__ void __launch_bounds__(kPrologueWarps * 32)
    qkv_prologue_kernel(const void* qkv, Elt qt, const float* q_norm, const float* k_norm,
                        const int* group, const int* inv, const float* rope, int64_t rope_width,
                        int64_t half, int64_t L, int64_t Hq, int64_t Hkv, int64_t D, void* q_out,
                        Elt q_ot, void* k_out, Elt k_ot, void* v_out, Elt v_ot) {
  __shared__ float buf[kPrologueWarps][kMaxHeadDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t heads = Hq + 2 * Hkv;
  const int64_t item = blockIdx.x * int64_t{kPrologueWarps} + warp;
  if (item >= L * heads) return;  // whole warps leave together
  const int64_t p = item / heads, h = item % heads;
  const int64_t r = inv[p];
  const int64_t src = r * heads * D + h * D;
  if (h >= Hq + Hkv) {  // v: a copy into packed order
    const int64_t dst = (p * Hkv + (h - Hq - Hkv)) * D;
    for (int64_t d = lane; d < D; d += 32)
      store_elt(v_out, v_ot, dst + d, load_elt(qkv, qt, src + d));
    return;
  }
  const bool is_q = h < Hq;
  const float* w = (is_q ? q_norm : k_norm) + (group ? static_cast<int64_t>(group[r]) : 0) * D;
  float* b = buf[warp];
  float ss = 0.f;
  for (int64_t d = lane; d < D; d += 32) {
    const float v = load_elt(qkv, qt, src + d);
    b[d] = v;
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv_rms = __fdiv_rn(1.0f, sqrtf(ss / static_cast<float>(D) + 1e-6f));
  for (int64_t d = lane; d < D; d += 32) b[d] = __fmul_rn(__fmul_rn(b[d], inv_rms), 1.0f + w[d]);
  __syncwarp();
  const float* sin_row = rope + p * rope_width;
  const float* cos_row = sin_row + half;
  void* out = is_q ? q_out : k_out;
  const Elt ot = is_q ? q_ot : k_ot;
  const int64_t dst = is_q ? (p * Hq + h) * D : (p * Hkv + (h - Hq)) * D;
  for (int64_t d = lane; d < D; d += 32) {
    float v = b[d];
    if (d < half) {
      v = __fsub_rn(__fmul_rn(b[d], cos_row[d]), __fmul_rn(b[d + half], sin_row[d]));
    } else if (d < 2 * half) {
      v = __fadd_rn(__fmul_rn(b[d], cos_row[d - half]), __fmul_rn(b[d - half], sin_row[d - half]));
    }
    store_elt(out, ot, dst + d, v);
  }
}

// out[r, h, :] = R(o[perm[r], h, :] * R(sigmoid(g[r, h]))), R rounding to out's element type.
__global__ void gate_unpermute_kernel(const void* o, Elt otp, const void* g, Elt gt,
                                      const int* perm, int64_t L, int64_t Hq, int64_t D, void* out,
                                      Elt outt) {
  const int64_t total = L * Hq * D;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / (Hq * D), hd = i % (Hq * D), h = hd / D;
    const float s = rounded(sigmoid_f(load_elt(g, gt, r * Hq + h)), outt);
    store_elt(out, outt, i,
              __fmul_rn(load_elt(o, otp, static_cast<int64_t>(perm[r]) * Hq * D + hd), s));
  }
}

void check_f32(CudaContext& c, const Tensor& t, const char* what) {
  c.require_here(t, what);
  AVDIT_CHECK(t.dtype() == DType::F32, "{}: expected F32, got {} {}", what, dtype_name(t.dtype()),
              t.shape_str());
}

}  // namespace

void qkv_prologue(CudaContext& c, const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                  const Tensor* group, const Tensor& inv, const Tensor& rope, int64_t half,
                  Tensor& q, Tensor& k, Tensor& v) {
  c.require_here(qkv, "qkv_prologue qkv");
  check_f32(c, q_norm, "qkv_prologue q_norm");
  check_f32(c, k_norm, "qkv_prologue k_norm");
  check_f32(c, rope, "qkv_prologue rope");
  ::avdit::cuda::require_i32(inv, "qkv_prologue inv");
  AVDIT_CHECK(q.ndim() == 3 && k.ndim() == 3 && v.ndim() == 3,
              "qkv_prologue: q, k, v must be [L, H, D]");
  const int64_t L = q.size(0), Hq = q.size(1), Hkv = k.size(1), D = q.size(2), heads = Hq + 2 * Hkv;
  AVDIT_CHECK(D >= 1 && D <= kMaxHeadDim, "qkv_prologue: head dim {} above {}", D, kMaxHeadDim);
  AVDIT_CHECK(qkv.ndim() == 2 && qkv.size(0) == L && qkv.size(1) == heads * D && k.size(2) == D &&
                  v.numel() == k.numel(),
              "qkv_prologue: qkv {} for q {} k {} v {}", qkv.shape_str(), q.shape_str(),
              k.shape_str(), v.shape_str());
  AVDIT_CHECK(inv.numel() == L && rope.ndim() == 2 && rope.size(0) == L &&
                  2 * half <= rope.size(1) && 2 * half <= D,
              "qkv_prologue: inv {} rope {} (half {}) for {} tokens of head dim {}",
              inv.shape_str(), rope.shape_str(), half, L, D);
  const int64_t G = q_norm.numel() / D;
  AVDIT_CHECK(
      G >= 1 && q_norm.numel() == G * D && k_norm.numel() == G * D && (G == 1 || group != nullptr),
      "qkv_prologue: q_norm {} k_norm {} for head dim {}", q_norm.shape_str(), k_norm.shape_str(),
      D);
  if (G > 1) {
    ::avdit::cuda::require_i32(*group, "qkv_prologue group");
    AVDIT_CHECK(group->numel() == L, "qkv_prologue: group {} for {} tokens", group->shape_str(), L);
  }
  const int64_t warps = L * heads;
  if (warps == 0) return;
  const int64_t blocks = (warps + kPrologueWarps - 1) / kPrologueWarps;
  AVDIT_CHECK(blocks <= 0x7fffffff, "qkv_prologue: {} token heads exceed one launch", warps);
  qkv_prologue_kernel<<<static_cast<unsigned>(blocks), kPrologueWarps * 32, 0, c.stream()>>>(
      qkv.raw(), elt_of(qkv, "qkv"), static_cast<const float*>(q_norm.raw()),
      static_cast<const float*>(k_norm.raw()), G > 1 ? group->data<int32_t>() : nullptr,
      inv.data<int32_t>(), static_cast<const float*>(rope.raw()), rope.size(1), half, L, Hq, Hkv, D,
      device_ptr(q), elt_of(q, "q"), device_ptr(k), elt_of(k, "k"), device_ptr(v), elt_of(v, "v"));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void gate_unpermute(CudaContext& c, const Tensor& o, const Tensor& g, const Tensor& perm,
                    Tensor& out) {
  c.require_here(o, "gate o");
  c.require_here(g, "gate g");
  ::avdit::cuda::require_i32(perm, "gate perm");
  c.require_here(out, "gate out");
  AVDIT_CHECK(o.ndim() == 3, "gate_unpermute: o {} (expected [L, Hq, D])", o.shape_str());
  const int64_t L = o.size(0), Hq = o.size(1), D = o.size(2);
  AVDIT_CHECK(g.numel() == L * Hq && perm.numel() == L && out.numel() == L * Hq * D,
              "gate_unpermute: o {} g {} perm {} out {}", o.shape_str(), g.shape_str(),
              perm.shape_str(), out.shape_str());
  if (L * Hq * D == 0) return;
  gate_unpermute_kernel<<<grid_for(L * Hq * D), kThreads, 0, c.stream()>>>(
      o.raw(), elt_of(o, "gate o"), g.raw(), elt_of(g, "gate g"), perm.data<int32_t>(), L, Hq, D,
      device_ptr(out), elt_of(out, "gate out"));
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::ops::cuda
