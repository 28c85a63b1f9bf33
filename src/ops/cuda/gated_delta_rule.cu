// The Gated DeltaNet gates and recurrence on the GPU (see ops/gated_delta_rule.h). Column j of a
// value head's state S [dk, dv] evolves on its own (S^T k, the update and S^T q all act per
// column), so each column belongs to a group of kLanes lanes, each lane holding dk / kLanes of its
// rows in registers in fp32. The recurrence is serial in t: the q, k rows and v, g, beta of a chunk
// of tokens are staged in shared memory first, so the chain waits on global memory once a chunk.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "backend/cuda/context.h"
#include "ops/cuda/common.cuh"
#include "ops/gated_delta_rule.h"

namespace avdit::ops::cuda {
namespace {

using ::avdit::cuda::Elt;
using ::avdit::cuda::elt_of;
using ::avdit::cuda::load_elt;
using ::avdit::cuda::store_elt;

constexpr int kLanes = 8;                  // lanes per state column: 3 shuffles reduce over dk
constexpr int kColumns = 16;               // state columns per block
constexpr int kBlock = kLanes * kColumns;  // threads per block
constexpr int kMaxDk = 256;
constexpr int kSharedBudget = 40 * 1024;  // bytes of staged tokens per block
constexpr int kMaxChunk = 64;
constexpr int kBatch = 8;  // staging loads in flight per thread

// torch.nn.functional.softplus with its default threshold (the identity above 20), as the CPU.
__device__ __forceinline__ float softplus_f(float x) { return x > 20.f ? x : log1pf(expf(x)); }

__global__ void delta_rule_gates_kernel(const void* a, Elt at, const void* b, Elt bt,
                                        const void* a_log, Elt alt, const void* dt_bias, Elt dtt,
                                        float* g, float* beta, int64_t T, int64_t H) {
  const int64_t n = T * H;
  for (int64_t i = ::avdit::cuda::first_of(); i < n; i += ::avdit::cuda::stride_of()) {
    const int64_t h = i % H;
    g[i] =
        -expf(load_elt(a_log, alt, h)) * softplus_f(load_elt(a, at, i) + load_elt(dt_bias, dtt, h));
    beta[i] = ::avdit::cuda::sigmoid_f(load_elt(b, bt, i));
  }
}

// y[r] = x[r] / sqrt(sum x[r]^2 + 1e-6) * scale per row of n, one warp per row, the sum of squares
// in double as on the CPU.
__global__ void l2_normalise_rows_kernel(const void* x, Elt xt, int64_t rows, int64_t n,
                                         float scale, float* y) {
  const int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  if (r >= rows) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  double ss = 0;
  for (int64_t i = lane; i < n; i += 32) {
    const double v = load_elt(x, xt, r * n + i);
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = static_cast<float>(1.0 / sqrt(ss + 1e-6));
  for (int64_t i = lane; i < n; i += 32) y[r * n + i] = load_elt(x, xt, r * n + i) * inv * scale;
}

struct DeltaArgs {
  const float *q, *k;  // l2-normalised (q also scaled), [T, Hk, dk]
  const void *v, *g, *beta;
  Elt vt, gt, bt;
  void* out;
  Elt ot;
  int64_t T, Hk, Hv, dk, dv;
  int chunk;  // tokens staged at a time
};

// Sum over the kLanes lanes of a column group (aligned groups: xor offsets < kLanes stay inside).
__device__ __forceinline__ float group_sum(float x) {
  for (int o = kLanes / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Grid (column blocks, value heads). Each lane holds kRows state rows (row i = lane + kLanes r)
// of its column. The staged q, k rows are padded with zeros to kRows * kLanes, so rows past dk
// stay 0 and add nothing, and the per-token loops carry no bounds checks. Threads of columns past
// dv run along (the shuffles and barriers need them) on zero values and store nothing.
template <int kRows>
__global__ void __launch_bounds__(kBlock) gated_delta_rule_kernel(DeltaArgs a) {
  constexpr int kWidth = kRows * kLanes;  // padded row length in shared memory
  extern __shared__ float smem[];
  const int chunk = a.chunk;
  const int64_t dk = a.dk;
  float* ks = smem;                   // [chunk, kWidth]
  float* qs = ks + chunk * kWidth;    // [chunk, kWidth]
  float* vs = qs + chunk * kWidth;    // [chunk, kColumns]
  float* es = vs + chunk * kColumns;  // [chunk]: exp(g)
  float* bs = es + chunk;             // [chunk]: beta
  const int64_t h = blockIdx.y, hk = h / (a.Hv / a.Hk);
  const int col = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t j0 = blockIdx.x * int64_t{kColumns}, j = j0 + col;
  float S[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) S[r] = 0.f;
  for (int64_t t0 = 0; t0 < a.T; t0 += chunk) {
    const int n = static_cast<int>(std::min<int64_t>(chunk, a.T - t0));
    __syncthreads();  // every thread is done with the previous chunk
    // Each thread issues kBatch loads before its first store, so a chunk waits on memory a few
    // times instead of once per element.
    for (int e0 = threadIdx.x; e0 < n * kWidth; e0 += kBlock * kBatch) {
      float kr[kBatch], qr[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int e = e0 + b * kBlock, tt = e / kWidth, i = e % kWidth;
        const int64_t src = ((t0 + tt) * a.Hk + hk) * dk + i;
        const bool live = e < n * kWidth && i < dk;
        kr[b] = live ? a.k[src] : 0.f;
        qr[b] = live ? a.q[src] : 0.f;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int e = e0 + b * kBlock;
        if (e < n * kWidth) {
          ks[e] = kr[b];
          qs[e] = qr[b];
        }
      }
    }
    for (int e0 = threadIdx.x; e0 < n * kColumns; e0 += kBlock * kBatch) {
      float vr[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int e = e0 + b * kBlock, tt = e / kColumns, c = e % kColumns;
        const bool live = e < n * kColumns && j0 + c < a.dv;
        vr[b] = live ? load_elt(a.v, a.vt, ((t0 + tt) * a.Hv + h) * a.dv + j0 + c) : 0.f;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (e0 + b * kBlock < n * kColumns) vs[e0 + b * kBlock] = vr[b];
    }
    for (int e = threadIdx.x; e < n; e += kBlock) {
      es[e] = expf(load_elt(a.g, a.gt, (t0 + e) * a.Hv + h));
      bs[e] = load_elt(a.beta, a.bt, (t0 + e) * a.Hv + h);
    }
    __syncthreads();
    for (int tt = 0; tt < n; ++tt) {
      const float* kt = ks + tt * kWidth + lane;
      const float* qt = qs + tt * kWidth + lane;
      const float e = es[tt];
      // S = S e, and kv = S^T k_t for this column: what the decayed state predicts for the key.
      float kv = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        S[r] *= e;
        kv += S[r] * kt[kLanes * r];
      }
      kv = group_sum(kv);
      const float delta = (vs[tt * kColumns + col] - kv) * bs[tt];
      // S = S + k_t delta^T, and out = S^T q_t in the same pass over the state.
      float acc = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        S[r] += kt[kLanes * r] * delta;
        acc += S[r] * qt[kLanes * r];
      }
      acc = group_sum(acc);
      if (lane == 0 && j < a.dv) store_elt(a.out, a.ot, ((t0 + tt) * a.Hv + h) * a.dv + j, acc);
    }
  }
}

template <int kRows>
void launch_recurrence(DeltaArgs a, int64_t blocks_x, cudaStream_t stream) {
  const int64_t per_token = (2 * kRows * kLanes + kColumns + 2) * int64_t{sizeof(float)};
  a.chunk = static_cast<int>(std::clamp<int64_t>(kSharedBudget / per_token, 1, kMaxChunk));
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(a.Hv));
  gated_delta_rule_kernel<kRows>
      <<<grid, kBlock, static_cast<size_t>(a.chunk * per_token), stream>>>(a);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void delta_rule_gates(CudaContext& c, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, Tensor& g, Tensor& beta) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&a, &b, &a_log, &dt_bias, &g, &beta})
    c.require_here(*t, "delta_rule_gates operand");
  AVDIT_CHECK(a.ndim() == 2 && b.shape() == a.shape(),
              "delta_rule_gates: a {} and b {} must both be [T, H]", a.shape_str(), b.shape_str());
  const int64_t T = a.size(0), H = a.size(1);
  AVDIT_CHECK(
      a_log.numel() == H && dt_bias.numel() == H && g.numel() == T * H && beta.numel() == T * H,
      "delta_rule_gates: A_log {} dt_bias {} g {} beta {} for [{}, {}]", a_log.shape_str(),
      dt_bias.shape_str(), g.shape_str(), beta.shape_str(), T, H);
  AVDIT_CHECK(g.dtype() == DType::F32 && beta.dtype() == DType::F32,
              "delta_rule_gates: g {} and beta {} must be F32", dtype_name(g.dtype()),
              dtype_name(beta.dtype()));
  if (T * H == 0) return;
  delta_rule_gates_kernel<<<::avdit::cuda::grid_for(T * H), ::avdit::cuda::kThreads, 0,
                            c.stream()>>>(
      a.raw(), elt_of(a, "delta_rule_gates a"), b.raw(), elt_of(b, "delta_rule_gates b"),
      a_log.raw(), elt_of(a_log, "delta_rule_gates A_log"), dt_bias.raw(),
      elt_of(dt_bias, "delta_rule_gates dt_bias"),
      static_cast<float*>(::avdit::cuda::device_ptr(g)),
      static_cast<float*>(::avdit::cuda::device_ptr(beta)), T, H);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void gated_delta_rule(CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& g, const Tensor& beta, Tensor& out) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &v, &g, &beta, &out})
    c.require_here(*t, "gated_delta_rule operand");
  AVDIT_CHECK(q.ndim() == 3 && k.shape() == q.shape() && v.ndim() == 3 && v.size(0) == q.size(0),
              "gated_delta_rule: q {} k {} v {} (expected [T, Hk, dk], [T, Hk, dk], [T, Hv, dv])",
              q.shape_str(), k.shape_str(), v.shape_str());
  const int64_t T = q.size(0), Hk = q.size(1), dk = q.size(2), Hv = v.size(1), dv = v.size(2);
  AVDIT_CHECK(Hk > 0 && Hv % Hk == 0, "gated_delta_rule: {} value heads for {} key heads", Hv, Hk);
  AVDIT_CHECK(g.numel() == T * Hv && beta.numel() == T * Hv && out.numel() == v.numel(),
              "gated_delta_rule: g {} beta {} out {} for v {}", g.shape_str(), beta.shape_str(),
              out.shape_str(), v.shape_str());
  AVDIT_REQUIRE(dk <= kMaxDk, "gated_delta_rule: key head dim {} above the CUDA kernel's {}", dk,
                kMaxDk);
  AVDIT_REQUIRE(Hv <= 65535, "gated_delta_rule: {} value heads exceed one launch", Hv);
  if (T * Hv * dv == 0) return;
  // q, k normalised once into fp32 scratch (q with 1 / sqrt(dk)): each is read by every column.
  Tensor qn = c.empty({T, Hk, dk}, DType::F32), kn = c.empty({T, Hk, dk}, DType::F32);
  const int64_t rows = T * Hk, warps_per_block = ::avdit::cuda::kThreads / 32;
  const auto norm_blocks = static_cast<unsigned>((rows + warps_per_block - 1) / warps_per_block);
  AVDIT_REQUIRE(rows <= int64_t{0x7fffffff}, "gated_delta_rule: {} key rows exceed one launch",
                rows);
  l2_normalise_rows_kernel<<<norm_blocks, ::avdit::cuda::kThreads, 0, c.stream()>>>(
      q.raw(), elt_of(q, "gated_delta_rule q"), rows, dk, 1.f / std::sqrt(static_cast<float>(dk)),
      static_cast<float*>(::avdit::cuda::device_ptr(qn)));
  AVDIT_CUDA_CHECK_LAUNCH();
  l2_normalise_rows_kernel<<<norm_blocks, ::avdit::cuda::kThreads, 0, c.stream()>>>(
      k.raw(), elt_of(k, "gated_delta_rule k"), rows, dk, 1.f,
      static_cast<float*>(::avdit::cuda::device_ptr(kn)));
  AVDIT_CUDA_CHECK_LAUNCH();
  DeltaArgs a{};
  a.q = static_cast<const float*>(qn.raw());
  a.k = static_cast<const float*>(kn.raw());
  a.v = v.raw();
  a.vt = elt_of(v, "gated_delta_rule v");
  a.g = g.raw();
  a.gt = elt_of(g, "gated_delta_rule g");
  a.beta = beta.raw();
  a.bt = elt_of(beta, "gated_delta_rule beta");
  a.out = ::avdit::cuda::device_ptr(out);
  a.ot = elt_of(out, "gated_delta_rule out");
  a.T = T;
  a.Hk = Hk;
  a.Hv = Hv;
  a.dk = dk;
  a.dv = dv;
  const int64_t blocks_x = (dv + kColumns - 1) / kColumns;
  if (dk <= 8 * kLanes)
    launch_recurrence<8>(a, blocks_x, c.stream());
  else if (dk <= 16 * kLanes)
    launch_recurrence<16>(a, blocks_x, c.stream());
  else
    launch_recurrence<kMaxDk / kLanes>(a, blocks_x, c.stream());
}

}  // namespace avdit::ops::cuda
