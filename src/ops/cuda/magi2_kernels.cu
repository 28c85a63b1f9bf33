// The MAGI-2 preview's model-specific kernels (see kernels.h). fp32 math in the CPU oracle's operation order
// (the mHC epilogue uses explicitly rounded multiplies and adds so that no FMA contraction separates it from
// the CPU); one thread per output element or per token, grid-stride loops, no atomics.
#include <cmath>
#include <initializer_list>

#include "ops/cuda/common.cuh"
#include "ops/cuda/magi2_kernels.h"

namespace avdit::cuda::magi2 {
namespace {

__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

__device__ __forceinline__ int64_t stride_of() { return int64_t{gridDim.x} * blockDim.x; }
__device__ __forceinline__ int64_t first_of() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }

// Rows move in the widest unit that divides the row size.
template <class T>
__global__ void gather_kernel(const T* x, const int* index, T* y, int64_t rows, int64_t row_elems) {
  const int64_t n = rows * row_elems;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t r = i / row_elems, c = i % row_elems;
    y[i] = x[static_cast<int64_t>(index[r]) * row_elems + c];
  }
}

__global__ void embed_epilogue_kernel(const float* y, const float* bias, const int* group, const float* time,
                                      const int* perm, int64_t L, int64_t R, int64_t tc, void* s, Elt st,
                                      float* pre_out, float* embed_out) {
  const int64_t n = L * R;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t r = i / R, c = i % R;
    const float pre = y[i] + bias[static_cast<int64_t>(group[r]) * R + c];
    const float v = c < tc ? time[static_cast<int64_t>(perm[r]) * tc + c] : pre;
    if (pre_out) pre_out[i] = pre;
    if (embed_out) embed_out[i] = v;
    store_elt(s, st, i, v);
  }
}

// As packing.cpp: freq_k = exp((-ln(10000) * k) / half) in float32, pos = t * 1000, [cos(pos f) | sin(pos f)].
__global__ void time_embedding_kernel(const float* t, int64_t L, int64_t dim, float neg_log, float* out) {
  const int64_t n = L * dim;
  const int64_t half = dim / 2;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t l = i / dim, c = i % dim;
    float v = 0.f;
    if (dim == 1) {
      v = t[l];
    } else if (c < 2 * half) {
      const int64_t k = c < half ? c : c - half;
      const float f = expf(__fdiv_rn(__fmul_rn(neg_log, static_cast<float>(k)), static_cast<float>(half)));
      const float a = __fmul_rn(__fmul_rn(t[l], 1000.0f), f);
      v = c < half ? cosf(a) : sinf(a);
    }  // odd dim: the last column stays 0
    out[i] = v;
  }
}

// As packing.cpp rope_table: per axis a, x = (coord - centre) * scale, proj = x * band.
__global__ void rope_table_kernel(const float* coords, const float* bands, int64_t L, int64_t B, float* out) {
  const int64_t n = L * 3 * B;
  for (int64_t i = first_of(); i < n; i += stride_of()) {
    const int64_t l = i / (3 * B), ab = i % (3 * B), a = ab / B, b = ab % B;
    const float* r = coords + l * 9;
    const float size = r[3 + a], ref = r[6 + a];
    // The reference fixes 0/0 to 1 for singleton axes; pack_inputs never makes another 0/0 (the CPU table
    // refuses one, here it would show as NaN in the output).
    const float scale = (ref == 1.0f && size == 1.0f) ? 1.0f : __fdiv_rn(ref - 1.0f, size - 1.0f);
    const float centre = a == 0 ? 0.0f : __fdiv_rn(size - 1.0f, 2.0f);
    const float x = __fmul_rn(r[a] - centre, scale);
    const float proj = __fmul_rn(x, bands[b]);
    out[l * 6 * B + a * B + b] = sinf(proj);
    out[l * 6 * B + 3 * B + a * B + b] = cosf(proj);
  }
}

// One thread per token: n*n values in registers / local memory (n <= kMaxMhcStreams).
__global__ void mhc_coefficients_kernel(const float* h, int64_t L, int64_t n, MhcScalars a, const float* bpre,
                                        const float* bpost, const float* bres, bool round, float* pre, float* post,
                                        float* res) {
  const int64_t cols = 2 * n + n * n;
  for (int64_t l = first_of(); l < L; l += stride_of()) {
    const float* r = h + l * cols;
    for (int64_t k = 0; k < n; ++k) {
      float p = sigmoid_f(__fadd_rn(__fmul_rn(a.a_pre, r[k]), bpre[k]));
      float q = __fmul_rn(2.0f, sigmoid_f(__fadd_rn(__fmul_rn(a.a_post, r[n + k]), bpost[k])));
      if (round) {
        p = round_bf16(p);
        q = round_bf16(q);
      }
      pre[l * n + k] = p;
      post[l * n + k] = q;
    }
    float m[kMaxMhcStreams * kMaxMhcStreams];
    for (int64_t k = 0; k < n * n; ++k) m[k] = __fadd_rn(__fmul_rn(a.a_res, r[2 * n + k]), bres[k]);
    // Sinkhorn-Knopp exactly as mhc.cpp: exp(Z - max Z), then columns, then rows, 20 times.
    float mx = m[0];
    for (int64_t k = 0; k < n * n; ++k) mx = fmaxf(mx, m[k]);
    for (int64_t k = 0; k < n * n; ++k) m[k] = expf(m[k] - mx);
    for (int it = 0; it < 20; ++it) {
      for (int64_t j = 0; j < n; ++j) {
        float col = 0.f;
        for (int64_t i = 0; i < n; ++i) col = __fadd_rn(col, m[i * n + j]);
        const float d = __fadd_rn(col, 1e-12f);
        for (int64_t i = 0; i < n; ++i) m[i * n + j] = __fdiv_rn(m[i * n + j], d);
      }
      for (int64_t i = 0; i < n; ++i) {
        float row = 0.f;
        for (int64_t j = 0; j < n; ++j) row = __fadd_rn(row, m[i * n + j]);
        const float d = __fadd_rn(row, 1e-12f);
        for (int64_t j = 0; j < n; ++j) m[i * n + j] = __fdiv_rn(m[i * n + j], d);
      }
    }
    for (int64_t k = 0; k < n * n; ++k) res[l * n * n + k] = round ? round_bf16(m[k]) : m[k];
  }
}

__global__ void mhc_apply_pre_kernel(const void* s, Elt st, const float* h_pre, int64_t L, int64_t n,
                                     int64_t hidden, void* out, Elt ot) {
  const int64_t total = L * hidden;
  for (int64_t i = first_of(); i < total; i += stride_of()) {
    const int64_t l = i / hidden, x = i % hidden;
    float acc = 0.f;
    for (int64_t k = 0; k < n; ++k)
      acc = __fadd_rn(acc, __fmul_rn(h_pre[l * n + k], load_elt(s, st, (l * n + k) * hidden + x)));
    store_elt(out, ot, i, acc);
  }
}

// Each thread owns column x of all n streams of token l, so the in-place update has no hazard.
__global__ void mhc_hyper_connect_kernel(void* s, Elt st, const void* o, Elt ot, const float* h_post,
                                         const float* h_res, int64_t L, int64_t n, int64_t hidden) {
  const int64_t total = L * hidden;
  for (int64_t i = first_of(); i < total; i += stride_of()) {
    const int64_t l = i / hidden, x = i % hidden;
    float in[kMaxMhcStreams];
    for (int64_t j = 0; j < n; ++j) in[j] = load_elt(s, st, (l * n + j) * hidden + x);
    const float ov = load_elt(o, ot, i);
    for (int64_t r = 0; r < n; ++r) {
      float acc = 0.f;
      for (int64_t j = 0; j < n; ++j) acc = __fadd_rn(acc, __fmul_rn(h_res[(l * n + r) * n + j], in[j]));
      acc = __fadd_rn(acc, __fmul_rn(h_post[l * n + r], ov));
      store_elt(s, st, (l * n + r) * hidden + x, acc);
    }
  }
}

constexpr int kPrologueWarps = 4;
constexpr int kMaxHeadDim = 256;

// One warp per (packed token, head of q | k | v).
__global__ void __launch_bounds__(kPrologueWarps * 32)
    qkv_prologue_kernel(const void* qkv, Elt qt, const float* q_norm, const float* k_norm, const int* group,
                        const int* inv, const float* rope, int64_t rope_width, int64_t half, int64_t L, int64_t Hq,
                        int64_t Hkv, int64_t D, void* q_out, Elt q_ot, void* k_out, Elt k_ot, void* v_out,
                        Elt v_ot) {
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
    for (int64_t d = lane; d < D; d += 32) store_elt(v_out, v_ot, dst + d, load_elt(qkv, qt, src + d));
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

__global__ void gate_unpermute_kernel(const void* o, Elt otp, const void* g, Elt gt, const int* perm, int64_t L,
                                      int64_t Hq, int64_t D, bool round, void* out, Elt outt) {
  const int64_t total = L * Hq * D;
  for (int64_t i = first_of(); i < total; i += stride_of()) {
    const int64_t r = i / (Hq * D), hd = i % (Hq * D), h = hd / D;
    float s = sigmoid_f(load_elt(g, gt, r * Hq + h));
    if (round) s = round_bf16(s);
    store_elt(out, outt, i, __fmul_rn(load_elt(o, otp, static_cast<int64_t>(perm[r]) * Hq * D + hd), s));
  }
}

void check_f32(const Tensor& t, const char* what) {
  require_cuda(t, what);
  AVDIT_REQUIRE(t.dtype() == DType::F32, "{}: expected F32, got {} {}", what, dtype_name(t.dtype()), t.shape_str());
}

}  // namespace

void gather_rows_into(Device& dev, const Tensor& x, const Tensor& index, Tensor& out) {
  require_cuda(x, "magi2 gather x");
  require_i32(index, "magi2 gather index");
  require_cuda(out, "magi2 gather out");
  AVDIT_REQUIRE(x.ndim() >= 1 && out.ndim() == x.ndim() && out.size(0) == index.numel() && out.dtype() == x.dtype(),
                "magi2 gather: x {} index {} out {}", x.shape_str(), index.shape_str(), out.shape_str());
  const int64_t rows = index.numel();
  if (rows == 0 || x.numel() == 0) return;
  const int64_t row_bytes = x.nbytes() / x.size(0);
  AVDIT_REQUIRE(out.nbytes() == rows * row_bytes, "magi2 gather: out {} rows differ from x {}", out.shape_str(),
                x.shape_str());
  if (row_bytes % 4 == 0) {
    const int64_t e = row_bytes / 4;
    gather_kernel<uint32_t><<<grid_for(rows * e), kThreads, 0, dev.stream()>>>(
        static_cast<const uint32_t*>(x.raw()), index.data<int32_t>(), static_cast<uint32_t*>(device_ptr(out)), rows, e);
  } else if (row_bytes % 2 == 0) {
    const int64_t e = row_bytes / 2;
    gather_kernel<uint16_t><<<grid_for(rows * e), kThreads, 0, dev.stream()>>>(
        static_cast<const uint16_t*>(x.raw()), index.data<int32_t>(), static_cast<uint16_t*>(device_ptr(out)), rows, e);
  } else {
    gather_kernel<uint8_t><<<grid_for(rows * row_bytes), kThreads, 0, dev.stream()>>>(
        static_cast<const uint8_t*>(x.raw()), index.data<int32_t>(), static_cast<uint8_t*>(device_ptr(out)), rows,
        row_bytes);
  }
  AVDIT_CUDA_CHECK_LAUNCH();
}

void embed_epilogue(Device& dev, const Tensor& y, const Tensor& bias, const Tensor& group, const Tensor& time,
                    const Tensor& perm, int64_t tc, Tensor& s, Tensor* pre_time, Tensor* embed) {
  check_f32(y, "magi2 embed y");
  check_f32(bias, "magi2 embed bias");
  require_i32(group, "magi2 embed group");
  require_i32(perm, "magi2 embed perm");
  require_cuda(s, "magi2 embed s");
  AVDIT_REQUIRE(y.ndim() == 2 && s.shape() == y.shape(), "magi2 embed: y {} s {}", y.shape_str(), s.shape_str());
  const int64_t L = y.size(0), R = y.size(1);
  AVDIT_REQUIRE(bias.numel() == 3 * R && group.numel() == L && perm.numel() == L, "magi2 embed: bias {} for width {}",
                bias.shape_str(), R);
  AVDIT_REQUIRE(tc >= 0 && tc <= R, "magi2 embed: time channels {} above the width {}", tc, R);
  if (tc > 0) {
    check_f32(time, "magi2 embed time");
    AVDIT_REQUIRE(time.numel() == L * tc, "magi2 embed: time {} for [{}, {}]", time.shape_str(), L, tc);
  }
  float* pre = nullptr;
  float* emb = nullptr;
  if (pre_time) {
    check_f32(*pre_time, "magi2 embed_pre_time");
    AVDIT_REQUIRE(pre_time->numel() == L * R, "magi2 embed: embed_pre_time {}", pre_time->shape_str());
    pre = static_cast<float*>(device_ptr(*pre_time));
  }
  if (embed) {
    check_f32(*embed, "magi2 embed dump");
    AVDIT_REQUIRE(embed->numel() == L * R, "magi2 embed: embed {}", embed->shape_str());
    emb = static_cast<float*>(device_ptr(*embed));
  }
  if (L * R == 0) return;
  embed_epilogue_kernel<<<grid_for(L * R), kThreads, 0, dev.stream()>>>(
      static_cast<const float*>(y.raw()), static_cast<const float*>(bias.raw()), group.data<int32_t>(),
      tc > 0 ? static_cast<const float*>(time.raw()) : nullptr, perm.data<int32_t>(), L, R, tc, device_ptr(s),
      elt_of(s, "magi2 embed s"), pre, emb);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void time_embedding(Device& dev, const Tensor& t, int64_t dim, Tensor& out) {
  check_f32(t, "magi2 time t");
  check_f32(out, "magi2 time out");
  const int64_t L = t.numel();
  AVDIT_REQUIRE(out.numel() == L * dim, "magi2 time embedding: out {} for [{}, {}]", out.shape_str(), L, dim);
  if (L * dim == 0) return;
  const float neg_log = static_cast<float>(-std::log(10000.0));
  time_embedding_kernel<<<grid_for(L * dim), kThreads, 0, dev.stream()>>>(static_cast<const float*>(t.raw()), L, dim,
                                                                           neg_log, static_cast<float*>(device_ptr(out)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void rope_table(Device& dev, const Tensor& coords, const Tensor& bands, Tensor& out) {
  check_f32(coords, "magi2 rope coords");
  check_f32(bands, "magi2 rope bands");
  check_f32(out, "magi2 rope out");
  AVDIT_REQUIRE(coords.ndim() == 2 && coords.size(1) == 9, "magi2 rope: coords {} (expected [L, 9])",
                coords.shape_str());
  const int64_t L = coords.size(0), B = bands.numel();
  AVDIT_REQUIRE(out.numel() == L * 6 * B, "magi2 rope: out {} for [{}, {}]", out.shape_str(), L, 6 * B);
  if (L * B == 0) return;
  rope_table_kernel<<<grid_for(L * 3 * B), kThreads, 0, dev.stream()>>>(
      static_cast<const float*>(coords.raw()), static_cast<const float*>(bands.raw()), L, B,
      static_cast<float*>(device_ptr(out)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void mhc_coefficients_epilogue(Device& dev, const Tensor& h, const MhcScalars& a, const Tensor& bias_pre,
                               const Tensor& bias_post, const Tensor& bias_res, int64_t n, bool round_bf16,
                               Tensor& h_pre, Tensor& h_post, Tensor& h_res) {
  check_f32(h, "mhc h");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&bias_pre, &bias_post, &bias_res, &h_pre, &h_post, &h_res})
    check_f32(*t, "mhc operand");
  AVDIT_REQUIRE(n >= 1 && n <= kMaxMhcStreams, "mhc: {} streams (the kernel holds at most {})", n, kMaxMhcStreams);
  const int64_t cols = 2 * n + n * n;
  AVDIT_REQUIRE(h.ndim() == 2 && h.size(1) == cols, "mhc: h {} for {} streams (expected [L, {}])", h.shape_str(), n,
                cols);
  const int64_t L = h.size(0);
  AVDIT_REQUIRE(bias_pre.numel() == n && bias_post.numel() == n && bias_res.numel() == n * n,
                "mhc: biases {} {} {} for {} streams", bias_pre.shape_str(), bias_post.shape_str(),
                bias_res.shape_str(), n);
  AVDIT_REQUIRE(h_pre.numel() == L * n && h_post.numel() == L * n && h_res.numel() == L * n * n,
                "mhc: outputs {} {} {} for {} tokens", h_pre.shape_str(), h_post.shape_str(), h_res.shape_str(), L);
  if (L == 0) return;
  mhc_coefficients_kernel<<<grid_for(L), kThreads, 0, dev.stream()>>>(
      static_cast<const float*>(h.raw()), L, n, a, static_cast<const float*>(bias_pre.raw()),
      static_cast<const float*>(bias_post.raw()), static_cast<const float*>(bias_res.raw()), round_bf16,
      static_cast<float*>(device_ptr(h_pre)), static_cast<float*>(device_ptr(h_post)),
      static_cast<float*>(device_ptr(h_res)));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void mhc_apply_pre(Device& dev, const Tensor& s, const Tensor& h_pre, int64_t n, Tensor& out) {
  require_cuda(s, "mhc_apply_pre s");
  check_f32(h_pre, "mhc_apply_pre h_pre");
  require_cuda(out, "mhc_apply_pre out");
  AVDIT_REQUIRE(s.ndim() == 2 && n >= 1 && s.size(1) % n == 0, "mhc_apply_pre: s {} for {} streams", s.shape_str(), n);
  const int64_t L = s.size(0), hidden = s.size(1) / n;
  AVDIT_REQUIRE(h_pre.numel() == L * n && out.numel() == L * hidden, "mhc_apply_pre: h_pre {} out {} for s {}",
                h_pre.shape_str(), out.shape_str(), s.shape_str());
  if (L * hidden == 0) return;
  mhc_apply_pre_kernel<<<grid_for(L * hidden), kThreads, 0, dev.stream()>>>(
      s.raw(), elt_of(s, "mhc_apply_pre s"), static_cast<const float*>(h_pre.raw()), L, n, hidden, device_ptr(out),
      elt_of(out, "mhc_apply_pre out"));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void mhc_hyper_connect_(Device& dev, Tensor& s, const Tensor& o, const Tensor& h_post, const Tensor& h_res,
                        int64_t n) {
  require_cuda(s, "mhc_hyper_connect s");
  require_cuda(o, "mhc_hyper_connect out");
  check_f32(h_post, "mhc_hyper_connect h_post");
  check_f32(h_res, "mhc_hyper_connect h_res");
  AVDIT_REQUIRE(n >= 1 && n <= kMaxMhcStreams && s.ndim() == 2 && s.size(1) % n == 0,
                "mhc_hyper_connect: s {} for {} streams", s.shape_str(), n);
  const int64_t L = s.size(0), hidden = s.size(1) / n;
  AVDIT_REQUIRE(o.numel() == L * hidden && h_post.numel() == L * n && h_res.numel() == L * n * n,
                "mhc_hyper_connect: branch output {} h_post {} h_res {} for s {}", o.shape_str(), h_post.shape_str(),
                h_res.shape_str(), s.shape_str());
  if (L * hidden == 0) return;
  mhc_hyper_connect_kernel<<<grid_for(L * hidden), kThreads, 0, dev.stream()>>>(
      device_ptr(s), elt_of(s, "mhc_hyper_connect s"), o.raw(), elt_of(o, "mhc_hyper_connect out"),
      static_cast<const float*>(h_post.raw()), static_cast<const float*>(h_res.raw()), L, n, hidden);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void qkv_prologue(Device& dev, const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor* group,
                  const Tensor& inv, const Tensor& rope, int64_t half, int64_t Hq, int64_t Hkv, int64_t D,
                  Tensor& q_out, Tensor& k_out, Tensor& v_out) {
  require_cuda(qkv, "qkv_prologue qkv");
  check_f32(q_norm, "qkv_prologue q_norm");
  check_f32(k_norm, "qkv_prologue k_norm");
  check_f32(rope, "qkv_prologue rope");
  require_i32(inv, "qkv_prologue inv");
  AVDIT_REQUIRE(D >= 1 && D <= kMaxHeadDim, "qkv_prologue: head dim {} above {}", D, kMaxHeadDim);
  const int64_t heads = Hq + 2 * Hkv;
  AVDIT_REQUIRE(qkv.ndim() == 2 && qkv.size(1) == heads * D, "qkv_prologue: qkv {} for {} heads of {}",
                qkv.shape_str(), heads, D);
  const int64_t L = qkv.size(0);
  AVDIT_REQUIRE(inv.numel() == L && rope.ndim() == 2 && rope.size(0) == L && 2 * half <= rope.size(1) &&
                    2 * half <= D,
                "qkv_prologue: inv {} rope {} (half {}) for {} tokens of head dim {}", inv.shape_str(),
                rope.shape_str(), half, L, D);
  const int64_t G = q_norm.numel() / D;
  AVDIT_REQUIRE(G >= 1 && q_norm.numel() == G * D && k_norm.numel() == G * D && (G == 1 || group != nullptr),
                "qkv_prologue: q_norm {} k_norm {} for head dim {}", q_norm.shape_str(), k_norm.shape_str(), D);
  if (group) {
    require_i32(*group, "qkv_prologue group");
    AVDIT_REQUIRE(group->numel() == L, "qkv_prologue: group {} for {} tokens", group->shape_str(), L);
  }
  AVDIT_REQUIRE(q_out.numel() == L * Hq * D && k_out.numel() == L * Hkv * D && v_out.numel() == L * Hkv * D,
                "qkv_prologue: outputs q {} k {} v {}", q_out.shape_str(), k_out.shape_str(), v_out.shape_str());
  const int64_t warps = L * heads;
  if (warps == 0) return;
  const int64_t blocks = (warps + kPrologueWarps - 1) / kPrologueWarps;
  AVDIT_REQUIRE(blocks <= 0x7fffffff, "qkv_prologue: {} token heads exceed one launch", warps);
  qkv_prologue_kernel<<<static_cast<unsigned>(blocks), kPrologueWarps * 32, 0, dev.stream()>>>(
      qkv.raw(), elt_of(qkv, "qkv"), static_cast<const float*>(q_norm.raw()), static_cast<const float*>(k_norm.raw()),
      G > 1 ? group->data<int32_t>() : nullptr, inv.data<int32_t>(), static_cast<const float*>(rope.raw()),
      rope.size(1), half, L, Hq, Hkv, D, device_ptr(q_out), elt_of(q_out, "q"), device_ptr(k_out), elt_of(k_out, "k"),
      device_ptr(v_out), elt_of(v_out, "v"));
  AVDIT_CUDA_CHECK_LAUNCH();
}

void gate_unpermute(Device& dev, const Tensor& o, const Tensor& g, const Tensor& perm, bool round_bf16,
                    Tensor& out) {
  require_cuda(o, "gate o");
  require_cuda(g, "gate g");
  require_i32(perm, "gate perm");
  require_cuda(out, "gate out");
  AVDIT_REQUIRE(o.ndim() == 3, "gate: o {} (expected [L, Hq, D])", o.shape_str());
  const int64_t L = o.size(0), Hq = o.size(1), D = o.size(2);
  AVDIT_REQUIRE(g.numel() == L * Hq && perm.numel() == L && out.numel() == L * Hq * D,
                "gate: o {} g {} perm {} out {}", o.shape_str(), g.shape_str(), perm.shape_str(), out.shape_str());
  if (L * Hq * D == 0) return;
  gate_unpermute_kernel<<<grid_for(L * Hq * D), kThreads, 0, dev.stream()>>>(
      o.raw(), elt_of(o, "gate o"), g.raw(), elt_of(g, "gate g"), perm.data<int32_t>(), L, Hq, D, round_bf16,
      device_ptr(out), elt_of(out, "gate out"));
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda::magi2
