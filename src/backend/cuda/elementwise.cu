// Element-wise kernels: silu, sigmoid, add, mul, and the gated activations of both DiTs (SwiGLU
// with the gate first for H3; swiglu7 interleaved and split for MAGI-2). fp32 math on any float
// storage; one thread per output element in a grid-stride loop, except add and mul on F32 / BF16
// operands aligned to 16 bytes and swiglu7 on interleaved BF16 pairs: 8 elements per thread with
// 16-byte loads (binary_vec_kernel, swiglu7_interleaved_vec_kernel). An add / mul whose length is not a
// multiple of 8 launches twice (vector kernel, then the scalar kernel on the tail).
#include <cstdint>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ops_cuda.h"

namespace avdit::cuda {
namespace {

enum class Unary : int { Silu, Sigmoid };
enum class Binary : int { Add, Mul };

__global__ void unary_kernel(Unary op, const void* x, Elt xt, void* y, Elt yt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = load_elt(x, xt, i);
    store_elt(y, yt, i, op == Unary::Silu ? v / (1.0f + expf(-v)) : sigmoid_f(v));
  }
}

__global__ void binary_kernel(Binary op, const void* a, Elt at, const void* b, Elt bt, void* y, Elt yt,
                              int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float p = load_elt(a, at, i), q = load_elt(b, bt, i);
    store_elt(y, yt, i, op == Binary::Add ? p + q : p * q);
  }
}

// add / mul on 8 elements per thread: F32 or BF16 a, b, y (any mix), every pointer 16-byte aligned,
// 16-byte loads and stores (two per operand in F32). The scalar kernel's arithmetic (fp32, one rounding
// on store), so both give the same bits; the scalar kernel moved 2-byte pieces at about a third of the
// bandwidth (the MoE sub-layer's two residual adds: 1.9 ms at T = 65,536).
template <class T>
__device__ __forceinline__ void load8(const T* p, int64_t i, float (&v)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 x = reinterpret_cast<const float4*>(p)[2 * i], z = reinterpret_cast<const float4*>(p)[2 * i + 1];
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = z.x, v[5] = z.y, v[6] = z.z, v[7] = z.w;
  } else {
    const uint4 x = reinterpret_cast<const uint4*>(p)[i];
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&x);
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  }
}

template <class T>
__device__ __forceinline__ void store8(T* p, int64_t i, const float (&v)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(p)[2 * i] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[2 * i + 1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    uint4 x;
    auto* h = reinterpret_cast<__nv_bfloat162*>(&x);
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    reinterpret_cast<uint4*>(p)[i] = x;
  }
}

template <class TA, class TB, class TY>
__global__ void binary_vec_kernel(Binary op, const TA* a, const TB* b, TY* y, int64_t n8) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n8; i += int64_t{gridDim.x} * blockDim.x) {
    float p[8], q[8];
    load8(a, i, p);
    load8(b, i, q);
    for (int k = 0; k < 8; ++k) p[k] = op == Binary::Add ? p[k] + q[k] : p[k] * q[k];
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

Tensor unary(Device& dev, Unary op, const Tensor& x, const char* what) {
  require_cuda(x, what);
  const Elt xt = elt_of(x, what);
  Tensor y = cuda_empty(dev, x.shape(), x.dtype());
  if (x.numel() == 0) return y;
  unary_kernel<<<grid_for(x.numel()), kThreads, 0, dev.stream()>>>(op, x.raw(), xt, device_ptr(y), xt, x.numel());
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

void binary_into(Device& dev, Binary op, const Tensor& a, const Tensor& b, Tensor& y, const char* what) {
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
    const cudaStream_t st = dev.stream();
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
  binary_kernel<<<grid_for(n - done), kThreads, 0, dev.stream()>>>(
      op, at_elt(a.raw(), at), at, at_elt(b.raw(), bt), bt, const_cast<char*>(at_elt(y.raw(), yt)), yt, n - done);
  AVDIT_CUDA_CHECK_LAUNCH();
}

Tensor gated(Device& dev, Gated kind, const Tensor& u, const Tensor* u2, std::optional<DType> out,
             const char* what, Tensor* into = nullptr, int64_t col = 0) {
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
  const DType yd = out.value_or(u.dtype());
  if (into) {
    require_cuda(*into, what);
    AVDIT_REQUIRE(into->dtype() == yd && into->ndim() == 2 && into->size(0) == rows && col >= 0 &&
                      col + width <= into->size(1),
                  "{} into: expected {} [{}, >= {}] for columns {} .. {}, got {} {}", what, dtype_name(yd), rows,
                  col + width, col, col + width - 1, dtype_name(into->dtype()), into->shape_str());
  }
  Tensor y = into ? *into : cuda_empty(dev, shape, yd);
  const Elt yt = elt_of(y, what);
  const int64_t ld = into ? into->size(1) : width;
  if (rows * width == 0) return y;
  const int esz = yt == Elt::F32 ? 4 : 2;
  char* y0 = static_cast<char*>(device_ptr(y)) + col * esz;
  if (kind == Gated::Swiglu7Interleaved && ut == Elt::BF16 && yt == Elt::BF16 && width % 8 == 0 && ld % 8 == 0 &&
      reinterpret_cast<uintptr_t>(u.raw()) % 16 == 0 && reinterpret_cast<uintptr_t>(y0) % 16 == 0) {
    const int64_t n8 = rows * width / 8;
    swiglu7_interleaved_vec_kernel<<<grid_for(n8), kThreads, 0, dev.stream()>>>(
        static_cast<const __nv_bfloat16*>(u.raw()), reinterpret_cast<__nv_bfloat16*>(y0), n8, width, ld);
    AVDIT_CUDA_CHECK_LAUNCH();
    return y;
  }
  gated_kernel<<<grid_for(rows * width), kThreads, 0, dev.stream()>>>(kind, u.raw(), ut, u2 ? u2->raw() : nullptr,
                                                                       u2t, y0, yt, rows, width, ld);
  AVDIT_CUDA_CHECK_LAUNCH();
  return y;
}

}  // namespace

Tensor silu(Device& dev, const Tensor& x) { return unary(dev, Unary::Silu, x, "silu"); }
Tensor sigmoid(Device& dev, const Tensor& x) { return unary(dev, Unary::Sigmoid, x, "sigmoid"); }

Tensor add(Device& dev, const Tensor& a, const Tensor& b) {
  require_cuda(a, "add");
  Tensor y = cuda_empty(dev, a.shape(), a.dtype());
  binary_into(dev, Binary::Add, a, b, y, "add");
  return y;
}

Tensor mul(Device& dev, const Tensor& a, const Tensor& b) {
  require_cuda(a, "mul");
  Tensor y = cuda_empty(dev, a.shape(), a.dtype());
  binary_into(dev, Binary::Mul, a, b, y, "mul");
  return y;
}

void add_(Device& dev, Tensor& a, const Tensor& b) { binary_into(dev, Binary::Add, a, b, a, "add_"); }

Tensor swiglu(Device& dev, const Tensor& gate_up, std::optional<DType> out) {
  return gated(dev, Gated::SwigluGateFirst, gate_up, nullptr, out, "swiglu");
}
Tensor concat_columns(Device& dev, const Tensor& a, const Tensor& b) {
  require_cuda(a, "concat_columns a");
  require_cuda(b, "concat_columns b");
  AVDIT_REQUIRE(a.ndim() == 2 && b.ndim() == 2 && a.size(0) == b.size(0) && a.dtype() == b.dtype(),
                "concat_columns: {} {} and {} {} need the same rows and dtype", dtype_name(a.dtype()), a.shape_str(),
                dtype_name(b.dtype()), b.shape_str());
  const int64_t N = a.size(0), Ka = a.size(1), Kb = b.size(1);
  Tensor y = cuda_empty(dev, {N, Ka + Kb}, a.dtype());
  const size_t es = size_t(dtype_nbytes(a.dtype(), 1)), row = size_t(Ka + Kb) * es;
  char* y0 = static_cast<char*>(device_ptr(y));
  if (N && Ka)
    AVDIT_CUDA_CHECK(cudaMemcpy2DAsync(y0, row, a.raw(), size_t(Ka) * es, size_t(Ka) * es, size_t(N),
                                       cudaMemcpyDeviceToDevice, dev.stream()));
  if (N && Kb)
    AVDIT_CUDA_CHECK(cudaMemcpy2DAsync(y0 + size_t(Ka) * es, row, b.raw(), size_t(Kb) * es, size_t(Kb) * es, size_t(N),
                                       cudaMemcpyDeviceToDevice, dev.stream()));
  return y;
}

Tensor slice_columns(Device& dev, const Tensor& x, int64_t col, int64_t width) {
  require_cuda(x, "slice_columns x");
  AVDIT_REQUIRE(x.ndim() == 2 && col >= 0 && width >= 0 && col + width <= x.size(1),
                "slice_columns: columns {} .. {} of {}", col, col + width - 1, x.shape_str());
  const int64_t N = x.size(0);
  Tensor y = cuda_empty(dev, {N, width}, x.dtype());
  const size_t es = size_t(dtype_nbytes(x.dtype(), 1));
  if (N && width)
    AVDIT_CUDA_CHECK(cudaMemcpy2DAsync(device_ptr(y), size_t(width) * es, static_cast<const char*>(x.raw()) + col * es,
                                       size_t(x.size(1)) * es, size_t(width) * es, size_t(N), cudaMemcpyDeviceToDevice,
                                       dev.stream()));
  return y;
}

Tensor swiglu7_interleaved(Device& dev, const Tensor& u, std::optional<DType> out, Tensor* into, int64_t col) {
  return gated(dev, Gated::Swiglu7Interleaved, u, nullptr, out, "swiglu7_interleaved", into, col);
}
Tensor swiglu7_split(Device& dev, const Tensor& g, const Tensor& l, std::optional<DType> out) {
  return gated(dev, Gated::Swiglu7Split, g, &l, out, "swiglu7_split");
}

}  // namespace avdit::cuda
