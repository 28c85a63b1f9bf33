// ops::attention_fp8 on the device (ops/attention_fp8.h): the block table of the documents, the
// quantize pass into the padded layout (ops/cuda/attention_fp8_layout.h), then the Hopper kernel
// (sm_90, head dim 128) or the portable one. Nothing waits for the host (the table is built on the
// device from the planned boundaries), so a CUDA graph captures the call; no atomics but v's amax
// (a max, the same whatever the order), so the bytes repeat.
#include <vector>

#include "backend/cuda/context.h"
#include "ops/attention_fp8.h"
#include "ops/cuda/attention_fp8_layout.h"
#include "ops/cuda/block_sum.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/windowed_attention_tc.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::device_ptr;
using ::avdit::cuda::Elt;
using ::avdit::cuda::Fp8AttentionArgs;
using ::avdit::cuda::Fp8Block;
using ::avdit::cuda::from_e4m3;
using ::avdit::cuda::kFp8Block;
using ::avdit::cuda::to_e4m3;

constexpr float kE4m3Max = 448.f;
constexpr int kThreads = 128;

// The table of 128-row blocks from the document boundaries cu [n_docs + 1] (one thread: a few
// thousand blocks at most, once per call).
__global__ void block_table_kernel(const int32_t* cu, int n_docs, Fp8Block* blocks) {
  int b = 0;
  for (int d = 0; d < n_docs; ++d) {
    const int r0 = cu[d], n = cu[d + 1] - r0, nb = (n + kFp8Block - 1) / kFp8Block;
    for (int j = 0; j < nb; ++j, ++b)
      blocks[b] = {r0 + j * kFp8Block, min(kFp8Block, n - j * kFp8Block), b - j, nb};
  }
}

// The max over the block's kThreads threads (every thread gets it).
__device__ float block_max(float a) {
  __shared__ float scratch[kThreads / 32];
  return ::avdit::cuda::block_reduce<kThreads>(a, scratch, [](float x, float y) { return fmaxf(x, y); });
}

// s = max(amax, 2^-60) / 448 (the definition).
__device__ __forceinline__ float scale_of(float amax) { return fmaxf(amax, 0x1p-60f) / kE4m3Max; }

// 8 consecutive values of x (16-byte aligned: the caller checks) as floats.
__device__ __forceinline__ void load8(const void* x, Elt t, int64_t i, float (&v)[8]) {
  if (t == Elt::F32) {
    const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + i);
    const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + i + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    return;
  }
  const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x) + i);
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
  for (int j = 0; j < 4; ++j) {
    if (t == Elt::BF16) {
      v[2 * j] = __uint_as_float(w[j] << 16);
      v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    } else {
      v[2 * j] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[j] & 0xffff)));
      v[2 * j + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[j] >> 16)));
    }
  }
}

// The codes of 8 values (x * inv), byte 0 the first.
__device__ __forceinline__ uint2 codes8(const float (&v)[8], float inv) {
  unsigned w[2] = {0, 0};
  for (int j = 0; j < 8; ++j) w[j / 4] |= unsigned(to_e4m3(v[j] * inv)) << (8 * (j % 4));
  return make_uint2(w[0], w[1]);
}

// q or k [S, heads, D] -> codes [Lp, heads, D] with one scale per (block, head): grid (blocks,
// heads); each thread takes 8 consecutive values at a time. Padding rows get zero codes.
__global__ void quantize_blocks_kernel(const void* x, Elt xt, const Fp8Block* blocks, int64_t heads,
                                       int D, uint8_t* codes, float* scales, int64_t n_blocks) {
  const int64_t b = blockIdx.x, h = blockIdx.y;
  const Fp8Block blk = blocks[b];
  const int per_row = D / 8, n = blk.live * per_row;
  float a = 0.f, v[8];
  for (int e = threadIdx.x; e < n; e += kThreads) {
    const int r = e / per_row, c = e % per_row;
    load8(x, xt, (int64_t{blk.row0 + r} * heads + h) * D + 8 * c, v);
    for (int j = 0; j < 8; ++j) a = fmaxf(a, fabsf(v[j]));
  }
  const float s = scale_of(block_max(a)), inv = 1.f / s;
  if (threadIdx.x == 0) scales[h * n_blocks + b] = s;
  for (int e = threadIdx.x; e < kFp8Block * per_row; e += kThreads) {
    const int r = e / per_row, c = e % per_row;
    if (r < blk.live)
      load8(x, xt, (int64_t{blk.row0 + r} * heads + h) * D + 8 * c, v);
    else
      for (int j = 0; j < 8; ++j) v[j] = 0.f;
    *reinterpret_cast<uint2*>(codes + ((b * kFp8Block + r) * heads + h) * D + 8 * c) = codes8(v, inv);
  }
}

// v's amax per kv head over all rows, as float bits (non-negative floats order as unsigned ints):
// grid (ceil(S / 128), heads).
__global__ void v_amax_kernel(const void* v, Elt vt, int64_t S, int64_t heads, int D, unsigned* amax) {
  const int64_t r0 = int64_t{blockIdx.x} * kFp8Block, h = blockIdx.y;
  const int per_row = D / 8, n = static_cast<int>(min(int64_t{kFp8Block}, S - r0)) * per_row;
  float a = 0.f, x[8];
  for (int e = threadIdx.x; e < n; e += kThreads) {
    load8(v, vt, ((r0 + e / per_row) * heads + h) * D + 8 * (e % per_row), x);
    for (int j = 0; j < 8; ++j) a = fmaxf(a, fabsf(x[j]));
  }
  a = block_max(a);
  if (threadIdx.x == 0) atomicMax(amax + h, __float_as_uint(a));
}

__global__ void v_scales_kernel(const unsigned* amax, int64_t heads, float* scales) {
  for (int h = threadIdx.x; h < heads; h += blockDim.x) scales[h] = scale_of(__uint_as_float(amax[h]));
}

// v -> codes [Lp, heads, D] at its head's scale (the portable kernel's layout): grid (blocks, heads).
__global__ void quantize_v_kernel(const void* v, Elt vt, const Fp8Block* blocks, int64_t heads, int D,
                                  const float* scales, uint8_t* codes) {
  const int64_t b = blockIdx.x, h = blockIdx.y;
  const Fp8Block blk = blocks[b];
  const float inv = 1.f / scales[h];
  const int per_row = D / 8;
  float x[8];
  for (int e = threadIdx.x; e < kFp8Block * per_row; e += kThreads) {
    const int r = e / per_row, c = e % per_row;
    if (r < blk.live)
      load8(v, vt, (int64_t{blk.row0 + r} * heads + h) * D + 8 * c, x);
    else
      for (int j = 0; j < 8; ++j) x[j] = 0.f;
    *reinterpret_cast<uint2*>(codes + ((b * kFp8Block + r) * heads + h) * D + 8 * c) = codes8(x, inv);
  }
}

// v -> v^T [heads, 128, Lp] with each 32-key group permuted (the Hopper kernel's layout, D = 128):
// grid (blocks, heads), 256 threads. The block's 128 keys x 128 dims go through shared memory as
// codes [key][dim] (read 8 values a thread, coalesced), then each thread writes 16 positions of a
// dim's row.
__global__ void __launch_bounds__(256) quantize_vt_kernel(const void* v, Elt vt, const Fp8Block* blocks,
                                                          int64_t heads, int64_t Lp, const float* scales,
                                                          uint8_t* out) {
  __shared__ __align__(16) uint8_t tile[kFp8Block][128 + 16];  // padded rows
  const int64_t b = blockIdx.x, h = blockIdx.y;
  const Fp8Block blk = blocks[b];
  const float inv = 1.f / scales[h];
  float x[8];
  for (int e = threadIdx.x; e < kFp8Block * 16; e += 256) {
    const int r = e / 16, c = e % 16;
    if (r < blk.live)
      load8(v, vt, (int64_t{blk.row0 + r} * heads + h) * 128 + 8 * c, x);
    else
      for (int j = 0; j < 8; ++j) x[j] = 0.f;
    *reinterpret_cast<uint2*>(&tile[r][8 * c]) = codes8(x, inv);
  }
  __syncthreads();
  // Thread: dim d = threadIdx.x % 128, positions 64 (threadIdx.x / 128) .. + 63 of the row.
  const int d = threadIdx.x % 128, p0 = 64 * (threadIdx.x / 128);
  uint8_t* row = out + (h * 128 + d) * Lp + b * kFp8Block;
  for (int q = 0; q < 4; ++q) {
    unsigned w[4] = {0, 0, 0, 0};
    for (int j = 0; j < 16; ++j) {
      const int p = p0 + 16 * q + j;
      const int key = 32 * (p / 32) + ::avdit::cuda::fp8_vt_key(p % 32);
      w[j / 4] |= unsigned(tile[key][d]) << (8 * (j % 4));
    }
    *reinterpret_cast<uint4*>(row + p0 + 16 * q) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// The definition with the exact row max, for any head dim and GPU: one block of kThreads per
// (query row of the padded layout, head). Keys go in chunks of kThreads: each thread one key's
// logit and P (into shared memory), then each thread a dim's share of P v.
__global__ void attention_fp8_portable_kernel(Fp8AttentionArgs a) {
  extern __shared__ float sh[];  // q's decoded row [D], then P's chunk [kThreads]
  float* qrow = sh;
  float* pc = sh + a.D;
  const int64_t i = blockIdx.x, h = blockIdx.y, kvh = h / (a.Hq / a.Hkv);
  const int D = static_cast<int>(a.D), nb = static_cast<int>(a.n_blocks);
  const int b = static_cast<int>(i / kFp8Block), r = static_cast<int>(i % kFp8Block);
  const Fp8Block blk = a.blocks[b];
  if (r >= blk.live) return;
  for (int d = threadIdx.x; d < D; d += kThreads) qrow[d] = from_e4m3(a.q8[(i * a.Hq + h) * D + d]);
  __syncthreads();
  const float fq = a.scale_log2 * a.qs[h * nb + b];
  const int k0 = blk.doc_block0 * kFp8Block;
  const int n_keys = (blk.doc_blocks - 1) * kFp8Block + a.blocks[blk.doc_block0 + blk.doc_blocks - 1].live;
  auto logit = [&](int j) {  // key j of the document, base 2
    const uint8_t* kr = a.k8 + ((int64_t{k0 + j}) * a.Hkv + kvh) * D;
    float dot = 0.f;
    for (int d = 0; d < D; ++d) dot += qrow[d] * from_e4m3(kr[d]);
    return dot * (fq * a.ks[kvh * nb + blk.doc_block0 + j / kFp8Block]);
  };
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n_keys; j += kThreads) m = fmaxf(m, logit(j));
  m = block_max(m);
  float l = 0.f, acc[2] = {0.f, 0.f};  // dims threadIdx.x and threadIdx.x + kThreads (D <= 256)
  for (int j0 = 0; j0 < n_keys; j0 += kThreads) {
    const int j = j0 + threadIdx.x;
    float p = 0.f;
    if (j < n_keys) {
      p = exp2f(logit(j) - m + 8.f);
      l += p;
    }
    pc[threadIdx.x] = from_e4m3(to_e4m3(p));
    __syncthreads();
    const int n = min(kThreads, n_keys - j0);
    for (int u = 0; u < 2; ++u) {
      const int d = threadIdx.x + u * kThreads;
      if (d >= D) break;
      const uint8_t* vc = a.v8 + (int64_t{k0 + j0} * a.Hkv + kvh) * D + d;
      float s = 0.f;
      for (int jj = 0; jj < n; ++jj) s += pc[jj] * from_e4m3(vc[int64_t{jj} * a.Hkv * D]);
      acc[u] += s;
    }
    __syncthreads();
  }
  __shared__ float scratch[kThreads / 32];
  l = ::avdit::cuda::block_sum<kThreads>(l, scratch);
  const float sink_l2 = a.sinks ? a.sinks[h] * 1.4426950408889634f : -INFINITY;
  const float mf = fmaxf(m, sink_l2), e = exp2f(m - mf);
  const float inv = a.vs[kvh] * e / (l * e + 256.f * exp2f(sink_l2 - mf));
  const int64_t out0 = (int64_t{blk.row0 + r} * a.Hq + h) * D;
  for (int u = 0; u < 2; ++u) {
    const int d = threadIdx.x + u * kThreads;
    if (d < D) store_elt(a.y, a.yt, out0 + d, acc[u] * inv);
  }
}

}  // namespace

void attention_fp8(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                   const Segments& seg, const Tensor* sinks, Tensor& out) {
  check_attention_fp8(q, k, v, seg, sinks, out);
  for (const Tensor* t : {&q, &k, &v}) c.require_here(*t, "FP8 attention q/k/v");
  if (sinks) c.require_here(*sinks, "FP8 attention sinks");
  c.require_here(out, "FP8 attention output");
  const int64_t S = q.size(0), Hq = q.size(1), Hkv = k.size(1), D = q.size(2);
  if (S == 0) return;
  AVDIT_REQUIRE(seg.cu_ctx.defined(), "FP8 attention: segments not planned on this CUDA context");
  const std::vector<int64_t> cu = seg.cu.empty() ? std::vector<int64_t>{0, S} : seg.cu;
  int64_t n_blocks = 0;
  for (size_t d = 0; d + 1 < cu.size(); ++d) n_blocks += (cu[d + 1] - cu[d] + kFp8Block - 1) / kFp8Block;
  AVDIT_REQUIRE(S <= 0x7fffffff - kFp8Block && n_blocks <= 0x7fffffff / kFp8Block && Hq <= 65535,
                "FP8 attention: {} rows, {} heads exceed the kernels' int indices", S, Hq);
  const int64_t Lp = n_blocks * kFp8Block;
  const cudaStream_t st = c.stream();
  Tensor table = c.empty({n_blocks * static_cast<int64_t>(sizeof(Fp8Block))}, DType::U8);
  auto* blocks = static_cast<Fp8Block*>(device_ptr(table));
  block_table_kernel<<<1, 1, 0, st>>>(static_cast<const int32_t*>(seg.cu_ctx.raw()),
                                      static_cast<int>(cu.size() - 1), blocks);
  AVDIT_CUDA_CHECK_LAUNCH();

  const bool hopper = ::avdit::cuda::windowed_attention_tc_device(c.dev().props()) && D == 128;
  Tensor q8 = c.empty({Lp, Hq, D}, DType::U8), k8 = c.empty({Lp, Hkv, D}, DType::U8),
         v8 = c.empty({Lp * Hkv * D}, DType::U8);
  Tensor scales = c.empty({(Hq + Hkv) * n_blocks + 2 * Hkv}, DType::F32);
  float* qs = static_cast<float*>(device_ptr(scales));
  float* ks = qs + Hq * n_blocks;
  float* vs = ks + Hkv * n_blocks;
  auto* vamax = reinterpret_cast<unsigned*>(vs + Hkv);
  // The quantize pass reads 8 values at a time: rows start 16-byte aligned (D a multiple of 16).
  for (const Tensor* t : {&q, &k, &v})
    AVDIT_REQUIRE(reinterpret_cast<uintptr_t>(t->raw()) % 16 == 0,
                  "FP8 attention: q, k, v must start 16-byte aligned (a fresh or row-sliced tensor is)");
  const Elt qt = ::avdit::cuda::elt_of(q, "FP8 attention q"), kt = ::avdit::cuda::elt_of(k, "FP8 attention k"),
            vt = ::avdit::cuda::elt_of(v, "FP8 attention v");
  const int d = static_cast<int>(D);
  quantize_blocks_kernel<<<dim3(unsigned(n_blocks), unsigned(Hq)), kThreads, 0, st>>>(
      q.raw(), qt, blocks, Hq, d, static_cast<uint8_t*>(device_ptr(q8)), qs, n_blocks);
  AVDIT_CUDA_CHECK_LAUNCH();
  quantize_blocks_kernel<<<dim3(unsigned(n_blocks), unsigned(Hkv)), kThreads, 0, st>>>(
      k.raw(), kt, blocks, Hkv, d, static_cast<uint8_t*>(device_ptr(k8)), ks, n_blocks);
  AVDIT_CUDA_CHECK_LAUNCH();
  AVDIT_CUDA_CHECK(cudaMemsetAsync(vamax, 0, sizeof(unsigned) * Hkv, st));
  v_amax_kernel<<<dim3(unsigned((S + kFp8Block - 1) / kFp8Block), unsigned(Hkv)), kThreads, 0, st>>>(
      v.raw(), vt, S, Hkv, d, vamax);
  AVDIT_CUDA_CHECK_LAUNCH();
  v_scales_kernel<<<1, 32, 0, st>>>(vamax, Hkv, vs);
  AVDIT_CUDA_CHECK_LAUNCH();
  uint8_t* v8p = static_cast<uint8_t*>(device_ptr(v8));
  if (hopper)
    quantize_vt_kernel<<<dim3(unsigned(n_blocks), unsigned(Hkv)), 256, 0, st>>>(v.raw(), vt, blocks, Hkv, Lp, vs, v8p);
  else
    quantize_v_kernel<<<dim3(unsigned(n_blocks), unsigned(Hkv)), kThreads, 0, st>>>(v.raw(), vt, blocks, Hkv, d, vs, v8p);
  AVDIT_CUDA_CHECK_LAUNCH();

  Fp8AttentionArgs a{};
  a.q8 = static_cast<const uint8_t*>(device_ptr(q8));
  a.k8 = static_cast<const uint8_t*>(device_ptr(k8));
  a.v8 = v8p;
  a.blocks = blocks;
  a.qs = qs;
  a.ks = ks;
  a.vs = vs;
  a.sinks = sinks ? static_cast<const float*>(sinks->raw()) : nullptr;
  a.n_blocks = n_blocks;
  a.Hq = Hq;
  a.Hkv = Hkv;
  a.D = D;
  a.scale_log2 = scale * 1.4426950408889634f;
  a.y = device_ptr(out);
  a.yt = ::avdit::cuda::elt_of(out, "FP8 attention output");
  if (hopper) {
    ::avdit::cuda::attention_fp8_tc(st, a);
  } else {
    const size_t smem = sizeof(float) * static_cast<size_t>(D + kThreads);
    attention_fp8_portable_kernel<<<dim3(unsigned(Lp), unsigned(Hq)), kThreads, smem, st>>>(a);
    AVDIT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace avdit::ops::cuda
