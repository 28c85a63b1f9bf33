// Flash attention for H3 (bf16, head dim 128, bidirectional inside cu_seqlens documents) on the
// tensor cores with mma.sync m16n8k16, in the FlashAttention-2 arrangement: a block of 4 warps owns
// 64 query rows of one head (16 per warp, Q fragments in registers), walks the key tiles of the
// documents its rows belong to (64 keys per step, K/V double-buffered in shared memory with
// cp.async), keeps the online-softmax state in fp32 registers and feeds P to the PV product
// straight from the score accumulators (their layout equals the A-operand layout).
//
// Documents are found on the device by binary search on cu_seqlens; rows of one tile may belong
// to two documents (a tile straddling used_len), so every score is masked against its row's own
// document range. No host loop over documents, no synchronisation.
//
// Kept for study (issue 41 starts from it or starts over): the H3 forward used it until the op set
// replaced it with cuDNN's SDPA, which bench/notes/flash_attention_sm90.md compares it with.
// Self-contained: the kernel, a float64 reference on sampled rows, and timing.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a dev/cuda/flash_attention_sm90.cu -o /tmp/flash
//   /tmp/flash [S] [heads]      (default 19456 56: the H3 shape at 19,456 rows)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "attention_study.cuh"  // CHECK

namespace flash {
namespace {

constexpr int kD = 128;        // head dim
constexpr int kBM = 64;        // query rows per block
constexpr int kBN = 64;        // keys per step
constexpr int kThreads = 128;  // 4 warps x 16 rows
constexpr int kTileElems = kBM * kD;
constexpr size_t kSmemBytes = (kTileElems + 4 * kBN * kD) * sizeof(__nv_bfloat16);  // Q + 2 x (K, V)

// Element offset of (row, 16-byte chunk) in a [rows, 128] bf16 tile: chunks are XOR-swizzled by
// row & 7 so that the 8 row addresses of one ldmatrix hit 8 different bank groups.
__device__ __forceinline__ int swz(int row, int chunk) { return row * kD + ((chunk ^ (row & 7)) << 3); }

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c[16x8] += a[16x16] b[16x8], bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Index i of the document [cu[i], cu[i+1]) holding row s (the last i with cu[i] <= s).
__device__ __forceinline__ int doc_of(const int* cu, int n_cu, int s) {
  int lo = 0, hi = n_cu - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu[mid] <= s) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Copies rows [first, first + 64) of one head into a swizzled tile; rows past `last` repeat row
// `last` (finite values that the mask then drops).
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* g, int64_t row_stride,
                                          int first, int last) {
#pragma unroll
  for (int i = 0; i < kBM * 16 / kThreads; ++i) {
    const int c = threadIdx.x + i * kThreads, row = c / 16, ch = c % 16;
    const int src = min(first + row, last);
    cp_async16(tile + swz(row, ch), g + src * row_stride + ch * 8);
  }
}

__global__ void __launch_bounds__(kThreads) flash_kernel(const __nv_bfloat16* __restrict__ q,
                                                         const __nv_bfloat16* __restrict__ k,
                                                         const __nv_bfloat16* __restrict__ v,
                                                         __nv_bfloat16* __restrict__ out, const int* __restrict__ cu,
                                                         int n_cu, int S, int heads, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* Ks = Qs + kTileElems;        // 2 stages
  __nv_bfloat16* Vs = Ks + 2 * kBN * kD;      // 2 stages
  const int q0 = blockIdx.x * kBM, h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row_stride = static_cast<int64_t>(heads) * kD;
  const __nv_bfloat16* qh = q + h * kD;
  const __nv_bfloat16* kh = k + h * kD;
  const __nv_bfloat16* vh = v + h * kD;

  // Key range of the tile: from the first row's document start to the last row's document end.
  const int last_row = min(q0 + kBM - 1, S - 1);
  const int kv_begin = cu[doc_of(cu, n_cu, q0)];
  const int kv_end = cu[doc_of(cu, n_cu, last_row) + 1];
  // This thread's two rows (fragment rows lane/4 and lane/4 + 8 of its warp) and their documents.
  int rb[2], re[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = q0 + warp * 16 + lane / 4 + 8 * e;
    if (r < S) {
      const int d = doc_of(cu, n_cu, r);
      rb[e] = cu[d];
      re[e] = cu[d + 1];
    } else {
      rb[e] = re[e] = 0;  // padding row: everything masked, output not written
    }
  }

  load_tile(Qs, qh, row_stride, q0, S - 1);
  const int n_tiles = (kv_end - kv_begin + kBN - 1) / kBN;
  if (n_tiles > 0) {
    load_tile(Ks, kh, row_stride, kv_begin, kv_end - 1);
    load_tile(Vs, vh, row_stride, kv_begin, kv_end - 1);
  }
  cp_commit();
  cp_wait<0>();
  __syncthreads();

  uint32_t qf[8][4];
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) ldsm_x4(qf[ks], Qs + swz(warp * 16 + lane % 16, 2 * ks + lane / 16));

  float o[16][4];
#pragma unroll
  for (int i = 0; i < 16; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int it = 0; it < n_tiles; ++it) {
    const int stage = it & 1;
    if (it + 1 < n_tiles) {  // prefetch the next key tile into the other stage
      const int nb = kv_begin + (it + 1) * kBN;
      load_tile(Ks + (stage ^ 1) * kBN * kD, kh, row_stride, nb, kv_end - 1);
      load_tile(Vs + (stage ^ 1) * kBN * kD, vh, row_stride, nb, kv_end - 1);
      cp_commit();
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncthreads();
    const __nv_bfloat16* Kt = Ks + stage * kBN * kD;
    const __nv_bfloat16* Vt = Vs + stage * kBN * kD;

    // S = Q K^T for 16 rows x 64 keys per warp.
    float sc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        uint32_t b[4];
        ldsm_x4(b, Kt + swz(j * 8 + lane % 8, 4 * p + lane / 8));
        mma(sc[j], qf[2 * p], b[0], b[1]);
        mma(sc[j], qf[2 * p + 1], b[2], b[3]);
      }
    }
    // Mask to each row's document, scale into the exp2 domain, row max over the quad.
    const int kb = kv_begin + it * kBN;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kb + j * 8 + (lane % 4) * 2 + (e & 1);
        const int r = e >> 1;
        const float s = (key >= rb[r] && key < re[r]) ? sc[j][e] * scale_log2 : -INFINITY;
        sc[j][e] = s;
        mx[r] = fmaxf(mx[r], s);
      }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing live yet
      corr[r] = exp2f(m[r] - m_use);
      m[r] = m_new;
      mx[r] = m_use;
      l[r] *= corr[r];
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(sc[j][e] - mx[e >> 1]);
        sc[j][e] = p;
        l[e >> 1] += p;
      }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      o[i][0] *= corr[0];
      o[i][1] *= corr[0];
      o[i][2] *= corr[1];
      o[i][3] *= corr[1];
    }
    // O += P V: P's accumulator pairs (n-tiles 2kk, 2kk+1) are the A fragment of keys 16kk..16kk+15.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t a[4] = {pack_bf16(sc[2 * kk][0], sc[2 * kk][1]), pack_bf16(sc[2 * kk][2], sc[2 * kk][3]),
                             pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                             pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < 8; ++np) {
        uint32_t b[4];
        const int mi = lane / 8;
        ldsm_x4_t(b, Vt + swz(16 * kk + (mi % 2) * 8 + lane % 8, 2 * np + mi / 2));
        mma(o[2 * np], a, b[0], b[1]);
        mma(o[2 * np + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this stage
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = q0 + warp * 16 + lane / 4 + 8 * e;
    if (r >= S) continue;
    const float inv = l[e] > 0.f ? 1.f / l[e] : 0.f;
    __nv_bfloat16* dst = out + r * row_stride + h * kD + (lane % 4) * 2;
#pragma unroll
    for (int i = 0; i < 16; ++i)
      *reinterpret_cast<__nv_bfloat162*>(dst + i * 8) =
          __floats2bfloat162_rn(o[i][2 * e] * inv, o[i][2 * e + 1] * inv);
  }
}

}  // namespace

void flash_attention_bf16(cudaStream_t st, const void* q, const void* k, const void* v, void* out, const int* cu,
                          int64_t n_cu, int64_t S, int64_t heads, float scale) {
  if (S == 0 || heads == 0) return;
  static bool configured = false;
  if (!configured) {
    cudaFuncSetAttribute(flash_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
    configured = true;
  }
  const dim3 grid(static_cast<unsigned>((S + kBM - 1) / kBM), static_cast<unsigned>(heads));
  flash_kernel<<<grid, kThreads, kSmemBytes, st>>>(
      static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k), static_cast<const __nv_bfloat16*>(v),
      static_cast<__nv_bfloat16*>(out), cu, static_cast<int>(n_cu), static_cast<int>(S), static_cast<int>(heads),
      scale * 1.4426950408889634f);
}

}  // namespace flash

int main(int argc, char** argv) {
  const int64_t S = argc > 1 ? std::atoll(argv[1]) : 19456, H = argc > 2 ? std::atoll(argv[2]) : 56, D = 128;
  // Two documents whose boundary falls inside a 64-row tile (the H3 packing: live rows, then pad rows).
  const std::vector<int> cu = {0, static_cast<int>(S - 37), static_cast<int>(S)};
  const size_t n = static_cast<size_t>(S * H * D);
  std::vector<__nv_bfloat16> hq(n), hk(n), hv(n), ho(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (size_t i = 0; i < n; ++i) {
    hq[i] = __float2bfloat16(nd(rng));
    hk[i] = __float2bfloat16(nd(rng));
    hv[i] = __float2bfloat16(nd(rng));
  }
  __nv_bfloat16 *q, *k, *v, *o;
  int* dcu;
  CHECK(cudaMalloc(&q, n * 2));
  CHECK(cudaMalloc(&k, n * 2));
  CHECK(cudaMalloc(&v, n * 2));
  CHECK(cudaMalloc(&o, n * 2));
  CHECK(cudaMalloc(&dcu, cu.size() * 4));
  CHECK(cudaMemcpy(q, hq.data(), n * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(k, hk.data(), n * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(v, hv.data(), n * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dcu, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  flash::flash_attention_bf16(0, q, k, v, o, dcu, static_cast<int64_t>(cu.size()), S, H, scale);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(ho.data(), o, n * 2, cudaMemcpyDeviceToHost));
  // float64 reference on sampled (row, head) pairs, both documents.
  double worst = 0, ref_max = 0;
  for (int sample = 0; sample < 24; ++sample) {
    const int64_t r = sample % 2 ? S - 1 - sample : (sample * 977) % (S - 37), h = sample % H;
    const int64_t b = r < cu[1] ? 0 : cu[1], e = r < cu[1] ? cu[1] : S;
    std::vector<double> l(static_cast<size_t>(e - b));
    double mx = -1e300;
    for (int64_t j = b; j < e; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d)
        dot += double(__bfloat162float(hq[(r * H + h) * D + d])) * __bfloat162float(hk[(j * H + h) * D + d]);
      l[j - b] = dot * scale;
      mx = std::max(mx, l[j - b]);
    }
    double den = 0;
    for (double x : l) den += std::exp(x - mx);
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0;
      for (int64_t j = b; j < e; ++j) acc += std::exp(l[j - b] - mx) / den * __bfloat162float(hv[(j * H + h) * D + d]);
      worst = std::max(worst, std::fabs(acc - __bfloat162float(ho[(r * H + h) * D + d])));
      ref_max = std::max(ref_max, std::fabs(acc));
    }
  }
  std::printf("check: max |flash - float64| / max |ref| = %.3e on 24 sampled rows (bf16 output: ~4e-3 expected)\n",
              worst / ref_max);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int iters = 10;
  CHECK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i)
    flash::flash_attention_bf16(0, q, k, v, o, dcu, static_cast<int64_t>(cu.size()), S, H, scale);
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  ms /= iters;
  const double flop = 4.0 * double(cu[1]) * cu[1] * H * D + 4.0 * 37.0 * 37.0 * H * D;
  std::printf("S %ld heads %ld D 128: %.3f ms, %.0f TFLOP/s\n", static_cast<long>(S), static_cast<long>(H), ms,
              flop / (ms * 1e-3) / 1e12);
  return worst / ref_max < 2e-2 ? 0 : 1;
}
