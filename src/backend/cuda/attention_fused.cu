// Kernels of the passes around the attention core (see attention_fused.h): QK RMSNorm + partial
// RoPE straight from the qkv GEMM output (one warp per token-head, one read, one write), and the
// sink correction + sigmoid gate over O (16-byte vectors, one read, one write).
#include <cmath>
#include <type_traits>

#include "backend/cuda/attention_fused.h"
#include "backend/cuda/common.cuh"

namespace avdit::cuda {
namespace {

// ---- pre-pass ---------------------------------------------------------------------------------------

constexpr int kMaxD = 256;
constexpr int kPer = kMaxD / 32;
constexpr int kPrepWarps = 8;

struct PrepArgs {
  const void* qkv;
  Elt xt, ot, wqt, wkt;
  const void *wq, *wk;
  int64_t wq_rows, wk_rows;  // G of each weight (1: one row for every token)
  const int* group;
  const int* rows;
  const float *cos, *sin;
  int half;  // R / 2 (0: no RoPE)
  float eps;
  bool one_plus;
  bool per_head;
  int64_t S, Hq, Hkv, D;
  void *q, *k, *v;
};

__global__ void __launch_bounds__(kPrepWarps * 32) qkv_norm_rope_kernel(PrepArgs a) {
  __shared__ float buf[kPrepWarps][kMaxD];
  const int64_t heads = a.Hq + 2 * a.Hkv;
  const int64_t item = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  if (item >= a.S * heads) return;  // warp-uniform
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int64_t r = item / heads, j = item % heads;
  const int64_t src = a.rows ? a.rows[r] : r;
  // Which projection (0 q, 1 k, 2 v), its head index, source column and destination.
  int kind;
  int64_t hh;
  if (j < a.Hq) { kind = 0; hh = j; }
  else if (j < a.Hq + a.Hkv) { kind = 1; hh = j - a.Hq; }
  else { kind = 2; hh = j - a.Hq - a.Hkv; }
  const int64_t col = a.per_head ? (hh * 3 + kind) * a.D : j * a.D;
  const int64_t in_base = src * heads * a.D + col;
  void* dst = kind == 0 ? a.q : (kind == 1 ? a.k : a.v);
  const int64_t out_base = (r * (kind == 0 ? a.Hq : a.Hkv) + hh) * a.D;
  float x[kPer];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int64_t d = lane + 32 * i;
    x[i] = d < a.D ? load_elt(a.qkv, a.xt, in_base + d) : 0.f;
    ss += x[i] * x[i];
  }
  if (kind == 2) {  // v: a copy
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < a.D) store_elt(dst, a.ot, out_base + d, x[i]);
    }
    return;
  }
  const void* wp = kind == 0 ? a.wq : a.wk;
  if (wp) {
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.D) + a.eps);
    const Elt wt = kind == 0 ? a.wqt : a.wkt;
    const int64_t wrows = kind == 0 ? a.wq_rows : a.wk_rows;
    const int64_t wrow = (wrows > 1 && a.group) ? a.group[src] : 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < a.D) {
        float g = load_elt(wp, wt, wrow * a.D + d);
        if (a.one_plus) g += 1.f;
        x[i] = x[i] * inv * g;
      }
    }
  }
  if (a.half > 0) {
    // The rotation pairs d with d +- R/2, held by another lane: exchange through shared memory.
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < a.D) buf[w][d] = x[i];
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int d = lane + 32 * i;
      if (d < 2 * a.half) {
        const int p = d < a.half ? d : d - a.half;
        const float c = a.cos[r * a.half + p], s = a.sin[r * a.half + p];
        x[i] = d < a.half ? buf[w][d] * c - buf[w][d + a.half] * s : buf[w][d] * c + buf[w][p] * s;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int64_t d = lane + 32 * i;
    if (d < a.D) store_elt(dst, a.ot, out_base + d, x[i]);
  }
}

// ---- post-pass --------------------------------------------------------------------------------------

struct PostArgs {
  const void* o;
  void* y;
  Elt ot, yt, st, gt;
  const float* lse;
  int64_t lse_s, lse_h;
  const void *sinks, *gate;
  const int* rows;
  int64_t S, H, D;
};

// The factor of row (r, h) whose O row is src.
__device__ __forceinline__ float sink_gate_factor(const PostArgs& a, int64_t r, int64_t src, int64_t h) {
  float f = 1.f;
  if (a.sinks) {
    // exp(lse - log(exp(lse) + exp(sink))) written without overflow.
    const float lse = a.lse[src * a.lse_s + h * a.lse_h];
    f = 1.f / (1.f + expf(load_elt(a.sinks, a.st, h) - lse));
  }
  if (a.gate) f *= sigmoid_f(load_elt(a.gate, a.gt, r * a.H + h));
  return f;
}

// 8 bf16 / f16 values (16 bytes) per thread; o and y of one dtype T, D a multiple of 8.
template <typename T>
__global__ void sink_gate_vec_kernel(PostArgs a) {
  const int64_t vec_per_row = a.D / 8;
  const int64_t n = a.S * a.H * vec_per_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / vec_per_row, c = i % vec_per_row;
    const int64_t r = row / a.H, h = row % a.H;
    const int64_t src = a.rows ? a.rows[r] : r;
    const float f = sink_gate_factor(a, r, src, h);
    uint4 pack = reinterpret_cast<const uint4*>(a.o)[(src * a.H + h) * vec_per_row + c];
    T* e = reinterpret_cast<T*>(&pack);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>)
        e[k] = __float2bfloat16_rn(__bfloat162float(e[k]) * f);
      else
        e[k] = __float2half_rn(__half2float(e[k]) * f);
    }
    reinterpret_cast<uint4*>(a.y)[i] = pack;
  }
}

// Any dtypes, any D: one element per thread.
__global__ void sink_gate_kernel(PostArgs a) {
  const int64_t n = a.S * a.H * a.D;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / a.D, d = i % a.D;
    const int64_t r = row / a.H, h = row % a.H;
    const int64_t src = a.rows ? a.rows[r] : r;
    const float f = sink_gate_factor(a, r, src, h);
    store_elt(a.y, a.yt, i, load_elt(a.o, a.ot, (src * a.H + h) * a.D + d) * f);
  }
}

__global__ void ragged_offsets_kernel(const int* cu, int64_t n1, int64_t q_row, int64_t kv_row, int64_t st_row,
                                      int32_t* dst, int64_t stride) {
  for (int64_t i = threadIdx.x; i < n1; i += blockDim.x) {
    const int64_t c = cu[i];
    if (i + 1 < n1) dst[i] = static_cast<int32_t>(cu[i + 1] - c);
    dst[stride + i] = static_cast<int32_t>(c * q_row);
    dst[2 * stride + i] = static_cast<int32_t>(c * kv_row);
    dst[3 * stride + i] = static_cast<int32_t>(c * st_row);
  }
}

void check_rows(const Tensor* rows, int64_t S, const char* what) {
  if (!rows) return;
  require_i32(*rows, what);
  AVDIT_REQUIRE(rows->numel() == S, "{}: {} entries for {} rows", what, rows->numel(), S);
}

}  // namespace

Qkv qkv_norm_rope(Device& dev, const Tensor& qkv, const QkvPrepOptions& opt) {
  require_cuda(qkv, "qkv_norm_rope qkv");
  const int64_t Hq = opt.heads_q, Hkv = opt.heads_kv, D = opt.head_dim;
  AVDIT_REQUIRE(Hq > 0 && Hkv > 0 && Hq % Hkv == 0 && D > 0 && D <= kMaxD,
                "qkv_norm_rope: heads {} / {} (q a multiple of kv) and head dim {} (<= {})", Hq, Hkv, D, kMaxD);
  AVDIT_REQUIRE(opt.layout == QkvLayout::kSplit || Hq == Hkv,
                "qkv_norm_rope: the per-head layout needs as many kv heads as q heads ({} vs {})", Hq, Hkv);
  AVDIT_REQUIRE(qkv.ndim() == 2 && qkv.size(1) == (Hq + 2 * Hkv) * D,
                "qkv_norm_rope: qkv {} is not [S, (Hq + 2 Hkv) * D] = [S, {}]", qkv.shape_str(), (Hq + 2 * Hkv) * D);
  const int64_t S = qkv.size(0);
  PrepArgs a{};
  a.qkv = qkv.raw();
  a.xt = elt_of(qkv, "qkv_norm_rope qkv");
  a.S = S;
  a.Hq = Hq;
  a.Hkv = Hkv;
  a.D = D;
  a.eps = opt.eps;
  a.one_plus = opt.one_plus_weight;
  a.per_head = opt.layout == QkvLayout::kPerHead;
  bool grouped = false;
  auto weight = [&](const Tensor* w, const char* what, const void*& p, Elt& t, int64_t& g) {
    p = nullptr;
    g = 1;
    if (!w) return;
    require_cuda(*w, what);
    AVDIT_REQUIRE(w->numel() > 0 && w->numel() % D == 0, "{}: {} is not [D] or [G, D] with D = {}", what,
                  w->shape_str(), D);
    p = w->raw();
    t = elt_of(*w, what);
    g = w->numel() / D;
    grouped = grouped || g > 1;
  };
  weight(opt.q_weight, "qkv_norm_rope q_weight", a.wq, a.wqt, a.wq_rows);
  weight(opt.k_weight, "qkv_norm_rope k_weight", a.wk, a.wkt, a.wk_rows);
  if (grouped) {
    AVDIT_REQUIRE(opt.group != nullptr, "qkv_norm_rope: norm weights with several rows need `group`");
    require_i32(*opt.group, "qkv_norm_rope group");
    AVDIT_REQUIRE(opt.group->numel() == S, "qkv_norm_rope: group has {} entries for {} rows", opt.group->numel(), S);
    a.group = opt.group->data<int32_t>();
  }
  AVDIT_REQUIRE((opt.cos == nullptr) == (opt.sin == nullptr), "qkv_norm_rope: give both cos and sin, or neither");
  if (opt.cos) {
    require_cuda(*opt.cos, "qkv_norm_rope cos");
    require_cuda(*opt.sin, "qkv_norm_rope sin");
    AVDIT_REQUIRE(opt.cos->dtype() == DType::F32 && opt.sin->dtype() == DType::F32 && opt.cos->ndim() == 2 &&
                      opt.cos->size(0) == S && opt.sin->shape() == opt.cos->shape() && 2 * opt.cos->size(1) <= D,
                  "qkv_norm_rope: cos {} sin {} must be F32 [S = {}, R/2] with R <= D = {}", opt.cos->shape_str(),
                  opt.sin->shape_str(), S, D);
    a.cos = opt.cos->data<float>();
    a.sin = opt.sin->data<float>();
    a.half = static_cast<int>(opt.cos->size(1));
  }
  check_rows(opt.rows, S, "qkv_norm_rope rows");
  if (opt.rows) a.rows = opt.rows->data<int32_t>();
  const DType out = opt.out.value_or(qkv.dtype());
  Qkv r;
  if (opt.into) {
    r = *opt.into;
    for (const Tensor* t : {&r.q, &r.k, &r.v}) require_cuda(*t, "qkv_norm_rope into");
    AVDIT_REQUIRE(r.q.shape() == Shape({S, Hq, D}) && r.k.shape() == Shape({S, Hkv, D}) &&
                      r.v.shape() == Shape({S, Hkv, D}) && r.q.dtype() == out && r.k.dtype() == out &&
                      r.v.dtype() == out,
                  "qkv_norm_rope: into q {} k {} v {} do not fit [{}, {}/{}, {}] {}", r.q.shape_str(),
                  r.k.shape_str(), r.v.shape_str(), S, Hq, Hkv, D, dtype_name(out));
  } else {
    r = {cuda_empty(dev, {S, Hq, D}, out), cuda_empty(dev, {S, Hkv, D}, out), cuda_empty(dev, {S, Hkv, D}, out)};
  }
  a.ot = elt_of(r.q, "qkv_norm_rope out");
  a.q = device_ptr(r.q);
  a.k = device_ptr(r.k);
  a.v = device_ptr(r.v);
  const int64_t warps = S * (Hq + 2 * Hkv);
  if (warps == 0) return r;
  const int64_t blocks = (warps + kPrepWarps - 1) / kPrepWarps;
  AVDIT_REQUIRE(blocks <= 0x7fffffff, "qkv_norm_rope: {} token-heads exceed one launch", warps);
  qkv_norm_rope_kernel<<<static_cast<unsigned>(blocks), kPrepWarps * 32, 0, dev.stream()>>>(a);
  AVDIT_CUDA_CHECK_LAUNCH();
  return r;
}

Tensor sink_gate(Device& dev, const Tensor& o, const LseView& lse, const Tensor* sinks, const Tensor* gate,
                 const Tensor* rows, std::optional<DType> out) {
  require_cuda(o, "sink_gate o");
  AVDIT_REQUIRE(o.ndim() == 3, "sink_gate: o {} must be [S, H, D]", o.shape_str());
  const int64_t S = o.size(0), H = o.size(1), D = o.size(2);
  PostArgs a{};
  a.o = o.raw();
  a.ot = elt_of(o, "sink_gate o");
  a.S = S;
  a.H = H;
  a.D = D;
  if (sinks) {
    require_cuda(*sinks, "sink_gate sinks");
    AVDIT_REQUIRE(sinks->numel() == H, "sink_gate: sinks {} for {} heads", sinks->shape_str(), H);
    require_cuda(lse.lse, "sink_gate lse");
    AVDIT_REQUIRE(lse.lse.dtype() == DType::F32, "sink_gate: lse must be F32");
    AVDIT_REQUIRE(lse.lse.numel() >= (S - 1) * lse.stride_s + (H - 1) * lse.stride_h + 1,
                  "sink_gate: lse {} too small for strides ({}, {}) over {} x {}", lse.lse.shape_str(), lse.stride_s,
                  lse.stride_h, S, H);
    a.sinks = sinks->raw();
    a.st = elt_of(*sinks, "sink_gate sinks");
    a.lse = lse.lse.data<float>();
    a.lse_s = lse.stride_s;
    a.lse_h = lse.stride_h;
  }
  if (gate) {
    require_cuda(*gate, "sink_gate gate");
    AVDIT_REQUIRE(gate->numel() == S * H, "sink_gate: gate {} for {} tokens x {} heads", gate->shape_str(), S, H);
    a.gate = gate->raw();
    a.gt = elt_of(*gate, "sink_gate gate");
  }
  check_rows(rows, S, "sink_gate rows");
  if (rows) a.rows = rows->data<int32_t>();
  const DType yd = out.value_or(o.dtype());
  Tensor y = (rows == nullptr && yd == o.dtype()) ? o : cuda_empty(dev, {S, H, D}, yd);
  a.y = device_ptr(y);
  a.yt = elt_of(y, "sink_gate out");
  if (S * H * D == 0) return y;
  const bool vec = yd == o.dtype() && yd != DType::F32 && D % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(a.o) % 16 == 0 && reinterpret_cast<uintptr_t>(a.y) % 16 == 0;
  if (vec && yd == DType::BF16) {
    sink_gate_vec_kernel<__nv_bfloat16><<<grid_for(S * H * D / 8), kThreads, 0, dev.stream()>>>(a);
  } else if (vec) {
    sink_gate_vec_kernel<__half><<<grid_for(S * H * D / 8), kThreads, 0, dev.stream()>>>(a);
  } else {
    sink_gate_kernel<<<grid_for(S * H * D), kThreads, 0, dev.stream()>>>(a);
  }
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

void launch_ragged_offsets(Device& dev, const Tensor& cu_seqlens, int64_t q_row, int64_t kv_row, int64_t stats_row,
                           int32_t* dst, int64_t stride) {
  require_i32(cu_seqlens, "attention cu_seqlens");
  ragged_offsets_kernel<<<1, 256, 0, dev.stream()>>>(cu_seqlens.data<int32_t>(), cu_seqlens.numel(), q_row, kv_row,
                                                     stats_row, dst, stride);
  AVDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace avdit::cuda
