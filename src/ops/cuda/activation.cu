// Element-wise kernels: silu, sigmoid, add, mul, and the gated activations of both DiTs (SwiGLU
// with the gate first for H3; swiglu7 interleaved and split for MAGI-2). fp32 math on any float
// storage; one thread per output element in a grid-stride loop, except add and mul on F32 / BF16
// operands aligned to 16 bytes and swiglu7 on interleaved BF16 pairs: 8 elements per thread with
// 16-byte loads (binary_vec_kernel, swiglu7_interleaved_vec_kernel). An add / mul whose length is not a
// multiple of 8 launches twice (vector kernel, then the scalar kernel on the tail).
#include <cstdint>
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "backend/cuda/context.h"
#include "ops/activation.h"
#include "ops/cuda/modulation_kernels.h"
#include "ops/cuda/vec8.cuh"

namespace avdit::cuda {
namespace {

enum class Unary : int { Silu, Sigmoid };
enum class Binary : int { Add, Sub, Mul };

__device__ __forceinline__ float apply(Binary op, float p, float q) {
  return op == Binary::Add ? p + q : op == Binary::Sub ? p - q : p * q;
}

__device__ __forceinline__ float unary_f(Unary op, float v) {
  return op == Unary::Silu ? v / (1.0f + expf(-v)) : sigmoid_f(v);
}

__global__ void unary_kernel(Unary op, const void* x, Elt xt, void* y, Elt yt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    store_elt(y, yt, i, unary_f(op, load_elt(x, xt, i)));
}

// The same on 8 elements per thread with 16-byte loads and stores (F32 or BF16, aligned): same bits.
// The video VAEs' silu over whole activations moved 2-byte pieces (6% of a TurboVAED decode).
template <class TX, class TY>
__global__ void unary_vec_kernel(Unary op, const TX* x, TY* y, int64_t n8) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n8; i += int64_t{gridDim.x} * blockDim.x) {
    float v[8];
    load8(x, i, v);
    for (int k = 0; k < 8; ++k) v[k] = unary_f(op, v[k]);
    store8(y, i, v);
  }
}

__global__ void binary_kernel(Binary op, const void* a, Elt at, const void* b, Elt bt, void* y, Elt yt,
                              int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float p = load_elt(a, at, i), q = load_elt(b, bt, i);
    store_elt(y, yt, i, apply(op, p, q));
  }
}

// add / mul on 8 elements per thread: F32 or BF16 a, b, y (any mix), every pointer 16-byte aligned,
// 16-byte loads and stores (two per operand in F32). The scalar kernel's arithmetic (fp32, one rounding
// on store), so both give the same bits; the scalar kernel moved 2-byte pieces at about a third of the
// bandwidth (the MoE sub-layer's two residual adds: 1.9 ms at T = 65,536).
template <class TA, class TB, class TY>
__global__ void binary_vec_kernel(Binary op, const TA* a, const TB* b, TY* y, int64_t n8) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n8; i += int64_t{gridDim.x} * blockDim.x) {
    float p[8], q[8];
    load8(a, i, p);
    load8(b, i, q);
    for (int k = 0; k < 8; ++k) p[k] = apply(op, p[k], q[k]);
    store8(y, i, p);
  }
}

template <class TA, class TB>
void launch_vec(Binary op, const void* a, const void* b, void* y, Elt yt, int64_t n8, cudaStream_t st) {
  const auto* pa = static_cast<const TA*>(a);
  const auto* pb = static_cast<const TB*>(b);
  if (yt == Elt::F32)
    binary_vec_kernel<<<grid_for(n8), kThreads, 0, st>>>(op, pa, pb, static_cast<float*>(y), n8);
  else
    binary_vec_kernel<<<grid_for(n8), kThreads, 0, st>>>(op, pa, pb, static_cast<__nv_bfloat16*>(y), n8);
}

// Gated activations. `layout` says where a row's gate and linear halves are.
enum class Gated : int { SwigluGateFirst, Swiglu7Interleaved, Swiglu7Split };

__device__ __forceinline__ float swiglu7(float g, float l) {
  const float gc = fminf(g, 7.0f);
  const float lc = fminf(fmaxf(l, -7.0f), 7.0f);
  return gc * sigmoid_f(1.702f * gc) * (lc + 1.0f);
}

// swiglu7 on interleaved (gate, linear) pairs in BF16, 8 outputs per thread: output j of the flat
// [rows * width] reads the flat pair (2j, 2j + 1) whatever the row, so the loads need no index division
// (the store does, for its row); two 16-byte loads, one 16-byte store; the same swiglu7 as gated_kernel
// (same bits). u and y 16-byte aligned. y's row r starts at y + r * ld (ld = width: a plain [rows, width]
// output; wider: the columns of a bigger buffer that `into` names); width and ld multiples of 8.
__global__ void swiglu7_interleaved_vec_kernel(const __nv_bfloat16* u, __nv_bfloat16* y, int64_t n8, int64_t width,
                                               int64_t ld) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n8; i += int64_t{gridDim.x} * blockDim.x) {
    float lo[8], hi[8], v[8];  // pairs 0-3, pairs 4-7
    load8(u, 2 * i, lo);
    load8(u, 2 * i + 1, hi);
    for (int k = 0; k < 4; ++k) {
      v[k] = swiglu7(lo[2 * k], lo[2 * k + 1]);
      v[k + 4] = swiglu7(hi[2 * k], hi[2 * k + 1]);
    }
    const int64_t r = 8 * i / width;
    store8(y + r * (ld - width), i, v);  // group i's 8 values start at element 8 i + r (ld - width)
  }
}

// Output [rows, width], row r at y + r * ld. For the fused forms u is [rows, 2 * width]; for the split
// form g = u and l = u2, both [rows, width].
__global__ void gated_kernel(Gated kind, const void* u, Elt ut, const void* u2, Elt u2t, void* y, Elt yt,
                             int64_t rows, int64_t width, int64_t ld) {
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    float v;
    if (kind == Gated::SwigluGateFirst) {
      const float g = load_elt(u, ut, r * 2 * width + c), up = load_elt(u, ut, r * 2 * width + width + c);
      v = g / (1.0f + expf(-g)) * up;
    } else if (kind == Gated::Swiglu7Interleaved) {
      v = swiglu7(load_elt(u, ut, r * 2 * width + 2 * c), load_elt(u, ut, r * 2 * width + 2 * c + 1));
    } else {
      v = swiglu7(load_elt(u, ut, i), load_elt(u2, u2t, i));
    }
    store_elt(y, yt, r * ld + c, v);
  }
}

void unary_into(cudaStream_t st, Unary op, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const Elt xt = elt_of(x, "unary x"), yt = elt_of(y, "unary y");
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  int64_t done = 0;  // elements the vector kernel covers; the scalar kernel takes the rest
  if (xt != Elt::F16 && yt != Elt::F16 && aligned(x.raw()) && aligned(y.raw()) && n >= 8) {
    const int64_t n8 = n / 8;
    void* yp = device_ptr(y);
    auto go = [&](auto* xp) {
      if (yt == Elt::F32)
        unary_vec_kernel<<<grid_for(n8), kThreads, 0, st>>>(op, xp, static_cast<float*>(yp), n8);
      else
        unary_vec_kernel<<<grid_for(n8), kThreads, 0, st>>>(op, xp, static_cast<__nv_bfloat16*>(yp), n8);
    };
    if (xt == Elt::F32) go(static_cast<const float*>(x.raw()));
    else go(static_cast<const __nv_bfloat16*>(x.raw()));
    AVDIT_CUDA_CHECK_LAUNCH();
    done = n8 * 8;
  }
  if (done == n) return;
  const int64_t xs = dtype_nbytes(x.dtype(), 1), ys = dtype_nbytes(y.dtype(), 1);
  unary_kernel<<<grid_for(n - done), kThreads, 0, st>>>(
      op, static_cast<const char*>(x.raw()) + done * xs, xt, static_cast<char*>(device_ptr(y)) + done * ys, yt,
      n - done);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void binary_into(cudaStream_t st_, Binary op, const Tensor& a, const Tensor& b, Tensor& y, const char* what) {
  require_cuda(a, what);
  require_cuda(b, what);
  AVDIT_REQUIRE(a.numel() == b.numel(), "{}: operands {} and {} differ in size", what, a.shape_str(),
                b.shape_str());
  const Elt at = elt_of(a, what), bt = elt_of(b, what), yt = elt_of(y, what);
  const int64_t n = a.numel();
  if (n == 0) return;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = at != Elt::F16 && bt != Elt::F16 && yt != Elt::F16 && aligned(a.raw()) && aligned(b.raw()) &&
                   aligned(y.raw());
  int64_t done = 0;  // elements the vector kernel covers; the scalar kernel takes the rest
  if (vec && n >= 8) {
    const int64_t n8 = n / 8;
    const cudaStream_t st = st_;
    if (at == Elt::F32 && bt == Elt::F32) launch_vec<float, float>(op, a.raw(), b.raw(), device_ptr(y), yt, n8, st);
    else if (at == Elt::F32) launch_vec<float, __nv_bfloat16>(op, a.raw(), b.raw(), device_ptr(y), yt, n8, st);
    else if (bt == Elt::F32) launch_vec<__nv_bfloat16, float>(op, a.raw(), b.raw(), device_ptr(y), yt, n8, st);
    else launch_vec<__nv_bfloat16, __nv_bfloat16>(op, a.raw(), b.raw(), device_ptr(y), yt, n8, st);
    AVDIT_CUDA_CHECK_LAUNCH();
    done = n8 * 8;
  }
  if (done == n) return;
  auto at_elt = [done](const void* p, Elt t) {
    return static_cast<const char*>(p) + done * (t == Elt::F32 ? 4 : 2);
  };
  binary_kernel<<<grid_for(n - done), kThreads, 0, st_>>>(
      op, at_elt(a.raw(), at), at, at_elt(b.raw(), bt), bt, const_cast<char*>(at_elt(y.raw(), yt)), yt, n - done);
  AVDIT_CUDA_CHECK_LAUNCH();
}

void gated_into(cudaStream_t st_, Gated kind, const Tensor& u, const Tensor* u2, Tensor& y_out, const char* what,
                int64_t col) {
  require_cuda(u, what);
  AVDIT_REQUIRE(u.ndim() >= 1, "{}: scalar input", what);
  const Elt ut = elt_of(u, what);
  Elt u2t = ut;
  Shape shape = u.shape();
  if (kind == Gated::Swiglu7Split) {
    require_cuda(*u2, what);
    AVDIT_REQUIRE(u.shape() == u2->shape(), "{}: gate {} and linear {} differ", what, u.shape_str(),
                  u2->shape_str());
    u2t = elt_of(*u2, what);
  } else {
    AVDIT_REQUIRE(shape.back() % 2 == 0, "{}: odd width {} (expected gate and linear halves)", what,
                  shape.back());
    shape.back() /= 2;
  }
  const int64_t width = shape.back(), rows = width ? shape_numel(shape) / width : 0;
  // Into columns [col, col + width) of a 2-D y [rows, ld], or a y of the result's own shape.
  const bool into = col != 0 || (y_out.ndim() == 2 && y_out.size(1) != width);
  const int64_t ld = into ? y_out.size(1) : width;
  AVDIT_CHECK(y_out.numel() == rows * ld && col >= 0 && col + width <= ld,
              "{}: output {} for {} rows of {} at column {}", what, y_out.shape_str(), rows, width, col);
  Tensor& y = y_out;
  const Elt yt = elt_of(y, what);
  if (rows * width == 0) return;
  const int esz = yt == Elt::F32 ? 4 : 2;
  char* y0 = static_cast<char*>(device_ptr(y)) + col * esz;
  if (kind == Gated::Swiglu7Interleaved && ut == Elt::BF16 && yt == Elt::BF16 && width % 8 == 0 && ld % 8 == 0 &&
      reinterpret_cast<uintptr_t>(u.raw()) % 16 == 0 && reinterpret_cast<uintptr_t>(y0) % 16 == 0) {
    const int64_t n8 = rows * width / 8;
    swiglu7_interleaved_vec_kernel<<<grid_for(n8), kThreads, 0, st_>>>(
        static_cast<const __nv_bfloat16*>(u.raw()), reinterpret_cast<__nv_bfloat16*>(y0), n8, width, ld);
    AVDIT_CUDA_CHECK_LAUNCH();
    return;
  }
  gated_kernel<<<grid_for(rows * width), kThreads, 0, st_>>>(kind, u.raw(), ut, u2 ? u2->raw() : nullptr,
                                                                       u2t, y0, yt, rows, width, ld);
  AVDIT_CUDA_CHECK_LAUNCH();
  return;
}

}  // namespace
}  // namespace avdit::cuda

namespace avdit::ops::cuda {
using namespace ::avdit::cuda;

void unary(CudaContext& c, ops::Unary op, const Tensor& x, Tensor& y) {
  c.require_here(x, "unary x");
  AVDIT_CHECK(y.numel() == x.numel(), "unary op: output {} for {}", y.shape_str(), x.shape_str());
  ::avdit::cuda::unary_into(c.stream(), op == ops::Unary::Silu ? ::avdit::cuda::Unary::Silu : ::avdit::cuda::Unary::Sigmoid,
                            x, y);
}

void binary(CudaContext& c, ops::Binary op, const Tensor& a, const Tensor& b, Tensor& y) {
  c.require_here(a, "binary a");
  c.require_here(b, "binary b");
  const auto k = op == ops::Binary::Add   ? ::avdit::cuda::Binary::Add
                 : op == ops::Binary::Sub ? ::avdit::cuda::Binary::Sub
                                          : ::avdit::cuda::Binary::Mul;
  ::avdit::cuda::binary_into(c.stream(), k, a, b, y, "element-wise op");
}

void gated(CudaContext& c, ops::Gated kind, const Tensor& u, const Tensor* l, Tensor& y, int64_t col) {
  c.require_here(u, "gated activation input");
  if (kind == ops::Gated::Swiglu) {
    // The H3 MLP's SwiGLU with the reference's two rounding points (silu, then the product).
    // fp16 u may write an F32 y: the fp16 recipe's gating product kept in fp32.
    const bool f16 = u.dtype() == DType::F16 && (y.dtype() == DType::F16 || y.dtype() == DType::F32);
    AVDIT_CHECK(col == 0 && u.size(-1) % 2 == 0 && y.numel() * 2 == u.numel() &&
                    (f16 || (u.dtype() == y.dtype() && (u.dtype() == DType::F32 || u.dtype() == DType::BF16))),
                "swiglu: u {} {} into y {} {}", dtype_name(u.dtype()), u.shape_str(), dtype_name(y.dtype()),
                y.shape_str());
    const int64_t F = u.size(-1) / 2, S = F ? u.numel() / (2 * F) : 0;
    if (f16) {
      ::avdit::cuda::swiglu_f16(c.stream(), u.raw(), device_ptr(y), y.dtype() == DType::F32, S, F);
      AVDIT_CUDA_CHECK_LAUNCH();
      return;
    }
    ::avdit::cuda::swiglu(c.stream(), u.dtype() == DType::BF16, u.raw(), device_ptr(y), S, F);
    AVDIT_CUDA_CHECK_LAUNCH();
    return;
  }
  ::avdit::cuda::gated_into(c.stream(),
                            kind == ops::Gated::Swiglu7Interleaved ? ::avdit::cuda::Gated::Swiglu7Interleaved
                                                                   : ::avdit::cuda::Gated::Swiglu7Split,
                            u, l, y, "gated activation", col);
}

}  // namespace avdit::ops::cuda
