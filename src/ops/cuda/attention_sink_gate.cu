// Kernels of the passes around the attention core (see attention_fused.h): QK RMSNorm + partial
// RoPE straight from the qkv GEMM output (one warp per token-head, one read, one write), and the
// sink correction + sigmoid gate over O (16-byte vectors, one read, one write).
#include <cmath>
#include <type_traits>

#include "ops/cuda/attention_sink_gate.h"
#include "ops/cuda/common.cuh"

namespace avdit::cuda {
namespace {

// ---- pre-pass ---------------------------------------------------------------------------------------

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
