// MAGI-2's mHC coefficient logits on the tensor cores: the study of ops::mhc_logits' CUDA kernel for
// the preview's case, which now lives in src/ops/cuda/mhc_logits_tc.cu (the SIMT kernel in
// src/ops/cuda/mhc.cu takes the other cases: 4.04 ms per call at the preview step's 117,188 tokens
// against 0.69 ms of traffic; bench/notes/step.md).
//
//   h[l, c] = rsqrt(mean_k s[l, k]^2 + eps) * sum_k s[l, k] * g[grp(l), k] * phi[k, c]
//
// s is bf16, so it is exact as the A operand of mma.m16n8k16. The per-group weight folds into phi
// (v = g * phi, fp32), and v is split into three bf16 terms hi + mid + lo that carry its 24 bits;
// the three products accumulate in fp32 on the tensor cores (checked against float64 below: the
// MMA's accumulation truncates, and over K = 12,288 in one accumulator the src op test measured
// NMSE 1.6e-9 against the CPU; src adds each 64-k chunk's sums in rounded fp32, 3.7e-13). A warp owns 16 rows and reads each row 128 bytes at a time
// (four k16 steps); a tile whose rows span two groups repeats the K loop per group present. The
// sum of squares comes from the same A fragments.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a dev/cuda/mhc_logits_tc.cu -o /tmp/mhc
//   /tmp/mhc [tokens]     (default 117188: the MAGI-2 preview step at 896x512, 10 s, cond + uncond)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

constexpr int kC = 24;            // 2n + n^2 for the preview's 4 streams
constexpr int kNT = kC / 8;       // n8 tiles
constexpr int kSplit = 3;         // bf16 terms of each fp32 weight
constexpr int kWarps = 4;         // 16 rows each
constexpr int kKC = 64;           // k per staged chunk of B (and per A load: 128 bytes a row)
constexpr int kBRow = kKC + 8;    // padded smem row of B^T (bank-conflict-free 32-bit reads)

// B^T [G][split][c][k] bf16 from w [G, K] (1 + w when one_plus) and phi [K, C] fp32.
__global__ void split_weights(const float* w, int G, int K, bool one_plus, const float* phi,
                              __nv_bfloat16* bt) {
  const int64_t n = int64_t{G} * K * kC;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int g = static_cast<int>(i / (int64_t{K} * kC));
    const int k = static_cast<int>((i / kC) % K), c = static_cast<int>(i % kC);
    const float gk = w ? (one_plus ? 1.f + w[int64_t{g} * K + k] : w[int64_t{g} * K + k]) : 1.f;
    const float v = gk * phi[int64_t{k} * kC + c];
    const __nv_bfloat16 hi = __float2bfloat16_rn(v);
    const float r1 = v - __bfloat162float(hi);
    const __nv_bfloat16 mid = __float2bfloat16_rn(r1);
    const __nv_bfloat16 lo = __float2bfloat16_rn(r1 - __bfloat162float(mid));
    const __nv_bfloat16 parts[kSplit] = {hi, mid, lo};
    for (int p = 0; p < kSplit; ++p)
      bt[((int64_t{g} * kSplit + p) * kC + c) * K + k] = parts[p];
  }
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float sq2(uint32_t v) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  return f.x * f.x + f.y * f.y;
}

// Rows [16 w, 16 w + 16) of the block's 64 per warp w. B^T chunks of every group staged per
// kKC; a warp whose rows hold several groups runs the K loop once per group (rare: a boundary).
__global__ void __launch_bounds__(kWarps * 32)
    logits_tc(const __nv_bfloat16* __restrict__ s, int64_t L, int K, const int* __restrict__ group,
              int G, const __nv_bfloat16* __restrict__ bt, float eps, float* __restrict__ out) {
  __shared__ __align__(16) __nv_bfloat16 sb[kSplit * kC * kBRow];  // one group's chunk
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int qr = lane / 4, qc = (lane % 4) * 2;  // fragment row / column pair
  const int64_t row0 = (int64_t{blockIdx.x} * kWarps + warp) * 16;
  const int64_t r_lo = row0 + qr, r_hi = row0 + qr + 8;
  const int g_lo = r_lo < L && group ? group[r_lo] : 0, g_hi = r_hi < L && group ? group[r_hi] : 0;
  // Groups present in this warp's tile (bit mask).
  unsigned present = __reduce_or_sync(0xffffffffu, (1u << g_lo) | (1u << g_hi));
  float acc_lo[kNT][2] = {}, acc_hi[kNT][2] = {};
  float ss_lo = 0.f, ss_hi = 0.f;
  const __nv_bfloat16* s_lo = s + (r_lo < L ? r_lo : L - 1) * K;
  const __nv_bfloat16* s_hi = s + (r_hi < L ? r_hi : L - 1) * K;
  bool first_pass = true;
  for (int g = 0; g < G; ++g) {
    // Every warp takes part in staging (barriers); a warp without group g skips the math, and a
    // block without it skips the group.
    const bool mine = present >> g & 1u;
    if (!__syncthreads_or(mine)) continue;
    float d[kNT][4] = {};
    for (int k0 = 0; k0 < K; k0 += kKC) {
      __syncthreads();
      for (int i = threadIdx.x; i < kSplit * kC * (kKC / 8); i += kWarps * 32) {
        const int row = i / (kKC / 8), ch = i % (kKC / 8);  // row = split * kC + c
        *reinterpret_cast<uint4*>(sb + row * kBRow + ch * 8) =
            *reinterpret_cast<const uint4*>(bt + (int64_t{g} * kSplit * kC + row) * K + k0 + ch * 8);
      }
      __syncthreads();
      if (!mine) continue;
      // A: 16 rows x 64 k as four k16 fragments (each lane: rows qr, qr + 8; k pairs qc, qc + 8).
      uint32_t a[kKC / 16][4];
#pragma unroll
      for (int t = 0; t < kKC / 16; ++t) {
        const int k = k0 + t * 16 + qc;
        a[t][0] = *reinterpret_cast<const uint32_t*>(s_lo + k);
        a[t][1] = *reinterpret_cast<const uint32_t*>(s_hi + k);
        a[t][2] = *reinterpret_cast<const uint32_t*>(s_lo + k + 8);
        a[t][3] = *reinterpret_cast<const uint32_t*>(s_hi + k + 8);
      }
      if (first_pass) {
#pragma unroll
        for (int t = 0; t < kKC / 16; ++t) {
          ss_lo += sq2(a[t][0]) + sq2(a[t][2]);
          ss_hi += sq2(a[t][1]) + sq2(a[t][3]);
        }
      }
#pragma unroll
      for (int t = 0; t < kKC / 16; ++t)
#pragma unroll
        for (int p = 0; p < kSplit; ++p)
#pragma unroll
          for (int n = 0; n < kNT; ++n) {
            // B fragment: column (n8 tile n, lane / 4), k pairs (lane % 4) * 2 and + 8.
            const __nv_bfloat16* b = sb + (p * kC + n * 8 + qr) * kBRow + t * 16 + qc;
            mma_bf16(d[n], a[t], *reinterpret_cast<const uint32_t*>(b),
                     *reinterpret_cast<const uint32_t*>(b + 8));
          }
    }
    if (!mine) continue;
    first_pass = false;
    // C fragment: d[n][0..1] row qr, columns n * 8 + qc, + 1; d[n][2..3] row qr + 8.
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
      if (g_lo == g) acc_lo[n][0] = d[n][0], acc_lo[n][1] = d[n][1];
      if (g_hi == g) acc_hi[n][0] = d[n][2], acc_hi[n][1] = d[n][3];
    }
  }
  // Row sums of squares: the quad's four lanes hold a row's columns between them.
  for (int o = 1; o < 4; o <<= 1) {
    ss_lo += __shfl_xor_sync(0xffffffffu, ss_lo, o);
    ss_hi += __shfl_xor_sync(0xffffffffu, ss_hi, o);
  }
  const float inv_lo = rsqrtf(ss_lo / K + eps), inv_hi = rsqrtf(ss_hi / K + eps);
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
    const int c = n * 8 + qc;
    if (r_lo < L) {
      out[r_lo * kC + c] = acc_lo[n][0] * inv_lo;
      out[r_lo * kC + c + 1] = acc_lo[n][1] * inv_lo;
    }
    if (r_hi < L) {
      out[r_hi * kC + c] = acc_hi[n][0] * inv_hi;
      out[r_hi * kC + c + 1] = acc_hi[n][1] * inv_hi;
    }
  }
}

float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t L = argc > 1 ? std::atoll(argv[1]) : 117188;
  const int K = 4 * 3072, G = 3;
  const float eps = 1e-6f;
  std::printf("mHC logits on the tensor cores: L %lld, K %d, C %d, %d groups\n",
              static_cast<long long>(L), K, kC, G);
  // Inputs: s ~ N(0, 1.5) in bf16; groups in three contiguous ranges (video, audio, text) with a
  // boundary inside a warp tile; w ~ N(0, 0.2) (one_plus), phi ~ N(0, 0.05).
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> s(static_cast<size_t>(L) * K);
  for (auto& v : s) {
    const __nv_bfloat16 b = __float2bfloat16_rn(1.5f * nd(rng));
    std::memcpy(&v, &b, 2);
  }
  std::vector<int> group(L);
  const int64_t b1 = L * 97 / 100 + 5, b2 = L - 1000 + 3;
  for (int64_t l = 0; l < L; ++l) group[l] = l < b1 ? 0 : l < b2 ? 1 : 2;
  std::vector<float> w(int64_t{G} * K), phi(int64_t{K} * kC);
  for (auto& v : w) v = 0.2f * nd(rng);
  for (auto& v : phi) v = 0.05f * nd(rng);

  __nv_bfloat16 *ds, *dbt;
  int* dg;
  float *dw, *dphi, *dout;
  CHECK(cudaMalloc(&ds, s.size() * 2));
  CHECK(cudaMalloc(&dbt, int64_t{G} * kSplit * kC * K * 2));
  CHECK(cudaMalloc(&dg, L * 4));
  CHECK(cudaMalloc(&dw, w.size() * 4));
  CHECK(cudaMalloc(&dphi, phi.size() * 4));
  CHECK(cudaMalloc(&dout, L * kC * 4));
  CHECK(cudaMemcpy(ds, s.data(), s.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dg, group.data(), L * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dphi, phi.data(), phi.size() * 4, cudaMemcpyHostToDevice));

  const unsigned blocks = static_cast<unsigned>((L + kWarps * 16 - 1) / (kWarps * 16));
  auto run = [&] {
    split_weights<<<1024, 256>>>(dw, G, K, true, dphi, dbt);
    logits_tc<<<blocks, kWarps * 32>>>(ds, L, K, dg, G, dbt, eps, dout);
  };
  run();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> out(L * kC);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));

  // float64 reference on sampled rows: both group boundaries, the ends, random rows.
  std::vector<int64_t> rows = {0, 1, 15, 16, b1 - 9, b1 - 1, b1, b1 + 1, b2 - 1, b2, L - 2, L - 1};
  for (int i = 0; i < 52; ++i) rows.push_back(static_cast<int64_t>(rng() % L));
  double worst = 0, scale = 0;
  for (int64_t l : rows) {
    double ss = 0;
    std::vector<double> h(kC, 0.0);
    for (int k = 0; k < K; ++k) {
      const double x = bf16_to_float(s[l * K + k]);
      ss += x * x;
      const double gk = 1.0 + w[int64_t{group[l]} * K + k];
      for (int c = 0; c < kC; ++c) h[c] += x * gk * phi[int64_t{k} * kC + c];
    }
    const double inv = 1.0 / std::sqrt(ss / K + eps);
    for (int c = 0; c < kC; ++c) {
      worst = std::max(worst, std::fabs(out[l * kC + c] - h[c] * inv));
      scale = std::max(scale, std::fabs(h[c] * inv));
    }
  }
  std::printf("max |gpu - float64| %.3e of max |h| %.3e (relative %.2e) over %zu rows\n", worst,
              scale, worst / scale, rows.size());

  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int iters = 20;
  CHECK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) logits_tc<<<blocks, kWarps * 32>>>(ds, L, K, dg, G, dbt, eps, dout);
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  ms /= iters;
  CHECK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) split_weights<<<1024, 256>>>(dw, G, K, true, dphi, dbt);
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float split_ms = 0;
  CHECK(cudaEventElapsedTime(&split_ms, e0, e1));
  const double bytes = double(L) * K * 2;
  std::printf("logits %.3f ms (%.0f GB/s of s), weight split %.3f ms\n", ms, bytes / ms / 1e6,
              split_ms / iters);
  return worst / scale < 1e-5 ? 0 : 1;
}
