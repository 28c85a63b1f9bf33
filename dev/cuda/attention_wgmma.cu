// Dense attention forward on Hopper's wgmma, the first step of issue 41's FA3-style kernel (and of
// issue 36's windowed one, whose key loop would walk a segment's ranges instead of [0, S)). Not
// yet the FA3 arrangement: no TMA and no producer warp group; all 256 threads (two consumer warp
// groups of 64 query rows) load K and V^T tiles with cp.async into 128-byte-swizzled K-major
// shared tiles, then each warp group runs S = Q K^T as 8 wgmma m64n128k16 (both operands from
// shared memory), the online softmax on the accumulators (exp2 domain), and O += P V^T as 8 wgmma
// with P from registers (the accumulator pairs are the A fragment, as in FA2). V is transposed
// once per call (V^T [Hkv, 128, S]) so that both GEMMs read K-major B tiles and no transposed
// operand mode is needed. Two K/V stages. bf16 in, fp32 softmax and accumulation, bf16 out.
//   nvcc -O3 -std=c++17 -Isrc -gencode=arch=compute_90a,code=sm_90a dev/cuda/attention_wgmma.cu -o /tmp/awg
//   /tmp/awg [S] [heads] [kv heads]     (default 16384 24 24; S a multiple of 128)
// Prints max |gpu - float64| / max |ref| on sampled rows and the TFLOP/s (4 S^2 H D).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "attention_study.cuh"  // CHECK
#include "ops/cuda/mma_sm80.cuh"
#include "ops/cuda/sm90/wgmma_attention.cuh"

namespace {

using namespace avdit::cuda;        // smem_u32, cp.async, pack_bf16x2
using namespace avdit::cuda::sm90;  // the wgmma pieces

constexpr int kD = 128;        // head dim
constexpr int kBM = 128;       // query rows per block: two warp groups of 64
constexpr int kBN = 128;       // keys per step
constexpr int kThreads = 256;
constexpr int kTileBytes = 128 * kD * 2;                           // one [128][128] bf16 tile
constexpr size_t kSmemBytes = kTileBytes * (1 + 2 * 2) + 1024;     // Q + 2 stages x (K, V^T) + align

// cp.async writes are generic-proxy writes; wgmma reads shared memory through the async proxy.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A [R][128] bf16 tile, K-major with the 128-byte swizzle: two halves of 64 columns (128 bytes a
// row), half h at h * R * 128 bytes; 16-byte chunk c of row r at chunk c ^ (r % 8) of its row, so
// 8-row atoms of 1,024 bytes (the tile base 1,024-byte aligned).
template <int R>
__device__ __forceinline__ unsigned tile_off(int r, int c) {
  return static_cast<unsigned>((c >> 3) * R * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Rows [row0, row0 + R) of a row-major bf16 matrix (row stride in elements), 128 columns from col0.
template <int R>
__device__ __forceinline__ void load_tile(unsigned base, const __nv_bfloat16* g, int64_t stride,
                                          int64_t row0, int64_t col0) {
#pragma unroll
  for (int i = 0; i < R * 16 / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / 16, c = idx % 16;
    cp_async16(base + tile_off<R>(r, c), g + (row0 + r) * stride + col0 + c * 8);
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    attention_wgmma_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                           const __nv_bfloat16* __restrict__ vt, __nv_bfloat16* __restrict__ out,
                           int S, int H, int Hkv, float scale_log2) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned Qs = base, Ks = base + kTileBytes, Vs = base + 3 * kTileBytes;  // 2 stages each
  const int wg = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t q0 = int64_t{blockIdx.x} * kBM;
  const int h = blockIdx.y, kvh = h / (H / Hkv);
  const __nv_bfloat16* kh = k + int64_t{kvh} * kD;          // rows: keys, stride Hkv * D
  const __nv_bfloat16* vh = vt + int64_t{kvh} * kD * S;     // rows: dims, stride S
  load_tile<kBM>(Qs, q + int64_t{h} * kD, int64_t{H} * kD, q0, 0);
  load_tile<kBN>(Ks, kh, int64_t{Hkv} * kD, 0, 0);
  load_tile<kD>(Vs, vh, S, 0, 0);
  cp_async_commit();

  float o[64], s[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = s[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int n_tiles = S / kBN;
  for (int it = 0; it < n_tiles; ++it) {
    const int stage = it & 1;
    if (it + 1 < n_tiles) {
      load_tile<kBN>(Ks + (stage ^ 1) * kTileBytes, kh, int64_t{Hkv} * kD, int64_t{it + 1} * kBN, 0);
      load_tile<kD>(Vs + (stage ^ 1) * kTileBytes, vh, S, 0, int64_t{it + 1} * kBN);
      cp_async_commit();
      cp_async_wait_group<1>();
    } else {
      cp_async_wait_group<0>();
    }
    fence_proxy_async();
    __syncthreads();
    const unsigned Kt = Ks + stage * kTileBytes, Vt = Vs + stage * kTileBytes;

    // S = Q K^T: this warp group's 64 rows x 128 keys.
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
      wgmma_m64n128k16_ss(s, desc_k_major<kBM>(Qs, wg * 64, kk), desc_k_major<kBN>(Kt, 0, kk), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(s);

    // Online softmax: this thread's rows g and g + 8 of its warp's 16; s[4j + e]: n-block j (keys
    // 8j + 2t, +1), e >> 1 selects the row.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      s[i] *= scale_log2;
      mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
    }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);
      corr[r] = exp2f(m[r] - m_new);
      m[r] = m_new;
      l[r] *= corr[r];
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int r = (i >> 1) & 1;
      s[i] = exp2f(s[i] - m[r]);
      l[r] += s[i];
      o[i] *= corr[r];
    }
    // O += P V^T: k-step kk covers keys 16kk .. 16kk + 15, n-blocks 2kk and 2kk + 1 of s.
    unsigned pa[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      pa[kk][0] = pack_bf16x2(s[8 * kk + 0], s[8 * kk + 1]);
      pa[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) wgmma_m64n128k16_rs<0>(o, pa[kk], desc_k_major<kD>(Vt, 0, kk));
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(o);
    __syncthreads();  // the next step's prefetch overwrites this stage
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = q0 + wg * 64 + warp * 16 + g + 8 * r;
    const float inv = 1.f / l[r];
    __nv_bfloat16* dst = out + (row * H + h) * kD + 2 * t;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j) =
          __floats2bfloat162_rn(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
  }
}

// V [S, Hkv, 128] -> V^T [Hkv, 128, S] through 32 x 32 shared tiles.
__global__ void transpose_v(const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ vt, int S,
                            int Hkv) {
  __shared__ __nv_bfloat16 tile[32][33];
  const int s0 = blockIdx.x * 32, d0 = blockIdx.y * 32, hk = blockIdx.z;
  for (int i = threadIdx.y; i < 32; i += 8)
    tile[i][threadIdx.x] = v[(int64_t(s0 + i) * Hkv + hk) * kD + d0 + threadIdx.x];
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8)
    vt[(int64_t(hk) * kD + d0 + i) * S + s0 + threadIdx.x] = tile[threadIdx.x][i];
}

}  // namespace

int main(int argc, char** argv) {
  const int S = argc > 1 ? std::atoi(argv[1]) : 16384, H = argc > 2 ? std::atoi(argv[2]) : 24,
            Hkv = argc > 3 ? std::atoi(argv[3]) : H;
  if (S % kBM != 0 || H % Hkv != 0) {
    std::fprintf(stderr, "S must be a multiple of %d and H of Hkv\n", kBM);
    return 2;
  }
  const size_t nq = size_t(S) * H * kD, nk = size_t(S) * Hkv * kD;
  std::vector<__nv_bfloat16> hq(nq), hk(nk), hv(nk), ho(nq);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : hq) x = __float2bfloat16(nd(rng));
  for (auto& x : hk) x = __float2bfloat16(nd(rng));
  for (auto& x : hv) x = __float2bfloat16(nd(rng));
  __nv_bfloat16 *q, *k, *v, *vt, *o;
  CHECK(cudaMalloc(&q, nq * 2));
  CHECK(cudaMalloc(&k, nk * 2));
  CHECK(cudaMalloc(&v, nk * 2));
  CHECK(cudaMalloc(&vt, nk * 2));
  CHECK(cudaMalloc(&o, nq * 2));
  CHECK(cudaMemcpy(q, hq.data(), nq * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(k, hk.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(v, hv.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK(cudaFuncSetAttribute(attention_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)));
  const float scale = 1.f / std::sqrt(float(kD));
  auto run = [&] {
    transpose_v<<<dim3(S / 32, kD / 32, Hkv), dim3(32, 8)>>>(v, vt, S, Hkv);
    attention_wgmma_kernel<<<dim3(S / kBM, H), kThreads, kSmemBytes>>>(q, k, vt, o, S, H, Hkv,
                                                                       scale * 1.4426950408889634f);
  };
  run();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(ho.data(), o, nq * 2, cudaMemcpyDeviceToHost));
  double worst = 0, ref_max = 0;
  for (int sample = 0; sample < 16; ++sample) {
    const int64_t r = (int64_t(sample) * 7919 + 13) % S, h = sample % H, kh = h / (H / Hkv);
    std::vector<double> lg(S);
    double mx = -1e300;
    for (int64_t j = 0; j < S; ++j) {
      double dot = 0;
      for (int d = 0; d < kD; ++d)
        dot += double(__bfloat162float(hq[(r * H + h) * kD + d])) *
               __bfloat162float(hk[(j * Hkv + kh) * kD + d]);
      lg[j] = dot * scale;
      mx = std::max(mx, lg[j]);
    }
    double den = 0;
    for (double x : lg) den += std::exp(x - mx);
    for (int d = 0; d < kD; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < S; ++j)
        acc += std::exp(lg[j] - mx) / den * __bfloat162float(hv[(j * Hkv + kh) * kD + d]);
      worst = std::max(worst, std::fabs(acc - __bfloat162float(ho[(r * H + h) * kD + d])));
      ref_max = std::max(ref_max, std::fabs(acc));
    }
  }
  std::printf("check: max |gpu - float64| / max |ref| = %.3e over 16 sampled rows (bf16 out: ~4e-3)\n",
              worst / ref_max);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int iters = 10;
  CHECK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) run();
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  ms /= iters;
  const double flop = 4.0 * double(S) * S * H * kD;
  std::printf("S %d heads %d/%d D 128: %.3f ms (V transpose included), %.0f TFLOP/s\n", S, H, Hkv, ms,
              flop / (ms * 1e-3) / 1e12);
  return worst / ref_max < 2e-2 ? 0 : 1;
}
