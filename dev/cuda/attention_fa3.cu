// Dense attention forward in FlashAttention-3's arrangement on Hopper (issue 41), the study behind
// src/ops/cuda/sm90/windowed_attention_sm90.cu (same arrangement, same wgmma pieces):
// - a producer warp group (setmaxnreg 24) whose one thread issues TMA loads of the Q tile and of
//   K / V tiles of BN keys into a two-stage ring (mbarriers full / empty);
// - two consumer warp groups of 64 query rows each (setmaxnreg 240). Per key tile j a consumer
//   issues S_j = Q K_j^T and O += P_{j-1} V_{j-1}, waits for S_j only and runs the softmax of S_j
//   under the PV product (FA3's intra-warp-group overlap); the two consumers take turns issuing
//   through two named barriers (ping-pong), so one's softmax runs under the other's products;
// - V is read in place as wgmma's MN-major operand (no transposed copy); the running max moves
//   only when a row's max grows past 2^8, so most tiles skip O's rescale;
// - the per-head sink joins the denominator and the per-(token, head) sigmoid gate multiplies the
//   output in the epilogue. GQA. bf16 in, fp32 softmax and accumulation, bf16 out. Any S: the last
//   key tile is masked past S (TMA zero-fills it), query rows past S are not stored.
// BN (keys per tile) is the study's switch: 128 or 176 (FlashAttention-3's choice for head dim 128:
// S takes 88 registers and P 44 beside O's 64; the windowed kernel's since 1337bac). GATE_EARLY=1:
// the gate and the sink loaded before the loop, not in the epilogue (+0.6%, not ported). The
// probabilities by ex2.approx.ftz (exp2_ftz, as the src kernel since 80a44c0). Switches measured and
// dropped are in bench/notes/attention.md: FTZ_EXP, VWAIT_EARLY and Q_REGS readable at 9226d10;
// 3 stages, an L2 evict_last policy, heads-fastest grid order, eager rescale and V^T at e06e99c.
//   nvcc -O3 -std=c++17 -Isrc -Idev/cuda -gencode=arch=compute_90a,code=sm_90a [-DBN=176] dev/cuda/attention_fa3.cu -o /tmp/fa3
//   /tmp/fa3 [S] [heads] [kv heads]     (default 16384 24 24); ITERS=N timed runs (10), SAMPLES=N
//   rows checked (16)
// Checks sampled rows against float64, with sinks and gate and without; TFLOP/s over 4 S^2 H D.
#include "attention_study.cuh"
#include "ops/cuda/mma_sm80.cuh"
#include "ops/cuda/sm90/wgmma_attention.cuh"

namespace {

using namespace avdit::cuda;        // smem_u32, pack_bf16x2
using namespace avdit::cuda::sm90;  // the wgmma pieces, exp2_ftz
using namespace study;              // the mbarrier and TMA pieces

#ifndef BN
#define BN 128
#endif
constexpr int kD = 128;   // head dim
constexpr int kBM = 128;  // query rows per block: two consumer warp groups of 64
constexpr int kBN = BN;   // keys per tile
static_assert(kBN == 128 || kBN == 176, "BN: 128 or 176");
constexpr int kNS = kBN / 2;   // S accumulators a thread (m64 x kBN over 128 threads)
constexpr int kKS = kBN / 16;  // k-steps of O += P V
constexpr int kThreads = 384;
constexpr int kStages = 2;
constexpr int kQBytes = kBM * kD * 2, kKVBytes = kBN * kD * 2;  // each as two 64-column boxes

struct Smem {  // after the 1,024-byte aligned tiles: Q, K[kStages], V[kStages]
  uint64_t q_full, k_full[kStages], k_empty[kStages], v_full[kStages], v_empty[kStages];
};
constexpr size_t kSmemBytes = size_t(kQBytes) + 2 * kStages * size_t(kKVBytes) + sizeof(Smem) + 1024;

// S (+)= Q K^T over the tile's kBN keys.
__device__ __forceinline__ void wgmma_s(float (&d)[kNS], uint64_t da, uint64_t db, int accumulate) {
#if BN == 128
  wgmma_m64n128k16_ss(d, da, db, accumulate);
#else
  wgmma_m64n176k16_ss(d, da, db, accumulate);
#endif
}

#ifndef GATE_EARLY
#define GATE_EARLY 0
#endif
struct Params {
  int S, H, Hkv;
  float scale_log2;           // softmax scale x log2(e)
  const float* sinks;         // [H] natural-log sink logits, or null
  const __nv_bfloat16* gate;  // [S, H] pre-sigmoid gate, or null
  __nv_bfloat16* out;         // [S, H, D]
};

// The thread's accumulator element i: row g + 8 ((i >> 1) & 1) of its warp's 16, column
// 8 (i >> 2) + 2 t + (i & 1).
__global__ void __launch_bounds__(kThreads, 1)
    attention_fa3_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_v, const Params p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned Qs = base, Ks = base + kQBytes, Vs = Ks + kStages * kKVBytes;
  const unsigned bars = Vs + kStages * kKVBytes;
  const unsigned q_full = bars + offsetof(Smem, q_full);
  auto k_full = [&](int s) { return bars + unsigned(offsetof(Smem, k_full) + 8 * s); };
  auto k_empty = [&](int s) { return bars + unsigned(offsetof(Smem, k_empty) + 8 * s); };
  auto v_full = [&](int s) { return bars + unsigned(offsetof(Smem, v_full) + 8 * s); };
  auto v_empty = [&](int s) { return bars + unsigned(offsetof(Smem, v_empty) + 8 * s); };
  const int wg = threadIdx.x / 128;  // 0: producer; 1, 2: consumers
  const int q0 = blockIdx.x * kBM, h = blockIdx.y, kvh = h / (p.H / p.Hkv);
  const int n_tiles = (p.S + kBN - 1) / kBN;
  if (threadIdx.x == 0) {
    bar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      bar_init(k_full(s), 1);
      bar_init(v_full(s), 1);
      bar_init(k_empty(s), 8);  // lane 0 of each consumer warp
      bar_init(v_empty(s), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    setmaxnreg_dec<24>();
    if (threadIdx.x == 0) {
      bar_expect(q_full, kQBytes);
      tma_load_3d(Qs, &tm_q, 0, h, q0, q_full);
      tma_load_3d(Qs + kQBytes / 2, &tm_q, 64, h, q0, q_full);
      for (int j = 0; j < n_tiles; ++j) {
        const int s = j % kStages, u = j / kStages;
        if (u > 0) bar_wait(k_empty(s), (u - 1) & 1);
        bar_expect(k_full(s), kKVBytes);
        tma_load_3d(Ks + s * kKVBytes, &tm_k, 0, kvh, j * kBN, k_full(s));
        tma_load_3d(Ks + s * kKVBytes + kKVBytes / 2, &tm_k, 64, kvh, j * kBN, k_full(s));
        if (u > 0) bar_wait(v_empty(s), (u - 1) & 1);
        bar_expect(v_full(s), kKVBytes);
        tma_load_3d(Vs + s * kKVBytes, &tm_v, 0, kvh, j * kBN, v_full(s));
        tma_load_3d(Vs + s * kKVBytes + kKVBytes / 2, &tm_v, 64, kvh, j * kBN, v_full(s));
      }
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int c = wg - 1;  // rows 64c .. 64c + 63 of the tile
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, g = lane / 4, t = lane % 4;
  const bool lead = lane == 0;
  const int my_bar = 1 + c, other_bar = 2 - c;
  if (c == 1) named_arrive256(1);  // consumer 0 issues first

  float o[64], s[kNS];
  unsigned pa[kKS][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float sl2 = p.scale_log2;

  auto issue_s = [&](int st) {
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
      wgmma_s(s, desc_k_major<kBM>(Qs, c * 64, kk), desc_k_major<kBN>(Ks + st * kKVBytes, 0, kk), kk > 0);
  };
  auto issue_pv = [&](int st) {
#pragma unroll
    for (int kk = 0; kk < kKS; ++kk) wgmma_m64n128k16_rs<1>(o, pa[kk], desc_v_mn_major<kBN>(Vs + st * kKVBytes, kk));
  };
  // Softmax of tile j's raw logits in s into unnormalised P (in s); O's factors in corr.
  auto softmax = [&](int j, float (&corr)[2]) {
    const int live = p.S - j * kBN;
    if (live < kBN) {
#pragma unroll
      for (int i = 0; i < kNS; ++i)
        if (8 * (i >> 2) + 2 * t + (i & 1) >= live) s[i] = -INFINITY;
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < kNS; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      mx[r] *= sl2;
      if (mx[r] > m[r] + 8.f) {
        corr[r] = exp2_ftz(m[r] - mx[r]);
        m[r] = mx[r];
        l[r] *= corr[r];
      } else {
        corr[r] = 1.f;
      }
    }
#pragma unroll
    for (int i = 0; i < kNS; ++i) {
      const int r = (i >> 1) & 1;
      s[i] = exp2_ftz(fmaf(s[i], sl2, -m[r]));
      l[r] += s[i];
    }
  };
  auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < kKS; ++kk) {
      pa[kk][0] = pack_bf16x2(s[8 * kk + 0], s[8 * kk + 1]);
      pa[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };

#if GATE_EARLY
  // The gate's sigmoid and the sink read before the loop: their global loads' latency hides under it.
  float gsig[2] = {1.f, 1.f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = q0 + c * 64 + warp * 16 + g + 8 * r;
    if (p.gate && row < p.S) gsig[r] = 1.f / (1.f + __expf(-__bfloat162float(p.gate[int64_t(row) * p.H + h])));
  }
  const float sink_early = p.sinks ? p.sinks[h] * 1.4426950408889634f : -INFINITY;
#endif
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  bar_wait(q_full, 0);
  bar_wait(k_full(0), 0);
  named_sync256(my_bar);
  wgmma_fence();
  issue_s(0);
  wgmma_commit();
  named_arrive256(other_bar);
  wgmma_wait<0>();
  fence_operands(s);
  bar_arrive_if(k_empty(0), lead);
  {
    float corr[2];
    softmax(0, corr);
    pack_p();
  }
  for (int j = 1; j < n_tiles; ++j) {
    const int st = j % kStages, sp = (j - 1) % kStages;
    bar_wait(k_full(st), (j / kStages) & 1);
    named_sync256(my_bar);
    wgmma_fence();
    issue_s(st);
    wgmma_commit();
    bar_wait(v_full(sp), ((j - 1) / kStages) & 1);
    issue_pv(sp);
    wgmma_commit();
    named_arrive256(other_bar);
    wgmma_wait<1>();
    fence_operands(s);
    bar_arrive_if(k_empty(st), lead);
    float corr[2];
    softmax(j, corr);
    wgmma_wait<0>();
    fence_operands(o);
    bar_arrive_if(v_empty(sp), lead);
    if (corr[0] != 1.f || corr[1] != 1.f) {
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] *= corr[(i >> 1) & 1];
    }
    pack_p();
  }
  {
    const int sp = (n_tiles - 1) % kStages;
    bar_wait(v_full(sp), ((n_tiles - 1) / kStages) & 1);
    named_sync256(my_bar);
    wgmma_fence();
    issue_pv(sp);
    wgmma_commit();
    if (c == 0) named_arrive256(other_bar);  // consumer 1's first arrive balances this one
    wgmma_wait<0>();
    fence_operands(o);
    bar_arrive_if(v_empty(sp), lead);
  }

  // Epilogue: the quad's partial sums, the sink in the denominator, the gate, bf16 stores.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#if GATE_EARLY
  const float sink_l2 = sink_early;
#else
  const float sink_l2 = p.sinks ? p.sinks[h] * 1.4426950408889634f : -INFINITY;
#endif
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = q0 + c * 64 + warp * 16 + g + 8 * r;
    if (row >= p.S) continue;
    // softmax over keys and the sink: O / (l + exp2(sink - m)), rescaled so nothing overflows.
    const float mf = fmaxf(m[r], sink_l2);
    float inv = exp2f(m[r] - mf) / (l[r] * exp2f(m[r] - mf) + exp2f(sink_l2 - mf));
#if GATE_EARLY
    inv *= gsig[r];
#else
    if (p.gate) inv *= 1.f / (1.f + __expf(-__bfloat162float(p.gate[int64_t(row) * p.H + h])));
#endif
    __nv_bfloat16* dst = p.out + (int64_t(row) * p.H + h) * kD + 2 * t;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j) =
          __floats2bfloat162_rn(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
  }
}

// [rows, heads, 128] bf16 as boxes of 64 dims x 1 head x `box_rows` rows, the 128-byte swizzle.
CUtensorMap rows_map(const void* ptr, int rows, int heads, int box_rows) {
  return map_3d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, ptr, {kD, cuuint64_t(heads), cuuint64_t(rows)},
                {kD * 2, cuuint64_t(heads) * kD * 2}, {64, 1, cuuint32_t(box_rows)});
}

}  // namespace

int main(int argc, char** argv) {
  const int S = argc > 1 ? std::atoi(argv[1]) : 16384, H = argc > 2 ? std::atoi(argv[2]) : 24,
            Hkv = argc > 3 ? std::atoi(argv[3]) : H;
  if (S < 1 || H % Hkv != 0) {
    std::fprintf(stderr, "S >= 1 and H a multiple of Hkv\n");
    return 2;
  }
  const size_t nq = size_t(S) * H * kD, nk = size_t(S) * Hkv * kD;
  std::vector<__nv_bfloat16> hq(nq), hk(nk), hv(nk), ho(nq), hgate(size_t(S) * H);
  std::vector<float> hsink(H);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  PooledNormal pooled(rng);
  pooled.fill(hq), pooled.fill(hk), pooled.fill(hv), pooled.fill(hgate);
  // Sinks around the row's log-denominator (log S + ~0.5) so that they matter: a few above it.
  for (auto& x : hsink) x = std::log(float(S)) + 2.f * nd(rng);
  __nv_bfloat16 *q, *k, *v, *o, *gate;
  float* sinks;
  CHECK(cudaMalloc(&q, nq * 2));
  CHECK(cudaMalloc(&k, nk * 2));
  CHECK(cudaMalloc(&v, nk * 2));
  CHECK(cudaMalloc(&o, nq * 2));
  CHECK(cudaMalloc(&gate, hgate.size() * 2));
  CHECK(cudaMalloc(&sinks, H * 4));
  CHECK(cudaMemcpy(q, hq.data(), nq * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(k, hk.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(v, hv.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(gate, hgate.data(), hgate.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(sinks, hsink.data(), H * 4, cudaMemcpyHostToDevice));
  const CUtensorMap tm_q = rows_map(q, S, H, kBM), tm_k = rows_map(k, S, Hkv, kBN), tm_v = rows_map(v, S, Hkv, kBN);
  CHECK(cudaFuncSetAttribute(attention_fa3_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)));
  const float scale = 1.f / std::sqrt(float(kD));
  const dim3 grid((S + kBM - 1) / kBM, H);
  auto run = [&](bool extras) {
    const Params p{S, H, Hkv, scale * 1.4426950408889634f, extras ? sinks : nullptr, extras ? gate : nullptr, o};
    attention_fa3_kernel<<<grid, kThreads, kSmemBytes>>>(tm_q, tm_k, tm_v, p);
  };
  const int iters = std::getenv("ITERS") ? std::atoi(std::getenv("ITERS")) : 10;
  int rc = 0;
  for (int extras = 1; extras >= 0; --extras) {
    run(extras);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(ho.data(), o, nq * 2, cudaMemcpyDeviceToHost));
    double worst = 0, ref_max = 0;
    const int samples = std::getenv("SAMPLES") ? std::atoi(std::getenv("SAMPLES")) : 16;
    for (int sample = 0; sample < samples; ++sample) {
      // The last row too (the masked last key tile and a partial query tile when S is odd).
      const int64_t r = sample == samples - 1 ? S - 1 : (int64_t(sample) * 7919 + 13) % S, hh = (sample * 5) % H;
      double ref[kD];
      reference_row(hq, hk, hv, S, H, Hkv, r, hh, scale, extras ? &hsink[hh] : nullptr,
                    extras ? &hgate[r * H + hh] : nullptr, ref);
      for (int d = 0; d < kD; ++d) {
        worst = std::max(worst, std::fabs(ref[d] - __bfloat162float(ho[(r * H + hh) * kD + d])));
        ref_max = std::max(ref_max, std::fabs(ref[d]));
      }
    }
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    run(extras);
    CHECK(cudaEventRecord(e0));
    for (int i = 0; i < iters; ++i) run(extras);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= iters;
    const double flop = 4.0 * double(S) * S * H * kD;
    std::printf("S %d heads %d/%d D 128, BN %d, sinks+gate %d: %.3f ms, %.0f TFLOP/s; check max |gpu - "
                "float64| / max |ref| = %.3e\n",
                S, H, Hkv, kBN, extras, ms, flop / (ms * 1e-3) / 1e12, worst / ref_max);
    if (!(worst / ref_max < 2e-2)) rc = 1;
  }
  return rc;
}
